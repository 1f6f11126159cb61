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
# The two operators come from the wrapper module in ./controllers (see its README.md).
# Prints the folder on its last line.
#
#   test/tools/build-controllers.sh [CACHE_DIR]     (default: <repo>/.cache/controllers)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-${CPS_CONTROLLERS_CACHE:-$repo/.cache/controllers}}

k8s_version=v1.37.2
training_operator=github.com/kubeflow/training-operator
jobset=sigs.k8s.io/jobset

# The stamp covers everything that decides what is built: both wrapper modules' pins and the
# Go version.
stamp=$( { cat "$here/controlplane/go.mod" "$here/controlplane/go.sum" "$here/controllers/go.mod" "$here/controllers/go.sum"; \
           go version; } | sha256sum | cut -c1-16)
bin="$cache/$stamp"

if [[ -x "$bin/kube-controller-manager" && -x "$bin/training-operator" && -x "$bin/jobset-controller-manager" \
      && -d "$bin/crd/training-operator" && -d "$bin/crd/jobset" && -d "$bin/webhook/jobset" ]]; then
  echo "$bin"
  exit 0
fi

rm -rf "$bin.tmp"
mkdir -p "$bin.tmp"
# The operators' versions, as the wrapper module pins them.
version_of() { (cd "$here/controllers" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' "$1"); }
training_operator_version=$(version_of "$training_operator")
jobset_version=$(version_of "$jobset")
echo "building kube-controller-manager $k8s_version, training-operator $training_operator_version and JobSet $jobset_version into $bin; a cold build takes ~8 minutes on 2 cores (kube-controller-manager ~3 with the control plane built, the operators ~5)" >&2

# kube-controller-manager from the same wrapper module as kube-apiserver and kube-scheduler, so
# that it shares their compiled packages. -mod=mod may add go.sum lines; they are committed.
ver=k8s.io/component-base/version
ldflags="-s -w -X $ver.gitVersion=$k8s_version -X $ver.gitMajor=1 -X $ver.gitMinor=37 -X $ver.gitTreeState=clean"
(
  cd "$here/controlplane"
  GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" k8s.io/kubernetes/cmd/kube-controller-manager
)
echo "kube-controller-manager built in ${SECONDS}s" >&2

# The operators from the wrapper module in ./controllers, in one go build so that the packages
# they share (k8s.io/* at v0.34.1, controller-runtime v0.22.1: the versions JobSet v0.10.1 asks
# for, which the training-operator v1.9.2 compiles against) compile once; see
# controllers/README.md. go build names the binaries after their packages.
(
  cd "$here/controllers"
  GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$jobset_version" \
    -o "$bin.tmp/" "$training_operator/cmd/training-operator.v1" "$jobset"
  mv "$bin.tmp/training-operator.v1" "$bin.tmp/training-operator"
  mv "$bin.tmp/jobset" "$bin.tmp/jobset-controller-manager"
  echo "training-operator and jobset-controller-manager built, ${SECONDS}s in all" >&2

  # The CRDs and JobSet's webhook manifests ship inside the same modules.
  to_dir=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$training_operator")
  js_dir=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$jobset")
  mkdir -p "$bin.tmp/crd/training-operator" "$bin.tmp/crd/jobset" "$bin.tmp/webhook/jobset"
  cp "$to_dir"/manifests/base/crds/kubeflow.org_*.yaml "$bin.tmp/crd/training-operator/"
  cp "$js_dir"/config/components/crd/bases/*.yaml "$bin.tmp/crd/jobset/"
  cp -r "$js_dir"/config/components/webhook/{manifests.yaml,kustomization.yaml,patches} "$bin.tmp/webhook/jobset/"
)
chmod -R u+w "$bin.tmp/crd" "$bin.tmp/webhook"

rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$bin"
