//go:build load

package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// envInt reads a positive integer setting from the environment.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envInts reads a space-separated list of positive integers from the environment.
func envInts(t *testing.T, name string, def []int) []int {
	t.Helper()
	fields := strings.Fields(os.Getenv(name))
	if len(fields) == 0 {
		return def
	}
	out := make([]int, len(fields))
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want positive integers separated by spaces", name, os.Getenv(name))
		}
		out[i] = n
	}
	return out
}

// createAll creates objects with workers goroutines (the admin client has no rate limit)
// and reports the rate.
func createAll[T any](t *testing.T, what string, objs []T, workers int, create func(context.Context, T) error) {
	t.Helper()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(objs) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := create(ctx, objs[i])
				cancel()
				if err != nil {
					select {
					case errs <- fmt.Errorf("create %s %d: %w", what, i, err):
					default:
					}
					next.Store(int64(len(objs)))
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	d := time.Since(start)
	t.Logf("created %d %s in %v (%.0f/s)", len(objs), what, d.Round(time.Millisecond), float64(len(objs))/d.Seconds())
}

func createNodes(t *testing.T, c kubernetes.Interface, nodes []*corev1.Node) {
	t.Helper()
	createAll(t, "nodes", nodes, 16, func(ctx context.Context, n *corev1.Node) error {
		_, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
}

func createPods(t *testing.T, c kubernetes.Interface, pods []*corev1.Pod) {
	t.Helper()
	createAll(t, "pods", pods, 16, func(ctx context.Context, p *corev1.Pod) error {
		p = p.DeepCopy()
		p.UID = "" // the API server assigns it
		_, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// extenderBinary builds cps-extender once, optimised and without the race detector: the
// load test measures it as it ships.
func extenderBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cps-load-bin-")
		if err != nil {
			buildErr = err
			return
		}
		flags := []string{"-trimpath"}
		if os.Getenv("LOAD_PROFILE") != "" {
			flags = append(flags, "-tags", "profile") // profile.go: Go's profiles on CPS_PROFILE_ADDR
		}
		buildBin, buildErr = framework.BuildExtender(dir, flags...)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// The fixture names its pods' users by label: let them count where the load tests put it (else ignored, a LabelIgnored Event a job).
const fixtureUsers = "gang:\n  podUserNamespaces: [default, plain, cps, cpswebhook, cpscalls]\n  urgentLabelNamespaces: [default]\n"

// startExtender runs cps-extender against the control plane and waits until it is ready.
func startExtender(t *testing.T, cp *framework.ControlPlane, addr, extraConfig string, env ...string) *framework.Process {
	t.Helper()
	cfgPath := filepath.Join(cp.Dir, "cps-extender.yaml")
	// One extender: it leads without an election.
	cfg := fmt.Sprintf("listen: %s\nurlPrefix: /scheduler\nkubeconfig: %s\nlog:\n  format: json\n  level: info\nleaderElection: {leaderElect: false}\n%s%s", addr, cp.Kubeconfig, fixtureUsers, extraConfig)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	path, args := extenderBinary(t), []string{"--config=" + cfgPath}
	// LOAD_EXTENDER_CPUS (a taskset CPU list, e.g. "1") runs the extender on those CPUs, to
	// measure it on cores it does not share (start the rest elsewhere: taskset -c 0 make load).
	if cpus := os.Getenv("LOAD_EXTENDER_CPUS"); cpus != "" {
		taskset, err := exec.LookPath("taskset")
		if err != nil {
			t.Fatalf("LOAD_EXTENDER_CPUS=%s needs taskset: %v", cpus, err)
		}
		path, args = taskset, append([]string{"-c", cpus, path}, args...)
	}
	p := cp.StartProcess(t, "cps-extender", path, args, env)
	framework.WaitExtenderReady(t, p, 5*time.Minute, framework.HTTPGet("http://"+addr+"/readyz"))
	return p
}

// cpuTime reads the CPU time a process has used, all its threads, user and system, from
// /proc/PID/stat (utime and stime, in clock ticks of 1/100 s on Linux).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may hold spaces:
	// state is field 3, utime field 14 and stime field 15.
	end := strings.LastIndexByte(string(b), ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	const tick = 10 * time.Millisecond
	return time.Duration(utime+stime) * tick, nil
}

// memory reads a process's peak and current resident set size (VmHWM, VmRSS) in bytes.
func memory(pid int) (peak, current int64, err error) {
	f, err := procStatus(pid)
	if err != nil {
		return 0, 0, err
	}
	peak, current = f["VmHWM:"], f["VmRSS:"]
	if peak == 0 || current == 0 {
		return 0, 0, fmt.Errorf("no VmHWM/VmRSS in /proc/%d/status", pid)
	}
	return peak, current, nil
}

// rssParts is the resident memory of pid now, in bytes: anonymous (the heap, stacks) and
// file-backed (the binary's own pages, shared and reclaimable).
func rssParts(pid int) (anon, file int64, err error) {
	f, err := procStatus(pid)
	return f["RssAnon:"], f["RssFile:"], err
}

// procStatus reads the kB fields of /proc/pid/status, in bytes.
func procStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		out[f[0]] = n << 10
	}
	return out, nil
}

// saveProfile fetches a Go profile from url into path with client.
func saveProfile(t *testing.T, client *http.Client, url, path string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Errorf("fetching %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, body)
	}
	if err == nil {
		err = os.WriteFile(path, body, 0o644)
	}
	if err != nil {
		t.Errorf("saving the profile %s: %v", path, err)
		return
	}
	t.Logf("profile: %s (go tool pprof %s)", path, path)
}
