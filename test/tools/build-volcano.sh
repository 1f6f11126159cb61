#!/usr/bin/env bash
# Builds Volcano's vc-scheduler and vc-controller-manager (volcano.sh/volcano v1.14.1, from the
# wrapper module in ./volcano) into an ignored cache folder, with Volcano's CRDs copied from the
# same module, and does nothing when the pins have not changed. Prints the folder on its last line.
#
#   test/tools/build-volcano.sh [CACHE_DIR]     (default: <repo>/.cache/volcano)
#
# Why v1.14.1 against volcano.sh/apis v1.14.0: see test/tools/volcano/README.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-${CPS_VOLCANO_CACHE:-$repo/.cache/volcano}}

volcano_version=v1.14.1

# The stamp covers everything that decides what is built: the wrapper module's pins and the
# Go version.
stamp=$( { cat "$here/volcano/go.mod" "$here/volcano/go.sum"; go version; } | sha256sum | cut -c1-16)
bin="$cache/$stamp"

if [[ -x "$bin/vc-scheduler" && -x "$bin/vc-controller-manager" && -d "$bin/crd" ]]; then
  echo "$bin"
  exit 0
fi

rm -rf "$bin.tmp"
mkdir -p "$bin.tmp"
echo "building Volcano $volcano_version (vc-scheduler, vc-controller-manager) into $bin; a cold build takes 5-9 minutes on 2 cores" >&2

ldflags="-s -w -X volcano.sh/volcano/pkg/version.Version=$volcano_version"
(
  cd "$here/volcano"
  # One go build for both commands, so their shared packages compile once; it names the
  # binaries after their folders (scheduler, controller-manager).
  GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" \
    volcano.sh/volcano/cmd/scheduler volcano.sh/volcano/cmd/controller-manager
  mv "$bin.tmp/scheduler" "$bin.tmp/vc-scheduler"
  mv "$bin.tmp/controller-manager" "$bin.tmp/vc-controller-manager"

  # The CRDs (PodGroup, Queue, Job, HyperNode, ...) ship inside the same module.
  volcano_dir=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' volcano.sh/volcano)
  mkdir -p "$bin.tmp/crd"
  cp "$volcano_dir"/config/crd/volcano/bases/*.yaml "$bin.tmp/crd/"
  chmod -R u+w "$bin.tmp/crd"
)

rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$bin"
