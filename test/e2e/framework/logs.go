package framework

import (
	"bytes"
	"os"
	"testing"
)

// DumpLogLines is how many lines of each process log DumpLogs prints.
const DumpLogLines = 60

// DumpLogs prints the last DumpLogLines lines of the log of every process started through the
// control plane to the test log. Start calls it from the test's cleanup when the test failed.
func (cp *ControlPlane) DumpLogs(t testing.TB) {
	t.Helper()
	dumped := map[string]bool{} // a component retried after a port race reuses its log
	for _, p := range cp.Processes() {
		if dumped[p.LogPath()] {
			continue
		}
		dumped[p.LogPath()] = true
		b, err := os.ReadFile(p.LogPath())
		if err != nil {
			t.Logf("---- %s: %v", p.Name, err)
			continue
		}
		t.Logf("---- last %d lines of %s (pid %d, %s):\n%s", DumpLogLines, p.Name, p.Pid(), p.LogPath(), tail(b, DumpLogLines))
	}
}

// tail returns the last n lines of b.
func tail(b []byte, n int) []byte {
	b = bytes.TrimRight(b, "\n")
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}
