//go:build load

package load

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/load/fixture"
)

// The scheduler's API client limits in every run, well above the binding rates reached.
const (
	schedulerQPS   = 500
	schedulerBurst = 1000
)

// throughputRun is one way of binding the backlog.
type throughputRun struct {
	name, namespace string
	// extender starts the extender the scheduler calls and returns its URL and how to stop
	// it after the run; nil runs kube-scheduler without extenders.
	extender func() (url string, stop func())
	// nativeGang gives every job a Workload and a PodGroup of all its pods, and runs
	// kube-scheduler with the GenericWorkload feature gate.
	nativeGang bool
	// wholeGangs says that no job may end partly bound.
	wholeGangs bool
}

// throughputFigures are one run's binding rates.
type throughputFigures struct{ podsPerSecond, jobsPerSecond float64 }

// TestThroughput measures kube-scheduler binding a backlog of PS/worker jobs (1+3, 2+8 and
// 4+16 pods) on THROUGHPUT_NODES kwok nodes (1000), five times in the same control plane,
// with the same shipped scheduler profile: without extenders; through a no-op extender that
// has the same four verbs (filter passes every node, prioritize scores 0, bind posts the
// Binding, preempt keeps every candidate); with kube-scheduler's native gang scheduling (a
// Workload and a PodGroup per job, minCount all its pods); through cps-extender; and through
// cps-extender with its turn-gate webhook registered, as the deploy overlays do (and, when
// THROUGHPUT_RUNS names it, with the webhook's calls never switched off). Each run starts on
// an empty cluster (the previous run's pods are deleted first, its extender stopped) with
// the scheduler running; the backlog is then created, 4 pods at a time. It reports pods/s (first
// to last binding) and jobs/s (first to last job whose pods are all bound) of each, and
// cps-extender's ratios to the others. It asserts only that every pod is bound and, under
// native gang scheduling and cps-extender, that no job ends partly bound: the rates are
// figures, not pass marks.
func TestThroughput(t *testing.T) {
	nodeCount := envInt(t, "THROUGHPUT_NODES", 1000)
	scale := envInt(t, "THROUGHPUT_JOBS_PER_SIZE", 60)
	// The Workload API is served throughout; only the native gang run's scheduler has the
	// gate on, so the other runs schedule as the shipped profile does.
	cp := framework.Start(t, framework.Options{FeatureGates: framework.NativeGangFeatureGate, RuntimeConfig: framework.WorkloadAPIRuntimeConfig})
	createNodes(t, cp.Client, fixture.Nodes(fixture.Spec{Nodes: nodeCount, KwokNodes: true}))

	var cpsAddr string // cps-extender's, once its run started
	// LOAD_PROFILE (a folder) keeps CPU profiles there of kube-scheduler in every run and of
	// cps-extender in its runs, taken from the backlog's creation on for
	// THROUGHPUT_PROFILE_SECONDS (20).
	var profileAddr string // cps-extender's profile address, once its run started
	extenderEnv := func() []string {
		if os.Getenv("LOAD_PROFILE") == "" {
			return nil
		}
		profileAddr = framework.FreeAddr(t)
		return []string{"CPS_PROFILE_ADDR=" + profileAddr}
	}
	// Each extender starts just before its own run and stops after it, so that no run
	// shares the cores with an extender it does not use (a cps-extender left running
	// watches and recomputes through the next run: it cost the webhook run, which followed
	// one, about a tenth of its rate before 2026-12-03 16:40).
	stopProcess := func(p *framework.Process) func() {
		return func() {
			if err := p.Stop(); err != nil {
				t.Logf("stopping %s: %v", p.Name, err)
			}
		}
	}
	// startWebhookExtender starts cps-extender with the shipped turn-gate webhook registered
	// (plus extraConfig) and waits until its calls are switched as calls says; stopping it
	// also removes the webhook configuration.
	startWebhookExtender := func(extraConfig string, calls bool) (string, func()) {
		cpsAddr = framework.FreeAddr(t)
		hookAddr := framework.FreeAddr(t)
		framework.RegisterRepoTurnGateWebhook(t, cp.Client, hookAddr)
		p := startExtender(t, cp, cpsAddr, framework.TurnGateWebhookConfig(hookAddr)+extraConfig, extenderEnv()...)
		framework.WaitTurnGateWebhook(t, cp.Client, hookAddr, calls, time.Minute)
		return "http://" + cpsAddr + "/scheduler", func() {
			stopProcess(p)()
			err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(),
				"cps-extender-turn-gate", metav1.DeleteOptions{})
			if err != nil {
				t.Errorf("deleting the turn-gate webhook configuration: %v", err)
			}
		}
	}
	runs := []throughputRun{
		{name: "no extender", namespace: "none"},
		{name: "no-op extender", namespace: "noop", extender: func() (string, func()) {
			noop := httptest.NewServer(noopExtender(cp.Client))
			return noop.URL + "/scheduler", noop.Close
		}},
		{name: "native gang", namespace: "gang", nativeGang: true, wholeGangs: true},
		{name: "cps-extender", namespace: "cps", wholeGangs: true, extender: func() (string, func()) {
			cpsAddr = framework.FreeAddr(t)
			p := startExtender(t, cp, cpsAddr, "", extenderEnv()...)
			return "http://" + cpsAddr + "/scheduler", stopProcess(p)
		}},
		// As deployed, with the turn-gate webhook: a pod created while a job waits comes with
		// the gate, lifted in its job's turn (an API write that the other runs do not make);
		// while none waits the extender switches the API server's calls off.
		{name: "cps-extender webhook", namespace: "cpswebhook", wholeGangs: true, extender: func() (string, func()) {
			return startWebhookExtender("", false)
		}},
		// The webhook with its calls never switched off (webhook.offAfter 0): what the API
		// server's call on every pod creation costs. Only when THROUGHPUT_RUNS names it.
		{name: "cps-extender webhook calls on", namespace: "cpscalls", wholeGangs: true, extender: func() (string, func()) {
			return startWebhookExtender("  offAfter: 0s\n", true)
		}},
	}
	// THROUGHPUT_RUNS, when set, runs only the named runs (comma-separated), in its order,
	// e.g. to compare a change of one setup with native gang, or to see the order's effect.
	if only := os.Getenv("THROUGHPUT_RUNS"); only != "" {
		var picked []throughputRun
		for _, name := range strings.Split(only, ",") {
			i := slices.IndexFunc(runs, func(r throughputRun) bool { return r.name == name })
			if i < 0 {
				t.Fatalf("THROUGHPUT_RUNS: no run %q", name)
			}
			picked = append(picked, runs[i])
		}
		runs = picked
	} else {
		runs = slices.DeleteFunc(runs, func(r throughputRun) bool { return r.name == "cps-extender webhook calls on" })
	}
	figures := map[string]throughputFigures{}
	var pods []*corev1.Pod
	for _, run := range runs {
		pods = throughputBacklog(run.namespace, scale)
		if _, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: run.namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var schedulerArgs []string
		if run.nativeGang {
			// The groups exist before their pods, as a job controller would create them.
			// They are left after the run: a group without pods gives no scheduler work.
			createAll(t, "Workloads and PodGroups", nativeGangs(pods), 4, func(ctx context.Context, g framework.NativeGang) error {
				return g.Create(ctx, cp.Client)
			})
			schedulerArgs = append(schedulerArgs, "--feature-gates="+framework.NativeGangFeatureGate)
		}
		extenderURL, stopExtender := "", func() {}
		if run.extender != nil {
			extenderURL, stopExtender = run.extender()
		}
		profileDir := os.Getenv("LOAD_PROFILE")
		if profileDir != "" {
			// kube-scheduler serves Go's profiles on its secure port; this lets the test
			// read them without credentials (the port is on loopback).
			schedulerArgs = append(schedulerArgs, "--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/*")
		}
		binds := watchBindings(t, cp.Client, run.namespace)
		sched := cp.StartScheduler(t, schedulerConfig(t, cp, extenderURL), schedulerArgs...)
		cpuBefore := processesCPU(cp)
		var profiles []<-chan struct{}
		if profileDir != "" {
			seconds := envInt(t, "THROUGHPUT_PROFILE_SECONDS", 20)
			query := fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds)
			if strings.HasPrefix(run.name, "cps-extender") {
				profiles = append(profiles, profileInBackground(t, http.DefaultClient, seconds, "http://"+profileAddr+query,
					filepath.Join(profileDir, run.namespace+"-cpu.prof")))
			}
			if addr := servingAddr(t, sched); addr != "" {
				// Its serving certificate is self-signed; the port is this test's, on loopback.
				insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
				profiles = append(profiles, profileInBackground(t, insecure, seconds, "https://"+addr+query,
					filepath.Join(profileDir, run.namespace+"-kube-scheduler-cpu.prof")))
			}
		}
		// The backlog arrives while the scheduler runs, a few jobs at a time, faster than
		// it is bound; see the README's known limits for a backlog already there when
		// kube-scheduler starts.
		createAll(t, "pods", pods, 4, func(ctx context.Context, p *corev1.Pod) error {
			_, err := cp.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
		bound := binds.waitBound(len(pods), 10*time.Minute)
		logCPU(t, run.name, cpuBefore, processesCPU(cp))
		for _, done := range profiles {
			<-done
		}
		if err := sched.Stop(); err != nil {
			t.Logf("stopping kube-scheduler: %v", err)
		}
		jobs := binds.jobs(pods)
		if bound < len(pods) {
			t.Errorf("%s: %d of %d pods bound after 10m", run.name, bound, len(pods))
		}
		if run.wholeGangs && len(jobs.partial) > 0 {
			t.Errorf("%s: %d jobs partly bound at the end: %s", run.name, len(jobs.partial), strings.Join(jobs.partial, ", "))
		}
		// A gang scheduler posts a gang's Bindings together; one whose first and last
		// Bindings lie seconds apart placed it pod by pod (5 s, as the e2e tests allow).
		if posting := 5 * time.Second; run.wholeGangs && jobs.longestPartial > posting {
			t.Errorf("%s: a job was partly bound for %v", run.name, jobs.longestPartial.Round(time.Millisecond))
		}
		if bound == len(pods) {
			first, last := binds.span()
			f := throughputFigures{
				podsPerSecond: float64(len(pods)-1) / last.Sub(first).Seconds(),
				jobsPerSecond: float64(len(jobs.whole)-1) / jobs.whole[len(jobs.whole)-1].Sub(jobs.whole[0]).Seconds(),
			}
			figures[run.name] = f
			t.Logf("%s: %d pods of %d jobs bound in %v (first to last binding): %.1f pods/s; jobs bound whole from %v to %v after the first binding: %.2f jobs/s; longest a job was partly bound: %v",
				run.name, len(pods), len(jobs.whole), last.Sub(first).Round(time.Millisecond), f.podsPerSecond,
				jobs.whole[0].Sub(first).Round(time.Millisecond), jobs.whole[len(jobs.whole)-1].Sub(first).Round(time.Millisecond), f.jobsPerSecond,
				jobs.longestPartial.Round(time.Millisecond))
		}
		if strings.HasPrefix(run.name, "cps-extender") {
			logViewWaits(t, cpsAddr)
			logTurnGates(t, cpsAddr)
		}
		stopExtender()
		deleteAll(t, cp.Client, run.namespace)
	}
	if len(figures) < len(runs) {
		return // a run did not bind its backlog: its error says which
	}
	var rates, ratios []string
	for _, run := range runs {
		f := figures[run.name]
		rates = append(rates, fmt.Sprintf("%s %.1f pods/s %.2f jobs/s", run.name, f.podsPerSecond, f.jobsPerSecond))
	}
	t.Logf("throughput on %d nodes, %d pods of %d jobs: %s", nodeCount, len(pods), 3*scale, strings.Join(rates, ", "))
	for _, name := range []string{"cps-extender", "cps-extender webhook", "cps-extender webhook calls on"} {
		cps, ok := figures[name]
		if !ok {
			continue
		}
		ratios = ratios[:0]
		for _, other := range []string{"native gang", "no-op extender", "no extender"} {
			f, ok := figures[other]
			if !ok {
				continue
			}
			ratios = append(ratios, fmt.Sprintf("/ %s %.2f (jobs/s %.2f)", other, cps.podsPerSecond/f.podsPerSecond, cps.jobsPerSecond/f.jobsPerSecond))
		}
		t.Logf("%s pods/s ratio %s", name, strings.Join(ratios, ", "))
	}
}

