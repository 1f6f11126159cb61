package view

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/metrics"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// recomputes is how many recomputes c's metrics have observed.
func recomputes(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "cps_extender_queue_recompute_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// TestLoopCoalescesABurst drives the recompute loop with a pod event every millisecond: the
// recomputes start at least recomputeGap apart, so there are at most as many as gaps fit in
// the burst (and the one after it), and the last pod of the burst is in the view after it.
func TestLoopCoalescesABurst(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Gate.RecomputeInterval = metav1.Duration{Duration: time.Hour} // no tick within the test
	reg := prometheus.NewRegistry()
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: cfg, Metrics: metrics.New(reg)})
	spec := loadfixture.Spec{Nodes: 4, Jobs: 40, PodsPerJob: 4}
	pods := loadfixture.Pods(spec)
	fillStores(t, c, loadfixture.Nodes(spec), nil)
	c.recompute(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.loop(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	store := c.factory.Core().V1().Pods().Informer().GetStore()
	before := recomputes(t, reg)
	start := time.Now()
	for _, p := range pods {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
		c.onPod(p, false) // the informer's event: it triggers a recompute
		time.Sleep(time.Millisecond)
	}
	burst := time.Since(start)
	last := pods[len(pods)-1]
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, seen := c.Snapshot().JobOf(types.UID(last.UID), last.Namespace, last.Name); seen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the burst's last pod %s/%s is not in the view 10 s after it", last.Namespace, last.Name)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := recomputes(t, reg) - before
	limit := uint64(burst/recomputeGap) + 2
	t.Logf("%d pod events over %v: %d recomputes (at most %d)", len(pods), burst.Round(time.Millisecond), got, limit)
	if got == 0 || got > limit {
		t.Errorf("%d recomputes for %d pod events over %v, want 1 to %d", got, len(pods), burst, limit)
	}
}
