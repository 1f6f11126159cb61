package view

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/priority"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// The benchmark sizes: nodes x (pending pods in jobs).
var (
	benchNodes = []int{1000, 5000, 10000}
	benchJobs  = []struct{ pods, jobs int }{{1000, 200}, {10000, 2000}, {50000, 10000}}
)

// recomputeEnv is a cluster view filled straight into its informer stores (no API server,
// no watch), and a worker of an admitted job.
type recomputeEnv struct {
	cluster  *Cluster
	nodes    []*corev1.Node
	admitted *corev1.Pod
}

func recomputeBench(tb testing.TB, nodes, pods, jobs int) *recomputeEnv {
	tb.Helper()
	spec := loadfixture.Spec{Nodes: nodes, Jobs: jobs, PodsPerJob: pods / jobs}
	e := &recomputeEnv{nodes: loadfixture.Nodes(spec)}
	all := loadfixture.Pods(spec)
	e.cluster = NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig()})
	fillStores(tb, e.cluster, e.nodes, all)
	e.cluster.recompute(time.Now())
	for _, d := range e.cluster.Snapshot().Queue.Order {
		if d.Phase != priority.PhaseAdmitted {
			continue
		}
		job, _, _ := e.cluster.Snapshot().Job(d.Key)
		name := job.Pods[len(job.Pods)-1].Name
		for _, p := range all {
			if p.Namespace+"/"+p.Name == name {
				e.admitted = p
			}
		}
		break
	}
	if e.admitted == nil {
		tb.Fatal("no admitted job")
	}
	return e
}

// BenchmarkRecomputeAfterPodEvent is the queue recompute after one pod event: a pending pod
// of an admitted job is bound, then the view recomputes.
func BenchmarkRecomputeAfterPodEvent(b *testing.B) {
	for _, n := range benchNodes {
		for _, pj := range benchJobs {
			b.Run(fmt.Sprintf("nodes=%d/pods=%d/jobs=%d", n, pj.pods, pj.jobs), func(b *testing.B) {
				e := recomputeBench(b, n, pj.pods, pj.jobs)
				store := e.cluster.factory.Core().V1().Pods().Informer().GetStore()
				pod := e.admitted
				bound := pod.DeepCopy()
				bound.Spec.NodeName = e.nodes[len(e.nodes)-1].Name
				b.Cleanup(func() {
					_ = store.Update(pod)
					e.cluster.onPod(pod, false)
					e.cluster.recompute(time.Now())
				})
				b.ReportAllocs()
				cpu := startCPU()
				defer cpu.report(b)
				i := 0
				for b.Loop() {
					next := pod
					if i%2 == 0 {
						next = bound
					}
					i++
					if err := store.Update(next); err != nil {
						b.Fatal(err)
					}
					e.cluster.onPod(next, false) // the informer's event
					e.cluster.recompute(time.Now())
				}
			})
		}
	}
}

// BenchmarkRecomputeTimeOnly is the periodic recompute when nothing but the clock moved:
// the same jobs admitted again at a later time.
func BenchmarkRecomputeTimeOnly(b *testing.B) {
	for _, n := range benchNodes {
		for _, pj := range benchJobs {
			b.Run(fmt.Sprintf("nodes=%d/pods=%d/jobs=%d", n, pj.pods, pj.jobs), func(b *testing.B) {
				e := recomputeBench(b, n, pj.pods, pj.jobs)
				now := time.Now()
				e.cluster.recompute(now)
				b.ReportAllocs()
				cpu := startCPU()
				defer cpu.report(b)
				for b.Loop() {
					now = now.Add(time.Second)
					e.cluster.recompute(now)
				}
			})
		}
	}
}

// BenchmarkRecomputeWaitingBacklog is the periodic recompute with a backlog that mostly
// waits: nodes of nodecpu cores, where a job's 5 pods (a PS of 2 cores, workers of 1) need
// 6. With 1 core no PS fits any node and every job can never fit; with 2 a sixth of the
// jobs at 50k pods fit and the rest wait for room.
func BenchmarkRecomputeWaitingBacklog(b *testing.B) {
	for _, n := range benchNodes {
		for _, pj := range benchJobs {
			for _, cpu := range []int64{1, 2} {
				b.Run(fmt.Sprintf("nodes=%d/pods=%d/jobs=%d/nodecpu=%d", n, pj.pods, pj.jobs, cpu), func(b *testing.B) {
					spec := loadfixture.Spec{Nodes: n, Jobs: pj.jobs, PodsPerJob: pj.pods / pj.jobs, NodeCPU: cpu}
					benchTicks(b, spec, loadfixture.Pods(spec), func(q *priority.Queue) string {
						if len(q.Order)+len(q.Unschedulable) != pj.jobs {
							return fmt.Sprintf("%d jobs in the queue, want %d", len(q.Order)+len(q.Unschedulable), pj.jobs)
						}
						return ""
					})
				})
			}
		}
	}
}