// processesCPU reads the CPU time each running process of cp has used so far, by name, and
// this test process's own under "test" (it creates the pods and watches the bindings).
func processesCPU(cp *framework.ControlPlane) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, p := range cp.Processes() {
		if p.Exited() {
			continue
		}
		if d, err := cpuTime(p.Pid()); err == nil {
			out[p.Name] = d
		}
	}
	if d, err := cpuTime(os.Getpid()); err == nil {
		out["test"] = d
	}
	return out
}

// profileInBackground saves the profile at url into path with client, and closes the
// channel it returns when done; the test's cleanup waits for it too, should the test stop
// first. client's Timeout, when not set, becomes the profile's seconds and a minute.
func profileInBackground(t *testing.T, client *http.Client, seconds int, url, path string) <-chan struct{} {
	c := *client
	if c.Timeout == 0 {
		c.Timeout = time.Duration(seconds)*time.Second + time.Minute
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		saveProfile(t, &c, url, path)
	}()
	t.Cleanup(func() { <-done })
	return done
}

// servingAddr is the host:port kube-scheduler p logged it serves on ("" if none).
func servingAddr(t *testing.T, p *framework.Process) string {
	out, err := p.Output()
	if err != nil {
		t.Logf("reading %s's log: %v", p.Name, err)
		return ""
	}
	_, after, ok := strings.Cut(string(out), "Serving securely on ")
	if !ok {
		t.Logf("%s logged no serving address", p.Name)
		return ""
	}
	addr, _, _ := strings.Cut(after, "\n")
	return strings.TrimSpace(addr)
}

