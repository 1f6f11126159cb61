//go:build load

// Package load holds the load tests that `make load` runs on a local control plane; see
// README.md here.
package load

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/load/fixture"
)

// rssLimit is the memory floor at n pods in the informers (5000 nodes): 300 MiB up to
// 20000 pods, 512 MiB at 100k (issue 44's).
func rssLimit(pods int) int64 {
	if pods > 20000 {
		return 512 << 20
	}
	return 300 << 20
}

// TestLoad creates LOAD_NODES kwok nodes and LOAD_JOBS x LOAD_PODS_PER_JOB pending pods
// (the first LOAD_BOUND_JOBS jobs' pods bound, as running jobs: default none), starts cps-extender on them, writes the request bodies for that cluster and replays them
// with run.sh (LOAD_REQUESTS requests per verb, once for each of the curl concurrencies in
// LOAD_CONCURRENCY, after an unreported warm-up of LOAD_REQUESTS/4 filter and prioritize
// calls), then reports the extender's resident memory. Concurrency 1 is what
// one kube-scheduler sends: its scheduling loop calls filter, then prioritize, for one pod
// at a time; higher concurrencies stand for several schedulers, or a stress test.
func TestLoad(t *testing.T) {
	spec := fixture.Spec{
		Nodes:      envInt(t, "LOAD_NODES", 5000),
		Jobs:       envInt(t, "LOAD_JOBS", 4000),
		PodsPerJob: envInt(t, "LOAD_PODS_PER_JOB", 5),
		KwokNodes:  true,
		// No scheduler runs: the pods stay pending, as a backlog does.
		SchedulerName: "cps-scheduler",
	}
	concurrencies, requests := envInts(t, "LOAD_CONCURRENCY", []int{1, 4}), envInt(t, "LOAD_REQUESTS", 2000)

	cp := framework.Start(t, framework.Options{})
	nodes, pods := fixture.Nodes(spec), fixture.Pods(spec)
	bound := min(envInt(t, "LOAD_BOUND_JOBS", 0)*spec.PodsPerJob, len(pods))
	for i, p := range pods[:bound] {
		p.Spec.NodeName = fixture.NodeName(i % spec.Nodes)
	}
	t.Logf("%d of the %d pods bound", bound, len(pods))
	createNodes(t, cp.Client, nodes)
	createPods(t, cp.Client, pods)

	addr := framework.FreeAddr(t)
	extenderBinary(t) // built before the clock starts: the start-up figure is the process's own
	began := time.Now()
	// A Deployment sets GOMEMLIMIT from its memory limit; LOAD_GOMEMLIMIT="" runs without.
	var env []string
	if limit, ok := os.LookupEnv("LOAD_GOMEMLIMIT"); !ok {
		env = append(env, "GOMEMLIMIT=250MiB")
	} else if limit != "" {
		env = append(env, "GOMEMLIMIT="+limit)
	}
	// LOAD_PROFILE (a folder) keeps the extender's heap profile after the verbs there.
	profileAddr := ""
	if os.Getenv("LOAD_PROFILE") != "" {
		profileAddr = framework.FreeAddr(t)
		env = append(env, "CPS_PROFILE_ADDR="+profileAddr)
	}
	t.Logf("cps-extender environment: %v", env)
	ext := startExtender(t, cp, addr, "", env...)
	t.Logf("cps-extender ready after %v with %d nodes and %d pods in its informers", time.Since(began).Round(time.Millisecond), len(nodes), len(pods))
	if peak, current, err := memory(ext.Pid()); err == nil {
		t.Logf("cps-extender memory once ready: VmHWM %d MiB, VmRSS %d MiB", peak>>20, current>>20)
	}
	if line, err := goMemory(addr); err == nil {
		t.Logf("cps-extender once ready: %s", line)
	}

	dir := t.TempDir()
	n, err := fixture.WriteBodies(dir, pods, nodes, 20, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d request bodies (nodeCacheCapable: node names) to %s", n, dir)

	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// replay runs run.sh verb by verb, and logs after each the extender's own latency
	// histogram and its process CPU time per call (every goroutine: informers, recompute
	// and GC included).
	replay := func(concurrency, requests int, verbs ...string) {
		for _, verb := range verbs {
			cmd := exec.Command(filepath.Join(root, "test", "load", "run.sh"), "http://"+addr, dir, itoa(concurrency), itoa(requests), verb)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			t.Logf("%s", cmd.String())
			before, err := scrapeLatency(addr)
			if err != nil {
				t.Fatal(err)
			}
			cpuBefore, err := cpuTime(ext.Pid())
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Run(); err != nil {
				t.Errorf("run.sh: %v", err)
			}
			cpuAfter, err := cpuTime(ext.Pid())
			if err != nil {
				t.Fatal(err)
			}
			after, err := scrapeLatency(addr)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(verb, "volcano-") { // the Volcano verbs have no histogram
				t.Logf("%s", after.summary(before, verb))
			}
			t.Logf("%s: cps-extender used %v of CPU, %.2f ms a call", verb, cpuAfter-cpuBefore, float64((cpuAfter-cpuBefore).Microseconds())/1000/float64(requests))
		}
	}
	// A warm-up, not reported: the first calls after start also pay for the heap growing
	// to its working size and for cold caches; kube-scheduler calls without pause.
	warm := exec.Command(filepath.Join(root, "test", "load", "run.sh"), "http://"+addr, dir, "1", itoa(max(requests/4, 1)), "filter", "prioritize")
	if out, err := warm.CombinedOutput(); err != nil {
		t.Fatalf("warm-up %s: %v\n%s", warm, err, out)
	}
	for _, c := range concurrencies {
		replay(c, requests, "filter", "prioritize", "volcano-predicate")
	}
	peak, current, err := memory(ext.Pid())
	if err != nil {
		t.Fatal(err)
	}
	anon, file, err := rssParts(ext.Pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cps-extender memory with %d nodes and %d pods after the kube-scheduler verbs: VmHWM %d MiB, VmRSS %d MiB (anonymous %d, file %d)",
		len(nodes), len(pods), peak>>20, current>>20, anon>>20, file>>20)
	if line, err := goMemory(addr); err == nil {
		t.Logf("cps-extender after the verbs: %s", line)
	} else {
		t.Errorf("reading the Go runtime's memory: %v", err)
	}
	if dir := os.Getenv("LOAD_PROFILE"); dir != "" {
		saveProfile(t, http.DefaultClient, "http://"+profileAddr+"/debug/pprof/heap?gc=1", filepath.Join(dir, "heap.prof"))
	}
	if limit := rssLimit(len(pods)); len(nodes) >= 5000 && len(pods) >= 20000 && peak > limit {
		t.Errorf("peak RSS %d MiB is over the %d MiB floor", peak>>20, limit>>20)
	}
	// Volcano's prioritize carries every node's full NodeInfo (megabytes at 5000 nodes):
	// fewer requests, and its memory reported apart.
	last := concurrencies[len(concurrencies)-1]
	replay(last, max(requests/50, last), "volcano-prioritize")

	peak, current, err = memory(ext.Pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cps-extender memory after volcano-prioritize too: VmHWM %d MiB, VmRSS %d MiB", peak>>20, current>>20)
}

func itoa(n int) string { return strconv.Itoa(n) }
