//go:build tools

// This file pins vc-scheduler and vc-controller-manager in go.mod; they are built with
// `go build volcano.sh/volcano/cmd/...` by test/tools/build-volcano.sh.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