// logCPU logs the CPU time each process used between two readings of processesCPU, the
// largest first: on a machine of few cores, the binding rate is bounded by what every
// process of the run takes from the scheduler's cores, not by the scheduler alone.
func logCPU(t *testing.T, run string, before, after map[string]time.Duration) {
	t.Helper()
	type use struct {
		name string
		cpu  time.Duration
	}
	var uses []use
	var total time.Duration
	for name, d := range after {
		if d -= before[name]; d > 0 {
			uses = append(uses, use{name, d})
			total += d
		}
	}
	slices.SortFunc(uses, func(a, b use) int { return cmp.Compare(b.cpu, a.cpu) })
	parts := make([]string, len(uses))
	for i, u := range uses {
		parts[i] = fmt.Sprintf("%s %.2fs", u.name, u.cpu.Seconds())
	}
	t.Logf("%s: CPU from the scheduler's start to the last binding %.2fs: %s", run, total.Seconds(), strings.Join(parts, ", "))
}

// logViewWaits logs how long, in all, the filter of the extender at addr held kube-scheduler's
// cycle waiting for a newer snapshot, by cause, against the filter's whole time: the cycle
// places one pod at a time, so those waits come straight off the binding rate.
func logViewWaits(t *testing.T, addr string) {
	t.Helper()
	var parts []string
	for _, sample := range []string{
		`cps_extender_request_duration_seconds_sum{verb="filter"}`,
		`cps_extender_request_duration_seconds_count{verb="filter"}`,
		`cps_extender_filter_view_wait_seconds_sum{cause="unseen"}`,
		`cps_extender_filter_view_wait_seconds_count{cause="unseen"}`,
		`cps_extender_filter_view_wait_seconds_sum{cause="gathering"}`,
		`cps_extender_filter_view_wait_seconds_count{cause="gathering"}`,
		`cps_extender_filter_view_wait_seconds_sum{cause="behind"}`,
		`cps_extender_filter_view_wait_seconds_count{cause="behind"}`,
		`cps_extender_queue_recompute_seconds_sum`,
		`cps_extender_queue_recompute_seconds_count`,
	} {
		v, err := metric(addr, sample)
		if err != nil {
			t.Logf("reading %s: %v", sample, err)
			return
		}
		parts = append(parts, fmt.Sprintf("%s %.3g", strings.TrimPrefix(sample, "cps_extender_"), v))
	}
	t.Logf("cps-extender filter: %s", strings.Join(parts, ", "))
}

