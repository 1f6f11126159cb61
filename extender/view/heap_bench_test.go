package view

import (
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"go.uber.org/zap"
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

// BenchmarkHeapAtEnvelope is the live heap at the envelope: 5000 nodes and 100k pods
// in 20k jobs of 5, the first 10k jobs bound (50k pending pods in 10k jobs), trimmed as the
// informers trim them. cache-MiB is what the informer stores hold, view-MiB what the view
// adds once it has computed its queue (the index, the jobs, the snapshot).
func BenchmarkHeapAtEnvelope(b *testing.B) {
	spec := loadfixture.Spec{Nodes: 5000, Jobs: 20000, PodsPerJob: 5}
	var cache, view uint64
	for b.Loop() {
		base := liveHeap()
		nodes, pods := loadfixture.Nodes(spec), loadfixture.Pods(spec)
		for i, p := range pods {
			if i < len(pods)/2 {
				p.Spec.NodeName = loadfixture.NodeName(i % spec.Nodes)
			}
			if _, err := sources.TrimForCache(p); err != nil {
				b.Fatal(err)
			}
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
		c.recompute(time.Now())
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
