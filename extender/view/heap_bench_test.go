package view

import (
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/sources"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// heapProfile, when set, is where BenchmarkHeapAtEnvelope writes a heap profile while the
// cluster it measured is alive (go tool pprof -sample_index=inuse_space).
var heapProfile = flag.String("heap.profile", "", "write the envelope's live heap profile to this file")

// liveHeap is the heap in use after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// asServed is pod as an informer receives it: what the API server sets on creation (a
// resource version, the default priority and tolerations), bound to node with the
// PodScheduled condition when bound, and decoded from JSON, so that each of its strings is
// its own allocation, as in a decoded watch event.
func asServed(b *testing.B, pod *corev1.Pod, bound bool, node string) *corev1.Pod {
	p := pod.DeepCopy()
	p.ResourceVersion = strconv.Itoa(1000 + len(p.Name))
	p.CreationTimestamp = metav1.Now()
	p.Spec.Priority, p.Spec.SchedulerName = new(int32(0)), "default-scheduler"
	for _, key := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))})
	}
	if bound {
		p.Spec.NodeName, p.Status.Phase = node, corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	}
	data, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(data, out); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkHeapAtEnvelope is the live heap at the envelope: 5000 nodes and 100k pods
// in 20k jobs of 5, the first 10k jobs bound (50k pending pods in 10k jobs), as served
// (asServed) and trimmed as the informers trim them. cache-MiB is what the informer stores hold, view-MiB what the view
// adds once it has computed its queue (the index, the jobs, the snapshot), and
// first-recompute-ms how long the first queue took, part of the extender's start.
func BenchmarkHeapAtEnvelope(b *testing.B) {
	spec := loadfixture.Spec{Nodes: 5000, Jobs: 20000, PodsPerJob: 5}
	var cache, view uint64
	var first time.Duration
	for b.Loop() {
		base := liveHeap()
		nodes, pods := loadfixture.Nodes(spec), loadfixture.Pods(spec)
		for i, p := range pods {
			served := asServed(b, p, i < len(pods)/2, loadfixture.NodeName(i%spec.Nodes))
			if _, err := sources.TrimForCache(served); err != nil {
				b.Fatal(err)
			}
			pods[i] = served
		}
		for _, n := range nodes {
			if _, err := sources.TrimForCache(n); err != nil {
				b.Fatal(err)
			}
		}
		c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig()})
		fillStores(b, c, nodes, pods)
		nodes, pods = nil, nil
		stored := liveHeap()
		start := time.Now()
		c.recompute(start)
		first = time.Since(start)
		c.recompute(time.Now().Add(time.Second))
		computed := liveHeap()
		if *heapProfile != "" {
			writeHeapProfile(b, *heapProfile)
		}
		runtime.KeepAlive(c)
		cache, view = stored-base, computed-stored
	}
	b.ReportMetric(float64(cache)/(1<<20), "cache-MiB")
	b.ReportMetric(float64(view)/(1<<20), "view-MiB")
	b.ReportMetric(float64(first.Milliseconds()), "first-recompute-ms")
	b.ReportMetric(float64(cache)/100000, "cache-B/pod")
}

// writeHeapProfile writes the heap profile, as of the last collection, to path.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
