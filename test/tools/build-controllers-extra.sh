#!/usr/bin/env bash
# Builds the optional workload operators, which `make test` does not build: Kubeflow Trainer v2
# (github.com/kubeflow/trainer/v2 v2.0.0, cmd/trainer-controller-manager) and LeaderWorkerSet
# (sigs.k8s.io/lws v0.7.0, cmd), from the wrapper module in ./controllers-extra, into an ignored
# cache folder, with their CRDs (crd/trainer/, crd/lws/), webhook manifests (webhook/trainer/,
# webhook/lws/) and Trainer's training runtimes (runtimes/trainer/). Does nothing when the pins
# have not changed. Prints the folder on its last line.
#
#   test/tools/build-controllers-extra.sh [CACHE_DIR]     (default: <repo>/.cache/controllers-extra)
#
# Run after test/tools/build-controllers.sh, it reuses that build's compiled dependencies.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-${CPS_CONTROLLERS_EXTRA_CACHE:-$repo/.cache/controllers-extra}}

trainer=github.com/kubeflow/trainer/v2
lws=sigs.k8s.io/lws

# The stamp covers everything that decides what is built: the wrapper module's pins and the Go
# version.
stamp=$( { cat "$here/controllers-extra/go.mod" "$here/controllers-extra/go.sum"; go version; } | sha256sum | cut -c1-16)
bin="$cache/$stamp"

if [[ -x "$bin/trainer-controller-manager" && -x "$bin/lws-controller-manager" && -d "$bin/crd" && -d "$bin/webhook" ]]; then
  echo "$bin"
  exit 0
fi

rm -rf "$bin.tmp"
mkdir -p "$bin.tmp"
echo "building Kubeflow Trainer v2 and LeaderWorkerSet into $bin; ~1 minute after build-controllers.sh, ~5 from an empty build cache" >&2
(
  cd "$here/controllers-extra"
  GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$bin.tmp/" "$trainer/cmd/trainer-controller-manager" "$lws/cmd"
  mv "$bin.tmp/cmd" "$bin.tmp/lws-controller-manager"
  echo "built in ${SECONDS}s" >&2

  trainer_dir=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$trainer")
  lws_dir=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$lws")
  mkdir -p "$bin.tmp/crd/trainer" "$bin.tmp/crd/lws" "$bin.tmp/webhook/trainer" "$bin.tmp/webhook/lws" "$bin.tmp/runtimes"
  cp "$trainer_dir"/manifests/base/crds/trainer.kubeflow.org_*.yaml "$bin.tmp/crd/trainer/"
  cp "$trainer_dir"/manifests/base/webhook/{manifests.yaml,kustomization.yaml,patch.yaml} "$bin.tmp/webhook/trainer/"
  cp -r "$trainer_dir"/manifests/base/runtimes "$bin.tmp/runtimes/trainer"
  cp "$lws_dir"/config/crd/bases/*.yaml "$bin.tmp/crd/lws/"
  cp "$lws_dir"/config/webhook/{manifests.yaml,kustomization.yaml,mutating-patch.yaml,validating-patch.yaml} "$bin.tmp/webhook/lws/"
)
chmod -R u+w "$bin.tmp/crd" "$bin.tmp/webhook" "$bin.tmp/runtimes"

rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$bin"