// logTurnGates logs how many webhook calls the extender at addr answered and how many turn
// gates it lifted: how much of a backlog the webhook gated.
func logTurnGates(t *testing.T, addr string) {
	t.Helper()
	var parts []string
	for _, sample := range []string{
		`cps_extender_requests_total{code="200",verb="turn-gate"}`,
		`cps_extender_turn_gate_lifts_total{result="sent"}`,
		`cps_extender_turn_gate_webhook_on`,
	} {
		v, err := metric(addr, sample) // 0 for a counter not yet touched
		if err != nil {
			t.Logf("reading %s: %v", sample, err)
			return
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", strings.TrimPrefix(sample, "cps_extender_"), v))
	}
	t.Logf("cps-extender turn gate: %s", strings.Join(parts, ", "))
}

// throughputBacklog is the backlog of TestThroughput in namespace: scale jobs each of 1 PS
// and 3 workers, of 2 PS and 8 workers and of 4 PS and 16 workers, every job's pods in a row.
func throughputBacklog(namespace string, scale int) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, size := range []struct{ ps, pods int }{{1, 4}, {2, 10}, {4, 20}} {
		pods = append(pods, fixture.Pods(fixture.Spec{
			Jobs: scale, PodsPerJob: size.pods, PS: size.ps, Namespace: namespace,
			JobPrefix: fmt.Sprintf("j%d", size.pods), SchedulerName: "cps-scheduler",
		})...)
	}
	return pods
}

