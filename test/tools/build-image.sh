#!/usr/bin/env bash
# make image: cps-extender's container image.
#
# With a Docker daemon that answers, `docker build -f deploy/Dockerfile` (and `docker push` when
# PUSH is set). Without one, no daemon is needed: the static binary (CGO_ENABLED=0, -trimpath) is
# built into IMAGE_DIR, and test/tools/image writes the image from it: IMAGE_DIR/cps-extender.tar
# (`docker save` format: docker load, kind load image-archive, ctr images import, crane push) and
# IMAGE_DIR/oci (an OCI image layout); with PUSH set it also pushes IMAGE to its registry.
#
#   IMAGE=cps-extender:dev   the image reference
#   IMAGE_DIR=bin/image      where the daemonless build writes
#   PUSH=                    non-empty: push IMAGE (docker's credentials, ~/.docker/config.json)
#   IMAGE_BUILDER=auto       docker | go (daemonless) | auto (docker when its daemon answers)
#   GOARCH=<go env GOARCH>   the image's architecture (daemonless build)
#   VERSION, REVISION        default: git describe, git rev-parse HEAD
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
GO=${GO:-go}
IMAGE=${IMAGE:-cps-extender:dev}
IMAGE_BUILDER=${IMAGE_BUILDER:-auto}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
# The commit's time, so that the same binary gives the same image digest.
CREATED=$(git log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
SOURCE=https://github.com/cps-extender/cps-extender

if [[ $IMAGE_BUILDER == auto ]]; then
  IMAGE_BUILDER=go
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then IMAGE_BUILDER=docker; fi
fi

case $IMAGE_BUILDER in
docker)
  docker build -f deploy/Dockerfile --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" \
    --build-arg "CREATED=$CREATED" --build-arg "SOURCE=$SOURCE" -t "$IMAGE" .
  if [[ -n ${PUSH:-} ]]; then docker push "$IMAGE"; fi
  ;;
go)
  mkdir -p "${IMAGE_DIR:-bin/image}"
  out=$(cd "${IMAGE_DIR:-bin/image}" && pwd)
  CGO_ENABLED=0 GOOS=linux GOARCH=${GOARCH:-$($GO env GOARCH)} $GO build -trimpath \
    -ldflags "-s -w -X main.version=$VERSION -X main.revision=$REVISION" -o "$out/cps-extender" .
  cd test/tools/image
  $GO run . -binary "$out/cps-extender" -tag "$IMAGE" -tarball "$out/cps-extender.tar" -layout "$out/oci" \
    -source "$SOURCE" -version "$VERSION" -revision "$REVISION" -created "$CREATED" ${PUSH:+-push}
  ;;
*)
  echo "build-image.sh: IMAGE_BUILDER=$IMAGE_BUILDER: want docker, go or auto" >&2
  exit 2
  ;;
esac
