//go:build tools

// This file pins the kube-apiserver and kube-scheduler commands in go.mod; they are
// built with `go build k8s.io/kubernetes/cmd/...` by test/tools/build-controlplane.sh.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