// nativeGangs makes each job of pods (by fixture.JobLabel, its pods in a row) a native gang
// of all its pods, joins the pods to it and returns the gangs.
func nativeGangs(pods []*corev1.Pod) []framework.NativeGang {
	var gangs []framework.NativeGang
	for _, p := range pods {
		job := p.Labels[fixture.JobLabel]
		if len(gangs) == 0 || gangs[len(gangs)-1].Name != job {
			gangs = append(gangs, framework.NativeGang{Namespace: p.Namespace, Name: job})
		}
		g := &gangs[len(gangs)-1]
		g.MinCount++
		g.Join(p)
	}
	return gangs
}

// schedulerConfig is shippedSchedulerConfig with the API client limits raised: the shipped
// limits would throttle binding a backlog. An empty extenderURL drops the extenders block.
func schedulerConfig(t *testing.T, cp *framework.ControlPlane, extenderURL string) []byte {
	t.Helper()
	cfg := string(shippedSchedulerConfig(t, cp, extenderURL, extenderURL != ""))
	kubeconfig := "kubeconfig: " + cp.Kubeconfig
	return []byte(strings.Replace(cfg, kubeconfig, fmt.Sprintf("%s\n  qps: %d\n  burst: %d", kubeconfig, schedulerQPS, schedulerBurst), 1))
}

