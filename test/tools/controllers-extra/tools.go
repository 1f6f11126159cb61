//go:build tools

// This file pins the optional operators in go.mod (and the default ones, for shared dependency
// versions); test/tools/build-controllers-extra.sh builds
// github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager and sigs.k8s.io/lws/cmd.
package tools

import (
	_ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
	_ "sigs.k8s.io/jobset"
	_ "sigs.k8s.io/lws/cmd"
)
