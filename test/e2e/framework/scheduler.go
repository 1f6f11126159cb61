package framework

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const schedulerTimeout = 60 * time.Second

// StartScheduler writes config, a KubeSchedulerConfiguration, to a file in Dir and runs
// kube-scheduler with it at -v=2, logging to Dir/kube-scheduler.log (kube-scheduler-2.log and so
// on for further schedulers of the same control plane). The configuration must set clientConnection.kubeconfig
// (cp.Kubeconfig, or a user's) and leaderElection.leaderElect: false, unless the test checks
// leader election: the scheduler is ready before it holds the lease, and schedules only once it
// does.
//
// It returns once the scheduler's /readyz is ok, which includes the check that its informers
// have delivered their initial lists to its handlers: from then on it schedules. For that it
// serves HTTPS on a free loopback port (--secure-port=PORT, not 0), which /readyz needs; the
// port is never fixed, so parallel tests do not collide, and a lost port race is retried.
// extraArgs are appended to the command line, e.g. "--feature-gates=GenericWorkload=true".
func (cp *ControlPlane) StartScheduler(t testing.TB, config []byte, extraArgs ...string) *Process {
	t.Helper()
	name := cp.uniqueName("kube-scheduler")
	configPath := filepath.Join(cp.Dir, name+".yaml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		t.Fatalf("write scheduler config: %v", err)
	}
	var sched *Process
	cp.startWithRetry(t, name, func() (*Process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		args := append([]string{
			"--config=" + configPath,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"-v=2",
		}, extraArgs...)
		p, err := cp.startChild(t, name, filepath.Join(cp.BinDir, "kube-scheduler"), args, nil)
		if err != nil {
			return nil, err
		}
		sched = p
		readyz := "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/readyz"
		return p, waitUntil(p, schedulerTimeout, func() (bool, error) { return httpOK(readyz) })
	})
	return sched
}

// httpOK reports whether a GET of url answers 200 "ok". For https it skips certificate
// verification: the scheduler's serving certificate is self-signed in memory, and nothing secret
// is sent.
func httpOK(url string) (bool, error) {
	c := http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
		},
	}
	resp, err := c.Get(url)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		return false, fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return true, nil
}

// uniqueName returns base, or base-N if a process of that name was started already.
func (cp *ControlPlane) uniqueName(base string) string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	taken := map[string]bool{}
	for _, p := range cp.procs {
		taken[p.Name] = true
	}
	name := base
	for n := 2; taken[name]; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	return name
}
