package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/scheduler"

	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/gate"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/volcano"

	"github.com/cps-extender/cps-extender/extender/server"

	"github.com/cps-extender/cps-extender/extender/config"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/clock"

	"github.com/cps-extender/cps-extender/priority"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// benchEnv is a cluster view synced from a fake clientset, served by the real server, verbs
// and gate.
type benchEnv struct {
	cluster *view.Cluster
	srv     *server.Server
	nodes   []*corev1.Node
	pods    []*corev1.Pod
	// admitted is a worker of an admitted job and admittedPS its parameter server; waiting
	// one of a job that waits (its PS carries a scheduling gate); running one of a job whose
	// gang is bound.
	admitted, admittedPS, waiting, running *corev1.Pod
}

// The benchmark sizes: nodes x (pending pods in jobs).
var (
	benchNodes = []int{1000, 5000, 10000}
	benchJobs  = []struct{ pods, jobs int }{{1000, 200}, {10000, 2000}, {50000, 10000}}
)

var (
	benchEnvsMu sync.Mutex
	benchEnvs   = map[string]*benchEnv{}
)

// noopBinder binds nothing and never fails.
type noopBinder struct{}

func (noopBinder) Bind(context.Context, gang.PodRef, string) error { return nil }

// benchCluster builds (once per size) a view of nodes nodes and pods pending pods in jobs
// jobs, plus a waiting and a running job.
func benchCluster(tb testing.TB, nodes, pods, jobs int) *benchEnv {
	tb.Helper()
	key := fmt.Sprint(nodes, pods, jobs)
	benchEnvsMu.Lock()
	defer benchEnvsMu.Unlock()
	if e := benchEnvs[key]; e != nil {
		return e
	}
	spec := loadfixture.Spec{Nodes: nodes, Jobs: jobs, PodsPerJob: pods / jobs}
	e := &benchEnv{nodes: loadfixture.Nodes(spec), pods: loadfixture.Pods(spec)}
	// A job that waits: its PS is gated, so it may not take the turn.
	waiting := loadfixture.Pods(loadfixture.Spec{Jobs: 1, PodsPerJob: 3, Namespace: "waiting"})
	waiting[0].Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	// A job that runs: both pods bound.
	running := loadfixture.Pods(loadfixture.Spec{Jobs: 1, PodsPerJob: 2, Namespace: "running"})
	for _, p := range running {
		p.Spec.NodeName = e.nodes[0].Name
	}
	e.waiting, e.running = waiting[1], running[1]
	e.pods = append(append(e.pods, waiting...), running...)

	cfg := config.DefaultConfig()
	log := zap.NewNop()
	gate := gate.New(gate.Options{Log: log, Binder: noopBinder{}, Config: cfg.Gate})
	objects := make([]runtime.Object, 0, len(e.nodes)+len(e.pods))
	for _, n := range e.nodes {
		objects = append(objects, n)
	}
	for _, p := range e.pods {
		objects = append(objects, p)
	}
	c := view.NewCluster(view.ClusterOptions{Log: log, Client: fake.NewClientset(objects...), Config: cfg, Holds: gate})
	// Synced from a fake clientset, and kept for every benchmark of this size.
	if err := c.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	e.cluster = c
	for _, d := range c.Snapshot().Queue.Order {
		if d.Phase == priority.PhaseAdmitted && e.admitted == nil {
			job, _, _ := c.Snapshot().Job(d.Key)
			e.admitted = podNamed(e.pods, job.Pods[len(job.Pods)-1].Name)
			for _, p := range job.Pods {
				if p.Role == priority.RolePS {
					e.admittedPS = podNamed(e.pods, p.Name)
				}
			}
		}
	}
	for _, p := range []*corev1.Pod{e.admitted, e.admittedPS, e.waiting, e.running} {
		if p == nil {
			tb.Fatalf("bench cluster %s: no admitted job", key)
		}
		// Bind finds a pod's job by UID: a UID shared across the fixtures' namespaces once
		// sent the running job's bind to a hold of 20 s.
		want := p.Namespace + "/" + p.Labels[loadfixture.JobLabel]
		if got, ok := c.Snapshot().JobOf(p.UID, p.Namespace, p.Name); got != want {
			tb.Fatalf("bench cluster %s: pod %s/%s is in job %q (%t), want %q", key, p.Namespace, p.Name, got, ok, want)
		}
	}
	verbs, err := scheduler.New(log, decisionsOf(c), gate.For(c), nil)
	if err != nil {
		tb.Fatal(err)
	}
	verbs.AwaitView(c.Next, scheduler.ViewCatchUp, clock.RealClock{}) // as main wires it
	vc, err := volcano.New(log, cfg.Volcano, cfg.Model.PriorityModel(), cfg.Affinity, cfg.Gang, nil)
	if err != nil {
		tb.Fatal(err)
	}
	e.srv, err = server.New(server.Options{Access: server.OpenAccess, Log: log, MaxRequestBytes: 1 << 30, Ready: c, Routes: slices.Concat(verbs.Routes("/scheduler"), vc.Routes())})
	if err != nil {
		tb.Fatal(err)
	}
	benchEnvs[key] = e
	return e
}