// noopExtender answers the four kube-scheduler verbs without any logic.
func noopExtender(c kubernetes.Interface) http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /scheduler/filter", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer(w, &extenderv1.ExtenderFilterResult{NodeNames: args.NodeNames, Nodes: args.Nodes, FailedNodes: extenderv1.FailedNodesMap{}})
	})
	mux.HandleFunc("POST /scheduler/prioritize", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.NodeNames == nil {
			http.Error(w, fmt.Sprintf("want node names: %v", err), http.StatusBadRequest)
			return
		}
		scores := make(extenderv1.HostPriorityList, len(*args.NodeNames))
		for i, n := range *args.NodeNames {
			scores[i].Host = n
		}
		answer(w, scores)
	})
	mux.HandleFunc("POST /scheduler/bind", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderBindingArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: args.PodName, Namespace: args.PodNamespace, UID: args.PodUID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: args.Node},
		}
		result := &extenderv1.ExtenderBindingResult{}
		if err := c.CoreV1().Pods(args.PodNamespace).Bind(r.Context(), b, metav1.CreateOptions{}); err != nil {
			result.Error = err.Error()
		}
		answer(w, result)
	})
	mux.HandleFunc("POST /scheduler/preempt", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderPreemptionArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer(w, &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: args.NodeNameToMetaVictims})
	})
	return mux
}

// bindings records when each pod of a namespace was first seen bound.
type bindings struct {
	mu    sync.Mutex
	at    map[string]time.Time
	first time.Time
	last  time.Time
}

// watchBindings starts an informer on the namespace's pods and records bindings.
func watchBindings(t *testing.T, c kubernetes.Interface, namespace string) *bindings {
	t.Helper()
	b := &bindings{at: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	seen := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, done := b.at[pod.Name]; done {
			return
		}
		b.at[pod.Name] = now
		if b.first.IsZero() {
			b.first = now
		}
		b.last = now
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return b
}

// waitAll waits until n pods are bound and returns the first and last binding times; it
// fails the test if they are not bound within timeout.
func (b *bindings) waitAll(t *testing.T, n int, timeout time.Duration) (time.Time, time.Time) {
	t.Helper()
	if bound := b.waitBound(n, timeout); bound < n {
		t.Fatalf("%d of %d pods bound after %v", bound, n, timeout)
	}
	return b.span()
}

// waitBound waits until n pods are bound, or timeout passes, and returns how many are.
func (b *bindings) waitBound(n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		b.mu.Lock()
		bound := len(b.at)
		b.mu.Unlock()
		if bound >= n || time.Now().After(deadline) {
			return bound
		}
		time.Sleep(framework.PollInterval)
	}
}

// span returns the first and the last binding time.
func (b *bindings) span() (time.Time, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.first, b.last
}

// jobBindings is what the bindings say of a backlog's jobs.
type jobBindings struct {
	// whole holds, for every job whose pods are all bound, when its last pod was, in order.
	whole []time.Time
	// partial names the jobs with some of their pods bound, not all.
	partial []string
	// longestPartial is the longest time from a job's first binding to its last.
	longestPartial time.Duration
}

// jobs groups the bindings of pods by job (fixture.JobLabel).
func (b *bindings) jobs(pods []*corev1.Pod) jobBindings {
	b.mu.Lock()
	defer b.mu.Unlock()
	type job struct {
		size, bound int
		first, last time.Time
	}
	byName := map[string]*job{}
	var names []string
	for _, p := range pods {
		name := p.Labels[fixture.JobLabel]
		j := byName[name]
		if j == nil {
			j = &job{}
			byName[name] = j
			names = append(names, name)
		}
		j.size++
		at, ok := b.at[p.Name]
		if !ok {
			continue
		}
		j.bound++
		if j.first.IsZero() || at.Before(j.first) {
			j.first = at
		}
		if at.After(j.last) {
			j.last = at
		}
	}
	var out jobBindings
	for _, name := range names {
		j := byName[name]
		switch {
		case j.bound == j.size:
			out.whole = append(out.whole, j.last)
		case j.bound > 0:
			out.partial = append(out.partial, name)
		}
		out.longestPartial = max(out.longestPartial, j.last.Sub(j.first))
	}
	slices.SortFunc(out.whole, time.Time.Compare)
	return out
}

// deleteAll deletes the namespace's pods at once and waits until they are gone, so the
// next run starts on an empty cluster.
func deleteAll(t *testing.T, c kubernetes.Interface, namespace string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	if err := c.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, 5*time.Minute, "pods of "+namespace+" deleted", func() (bool, error) {
		list, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 0, fmt.Errorf("%d pods left", len(list.Items))
	})
}
