#!/usr/bin/env bash
# Builds the real workload controllers the end-to-end tests run next to the local control plane,
# into an ignored cache folder, and does nothing when the pins have not changed:
#   - kube-controller-manager (k8s v1.37.2, from the control plane's wrapper module in
#     ./controlplane): the Job controller, the garbage collector, the StatefulSet controller;
#   - training-operator (github.com/kubeflow/training-operator v1.9.2, cmd/training-operator.v1):
#     TFJob, PyTorchJob, ...; its CRDs go to crd/training-operator/;
#   - jobset-controller-manager (sigs.k8s.io/jobset v0.10.1, the module's root package); its CRD
#     goes to crd/jobset/, its webhook manifests (and the kustomize patches that narrow the pod
#     webhooks to JobSet pods) to webhook/jobset/.
# The operators are built in their downloaded module's folder, with their own go.mod and go.sum:
# `go install mod@version` asks the proxy for a version list, which it refuses for some modules.
# Prints the folder on its last line.
#
#   test/tools/build-controllers.sh [CACHE_DIR]     (default: <repo>/.cache/controllers)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-${CPS_CONTROLLERS_CACHE:-$repo/.cache/controllers}}

k8s_version=v1.37.2
training_operator=github.com/kubeflow/training-operator
training_operator_version=v1.9.2
jobset=sigs.k8s.io/jobset
jobset_version=v0.10.1

# The stamp covers everything that decides what is built: the wrapper module's pins (for
# kube-controller-manager), the operators' versions and the Go version.
stamp=$( { cat "$here/controlplane/go.mod" "$here/controlplane/go.sum"; \
           echo "$training_operator $training_operator_version"; echo "$jobset $jobset_version"; \
           go version; } | sha256sum | cut -c1-16)
bin="$cache/$stamp"

if [[ -x "$bin/kube-controller-manager" && -x "$bin/training-operator" && -x "$bin/jobset-controller-manager" \
      && -d "$bin/crd/training-operator" && -d "$bin/crd/jobset" && -d "$bin/webhook/jobset" ]]; then
  echo "$bin"
  exit 0
fi

rm -rf "$bin.tmp"
mkdir -p "$bin.tmp"
echo "building kube-controller-manager $k8s_version, training-operator $training_operator_version and JobSet $jobset_version into $bin; a cold build takes ~8 minutes on 2 cores" >&2

# module_dir prints the folder of a module version in the module cache, downloading it first.
module_dir() {
  local dir
  dir=$(GOFLAGS= go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  if [[ -z "$dir" || ! -d "$dir" ]]; then
    echo "no module folder for $1" >&2
    return 1
  fi
  echo "$dir"
}

# kube-controller-manager from the same wrapper module as kube-apiserver and kube-scheduler, so
# that it shares their compiled packages. -mod=mod may add go.sum lines; they are committed.
ver=k8s.io/component-base/version
ldflags="-s -w -X $ver.gitVersion=$k8s_version -X $ver.gitMajor=1 -X $ver.gitMinor=37 -X $ver.gitTreeState=clean"
(
  cd "$here/controlplane"
  GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" k8s.io/kubernetes/cmd/kube-controller-manager
)
echo "kube-controller-manager built in ${SECONDS}s" >&2

# The operators, each in its own module's folder (read-only: go build writes only the binary).
to_dir=$(module_dir "$training_operator@$training_operator_version")
(
  cd "$to_dir"
  GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w" -o "$bin.tmp/training-operator" ./cmd/training-operator.v1
)
echo "training-operator built, ${SECONDS}s in all" >&2
mkdir -p "$bin.tmp/crd/training-operator"
cp "$to_dir"/manifests/base/crds/*.yaml "$bin.tmp/crd/training-operator/"
rm -f "$bin.tmp/crd/training-operator/kustomization.yaml"

js_dir=$(module_dir "$jobset@$jobset_version")
(
  cd "$js_dir"
  GOFLAGS=-buildvcs=false go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$jobset_version" \
    -o "$bin.tmp/jobset-controller-manager" .
)
echo "jobset-controller-manager built, ${SECONDS}s in all" >&2
mkdir -p "$bin.tmp/crd/jobset" "$bin.tmp/webhook/jobset"
cp "$js_dir"/config/components/crd/bases/*.yaml "$bin.tmp/crd/jobset/"
cp -r "$js_dir"/config/components/webhook/{manifests.yaml,kustomization.yaml,patches} "$bin.tmp/webhook/jobset/"
chmod -R u+w "$bin.tmp/crd" "$bin.tmp/webhook"

rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$bin"