func podNamed(pods []*corev1.Pod, nsName string) *corev1.Pod {
	for _, p := range pods {
		if p.Namespace+"/"+p.Name == nsName {
			return p
		}
	}
	return nil
}

// discardWriter is a ResponseWriter that keeps only the status, so a benchmark measures the
// handler and not a recorder's buffer.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }

// serveBench posts body to path b.N times and checks every answer is 200.
func serveBench(b *testing.B, srv http.Handler, path string, body []byte) {
	b.Helper()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	defer cpu.report(b)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		w := &discardWriter{header: http.Header{}, status: http.StatusOK}
		srv.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("%s answered %d", path, w.status)
		}
	}
}

// eachSize runs fn for every benchmark size and both nodeCacheCapable modes.
func eachSize(b *testing.B, fn func(b *testing.B, e *benchEnv, nodeCache bool)) {
	for _, n := range benchNodes {
		for _, pj := range benchJobs {
			for _, nodeCache := range []bool{true, false} {
				name := fmt.Sprintf("nodes=%d/pods=%d/jobs=%d/nodeCache=%t", n, pj.pods, pj.jobs, nodeCache)
				b.Run(name, func(b *testing.B) { fn(b, benchCluster(b, n, pj.pods, pj.jobs), nodeCache) })
			}
		}
	}
}

// BenchmarkDecodeExtenderArgs is the floor: a bare json.Decode of the filter/prioritize body.
func BenchmarkDecodeExtenderArgs(b *testing.B) {
	eachSize(b, func(b *testing.B, e *benchEnv, nodeCache bool) {
		body := loadfixture.MustJSON(loadfixture.ExtenderArgs(e.admitted, e.nodes, nodeCache))
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		cpu := startCPU()
		defer cpu.report(b)
		for b.Loop() {
			var args extenderv1.ExtenderArgs
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&args); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkFilter(b *testing.B) {
	benchPods(b, "/scheduler/filter", func(e *benchEnv) []namedPod {
		return []namedPod{{"admitted", e.admitted}, {"waiting", e.waiting}}
	})
}

func BenchmarkPrioritize(b *testing.B) {
	benchPods(b, "/scheduler/prioritize", func(e *benchEnv) []namedPod {
		return []namedPod{{"worker", e.admitted}, {"ps", e.admittedPS}}
	})
}

// namedPod is a benchmark case: a pod of the bench view and its name in the results.
type namedPod struct {
	name string
	pod  *corev1.Pod
}

// benchPods serves path's filter/prioritize request for each of pods(e), over every
// benchmark size and both nodeCacheCapable modes.
func benchPods(b *testing.B, path string, pods func(e *benchEnv) []namedPod) {
	eachSize(b, func(b *testing.B, e *benchEnv, nodeCache bool) {
		for _, c := range pods(e) {
			b.Run("pod="+c.name, func(b *testing.B) {
				serveBench(b, e.srv, path, loadfixture.MustJSON(loadfixture.ExtenderArgs(c.pod, e.nodes, nodeCache)))
			})
		}
	})
}

// BenchmarkBind is the bind decision for a pod of a running job (bound at once) and of a
// waiting job (refused at once); holds of an admitted gang wait for the gang, not the CPU.
func BenchmarkBind(b *testing.B) {
	for _, n := range benchNodes {
		for _, pj := range benchJobs {
			e := benchCluster(b, n, pj.pods, pj.jobs)
			for _, c := range []struct {
				name string
				pod  *corev1.Pod
			}{{"running", e.running}, {"waiting", e.waiting}} {
				b.Run(fmt.Sprintf("nodes=%d/pods=%d/jobs=%d/pod=%s", n, pj.pods, pj.jobs, c.name), func(b *testing.B) {
					serveBench(b, e.srv, "/scheduler/bind", loadfixture.MustJSON(loadfixture.BindingArgs(c.pod, e.nodes[1].Name)))
				})
			}
		}
	}
}

// BenchmarkVolcano is Volcano's predicate (one node) and prioritize (every node) for a PS.
func BenchmarkVolcano(b *testing.B) {
	for _, n := range benchNodes {
		e := benchCluster(b, n, 1000, 200)
		b.Run(fmt.Sprintf("nodes=%d/verb=predicate", n), func(b *testing.B) {
			serveBench(b, e.srv, "/volcano/predicate", loadfixture.MustJSON(loadfixture.VolcanoPredicate(e.admitted, e.nodes[0])))
		})
		b.Run(fmt.Sprintf("nodes=%d/verb=prioritize", n), func(b *testing.B) {
			serveBench(b, e.srv, "/volcano/prioritize", loadfixture.MustJSON(loadfixture.VolcanoPrioritize(e.admitted, e.nodes)))
		})
	}
}

// cpuTimer reports the process CPU time per op next to the wall time: on a shared machine
// the wall time also counts the time other processes held the cores.
type cpuTimer struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuTimer { return cpuTimer{start: processCPU()} }

func (t cpuTimer) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(processCPU()-t.start)/float64(b.N), "cpu-ns/op")
	}
}

// decisionsOf is the Decider of a cluster view, as main wires it.
func decisionsOf(c *view.Cluster) scheduler.Decider {
	return func() scheduler.Decisions { return c.Decisions() }
}
