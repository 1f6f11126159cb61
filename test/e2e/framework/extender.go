package framework

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BuildExtender runs `go build <flags> -o <dir>/cps-extender .` in the repository root and
// returns the binary's path. The e2e tests add -race, the load test -trimpath; the demo and
// the evaluation build it plain.
func BuildExtender(dir string, flags ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cps-extender")
	args := append(append([]string{"build"}, flags...), "-o", bin, ".")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cps-extender: %v\n%s", err, out)
	}
	return bin, nil
}

// WaitExtenderReady waits up to timeout until get (a GET of the extender's /readyz) answers
// 200, and fails t at once, with the exit error and the log's path, if p exits first.
func WaitExtenderReady(t testing.TB, p *Process, timeout time.Duration, get func() (*http.Response, error)) {
	t.Helper()
	WaitFor(t, timeout, "cps-extender /readyz", func() (bool, error) {
		if p.Exited() {
			return false, StopPolling(fmt.Errorf("cps-extender exited: %v (log %s)", p.ExitErr(), p.LogPath()))
		}
		resp, err := get()
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz: %s", resp.Status)
	})
}

// HTTPGet is a get for WaitExtenderReady over plain HTTP, each try bounded to 2 s.
func HTTPGet(url string) func() (*http.Response, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	return func() (*http.Response, error) { return c.Get(url) }
}
