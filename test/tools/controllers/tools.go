//go:build tools

// This file pins the training-operator and JobSet's manager in go.mod; they are built with
// `go build github.com/kubeflow/training-operator/cmd/training-operator.v1 sigs.k8s.io/jobset`
// by test/tools/build-controllers.sh.
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
	_ "sigs.k8s.io/jobset"
)