// BenchmarkRecomputeWithRules is the periodic recompute when every pod has a required
// rule over the nodes, counting its own job's pods: a hard spread (maxSkew 1) or a
// required anti-affinity. Jobs with rules are placed pod by pod (priority/rules.go).
func BenchmarkRecomputeWithRules(b *testing.B) {
	for _, pj := range benchJobs {
		for _, rule := range []string{"spread", "apart"} {
			b.Run(fmt.Sprintf("nodes=5000/pods=%d/jobs=%d/rule=%s", pj.pods, pj.jobs, rule), func(b *testing.B) {
				spec := loadfixture.Spec{Nodes: 5000, Jobs: pj.jobs, PodsPerJob: pj.pods / pj.jobs}
				pods := loadfixture.Pods(spec)
				for _, p := range pods {
					job := &metav1.LabelSelector{MatchLabels: map[string]string{loadfixture.JobLabel: p.Labels[loadfixture.JobLabel]}}
					if rule == "spread" {
						p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1,
							TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: job}}
					} else {
						p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: job}}}}
					}
				}
				benchTicks(b, spec, pods, func(q *priority.Queue) string {
					if len(q.Order) != pj.jobs || q.Order[len(q.Order)-1].Phase != priority.PhaseAdmitted {
						return fmt.Sprintf("%d of %d jobs in the queue, not all admitted", len(q.Order), pj.jobs)
					}
					return ""
				})
			})
		}
	}
}

// BenchmarkRecomputeNodeSelector is the periodic recompute when every pod selects one zone
// of the fixture's four (a quarter of the nodes): on nodes of 32 cores most jobs fit, on
// nodes of 2 most wait.
func BenchmarkRecomputeNodeSelector(b *testing.B) {
	for _, pj := range benchJobs {
		for _, cpu := range []int64{2, 32} {
			b.Run(fmt.Sprintf("nodes=5000/pods=%d/jobs=%d/nodecpu=%d", pj.pods, pj.jobs, cpu), func(b *testing.B) {
				spec := loadfixture.Spec{Nodes: 5000, Jobs: pj.jobs, PodsPerJob: pj.pods / pj.jobs, NodeCPU: cpu}
				pods := loadfixture.Pods(spec)
				for _, p := range pods {
					p.Spec.NodeSelector = map[string]string{loadfixture.ZoneLabel: "zone-0"}
				}
				benchTicks(b, spec, pods, func(q *priority.Queue) string {
					if len(q.Order) != pj.jobs || q.Order[0].Phase != priority.PhaseAdmitted {
						return fmt.Sprintf("%d of %d jobs in the queue, the first not admitted", len(q.Order), pj.jobs)
					}
					return ""
				})
			})
		}
	}
}

// BenchmarkRecomputeNodePools is the periodic recompute on nodes split into pools (a label
// per pool) where each job selects one pool: many small node sets, as tenants with their own
// pools or pods pinned to a few hosts make. On nodes of 32 cores every job fits, on nodes of
// 2 most wait.
func BenchmarkRecomputeNodePools(b *testing.B) {
	for _, pools := range []int{10, 1000} {
		for _, cpu := range []int64{2, 32} {
			b.Run(fmt.Sprintf("nodes=5000/pods=10000/jobs=2000/pools=%d/nodecpu=%d", pools, cpu), func(b *testing.B) {
				spec := loadfixture.Spec{Nodes: 5000, Jobs: 2000, PodsPerJob: 5, NodeCPU: cpu}
				nodes := loadfixture.Nodes(spec)
				for i, n := range nodes {
					n.Labels["pool"] = fmt.Sprintf("pool-%d", i%pools)
				}
				pods := loadfixture.Pods(spec)
				for i, p := range pods {
					p.Spec.NodeSelector = map[string]string{"pool": fmt.Sprintf("pool-%d", (i/spec.PodsPerJob)%pools)}
				}
				benchTicksOn(b, nodes, pods, func(q *priority.Queue) string {
					if len(q.Order) != spec.Jobs || q.Order[0].Phase != priority.PhaseAdmitted {
						return fmt.Sprintf("%d of %d jobs in the queue, the first not admitted", len(q.Order), spec.Jobs)
					}
					return ""
				})
			})
		}
	}
}

// benchTicks fills a view with spec's nodes and pods, checks its first queue (check says
// what is wrong with it, or ""), and measures recomputes a second apart.
func benchTicks(b *testing.B, spec loadfixture.Spec, pods []*corev1.Pod, check func(*priority.Queue) string) {
	benchTicksOn(b, loadfixture.Nodes(spec), pods, check)
}

// benchTicksOn is benchTicks on the given nodes.
func benchTicksOn(b *testing.B, nodes []*corev1.Node, pods []*corev1.Pod, check func(*priority.Queue) string) {
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig()})
	fillStores(b, c, nodes, pods)
	now := time.Now()
	c.recompute(now)
	if msg := check(c.Snapshot().Queue); msg != "" {
		b.Fatal(msg)
	}
	b.ReportAllocs()
	cpuTime := startCPU()
	defer cpuTime.report(b)
	for b.Loop() {
		now = now.Add(time.Second)
		c.recompute(now)
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
