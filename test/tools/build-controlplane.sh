#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-scheduler (k8s v1.37.2, from the wrapper module in
# ./controlplane) and kwok (v0.8.0) into an ignored cache folder, and does nothing when the
# pinned versions have not changed. Prints the folder holding the binaries on its last line.
#
#   test/tools/build-controlplane.sh [CACHE_DIR]     (default: <repo>/.cache/controlplane)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-${CPS_CONTROLPLANE_CACHE:-$repo/.cache/controlplane}}

k8s_version=v1.37.2
kwok_version=v0.8.0

# The stamp covers everything that decides what is built: the wrapper module's pins,
# the kwok version and the Go version.
stamp=$( { cat "$here/controlplane/go.mod" "$here/controlplane/go.sum" "$here/controlplane/cmd/etcd/main.go"; \
           echo "kwok $kwok_version"; go version; } | sha256sum | cut -c1-16)
bin="$cache/$stamp"

if [[ -x "$bin/etcd" && -x "$bin/kube-apiserver" && -x "$bin/kube-scheduler" && -x "$bin/kwok" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin.tmp"
echo "building control plane binaries into $bin (k8s $k8s_version, kwok $kwok_version); a cold build takes ~6 minutes" >&2

ver=k8s.io/component-base/version
ldflags="-s -w -X $ver.gitVersion=$k8s_version -X $ver.gitMajor=1 -X $ver.gitMinor=37 -X $ver.gitTreeState=clean"
(
  cd "$here/controlplane"
  GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" \
    ./cmd/etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
)
# kwok has older k8s dependencies: install it from its own module, outside the wrapper.
GOBIN="$bin.tmp" GOFLAGS= go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"

# kwok refuses to start without stages; they ship inside its module.
kwok_dir=$(GOFLAGS= go list -m -f '{{.Dir}}' "sigs.k8s.io/kwok@$kwok_version" 2>/dev/null || true)
if [[ -z "$kwok_dir" || ! -d "$kwok_dir" ]]; then
  kwok_dir=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$kwok_version
fi
mkdir -p "$bin.tmp/kwok-stages"
cp -r "$kwok_dir/kustomize/stage/." "$bin.tmp/kwok-stages/"
chmod -R u+w "$bin.tmp/kwok-stages"

rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$bin"
