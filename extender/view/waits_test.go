package view

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/internal/fixture"
	"github.com/cps-extender/cps-extender/extender/metrics"
)

// TestJobWaitMetrics follows jobs through snapshots: what a job reached before the first
// snapshot is not timed (it happened unseen), a job's first turn and its bound gang are
// timed from its creation once each, by its tier and PriorityClass, and the pending gauges
// follow the phases.
func TestJobWaitMetrics(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	pod := func(job string, cpu int64, created time.Time, node, user, class string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: job + "-0", UID: types.UID("uid-" + job), CreationTimestamp: metav1.Time{Time: created},
				Labels: map[string]string{"cps-extender.io/job": job}},
			Spec: corev1.PodSpec{NodeName: node, PriorityClassName: class, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)},
			}}}},
		}
		if user != "" {
			p.Labels["cps-extender.io/user"] = user
		}
		return p
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	cfg := config.DefaultConfig()
	// alice's tier ranks below the default one: her job waits behind early.
	cfg.Model.Tiers["tin"] = 0.1
	cfg.Model.UserTiers = map[string]string{"alice": "tin"}
	cfg.Gang.PodUserNamespaces = []string{"*"} // the pods name their user
	m := metrics.New(prometheus.NewRegistry())
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: cfg, Metrics: m})
	old := pod("old", 2000, t0.Add(-10*time.Minute), "n1", "", "")
	early := pod("early", 4000, t0.Add(-5*time.Minute), "", "", "")
	blocked := pod("blocked", 10000, t0.Add(-time.Minute), "", "", "")
	fillStores(t, c, []*corev1.Node{node}, []*corev1.Pod{old, early, blocked})
	store := c.factory.Core().V1().Pods().Informer().GetStore()
	apply := func(p *corev1.Pod, deleted bool) {
		t.Helper()
		var err error
		switch {
		case deleted:
			err = store.Delete(p)
		default:
			err = store.Update(p)
		}
		if err != nil {
			t.Fatal(err)
		}
		c.onPod(p, deleted)
	}
	bind := func(p *corev1.Pod) {
		b := p.DeepCopy()
		b.Spec.NodeName = "n1"
		apply(b, false)
	}

	scrape := func() string { return fixture.Scrape(t, m) }
	// At the first snapshot old runs, early has the turn, blocked never fits: nothing timed.
	c.recompute(t0)
	fixture.WantSamples(t, scrape(),
		`cps_extender_pending_jobs{phase="admitted",tier="bronze"} 1`,
		`cps_extender_pending_jobs{phase="unschedulable",tier="bronze"} 1`,
		`cps_extender_starved_jobs 0`)
	if body := scrape(); strings.Contains(body, "cps_extender_job_admission_wait_seconds_count") || strings.Contains(body, "cps_extender_job_bound_wait_seconds_count") {
		t.Fatalf("waits timed at the first snapshot:\n%s", body)
	}

	// alice's job arrives and waits behind early.
	fresh := pod("fresh", 5000, t0.Add(10*time.Second), "", "alice", "high")
	apply(fresh, false)
	c.recompute(t0.Add(20 * time.Second))
	fixture.WantSamples(t, scrape(), `cps_extender_pending_jobs{phase="waiting",tier="tin"} 1`)

	// early's gang is bound: timed from its creation (its turn came before this process looked).
	bind(early)
	c.recompute(t0.Add(30 * time.Second))
	// old and early end; fresh gets the turn at +40 s, 30 s after its creation, and is bound at +50 s.
	apply(old, true)
	apply(early, true)
	c.recompute(t0.Add(40 * time.Second))
	bind(fresh)
	c.recompute(t0.Add(50 * time.Second))
	c.recompute(t0.Add(60 * time.Second)) // nothing new: nothing counted twice
	fixture.WantSamples(t, scrape(),
		`cps_extender_job_bound_wait_seconds_count{priority_class="none",tier="bronze"} 1`,
		`cps_extender_job_bound_wait_seconds_sum{priority_class="none",tier="bronze"} 330`,
		`cps_extender_job_admission_wait_seconds_count{priority_class="high",tier="tin"} 1`,
		`cps_extender_job_admission_wait_seconds_sum{priority_class="high",tier="tin"} 30`,
		`cps_extender_job_admission_wait_seconds_bucket{priority_class="high",tier="tin",le="30"} 1`,
		`cps_extender_job_admission_wait_seconds_bucket{priority_class="high",tier="tin",le="10"} 0`,
		`cps_extender_job_bound_wait_seconds_count{priority_class="high",tier="tin"} 1`,
		`cps_extender_job_bound_wait_seconds_sum{priority_class="high",tier="tin"} 40`,
		`cps_extender_pending_jobs{phase="waiting",tier="tin"} 0`,
		`cps_extender_pending_jobs{phase="admitted",tier="bronze"} 0`,
		`cps_extender_pending_jobs{phase="unschedulable",tier="bronze"} 1`)
	if body := scrape(); strings.Contains(body, `cps_extender_job_admission_wait_seconds_count{priority_class="none"`) {
		t.Errorf("early's turn, which came before the first snapshot, was timed:\n%s", body)
	}
}

// BenchmarkObserveJobs is what the job metrics add to every published snapshot: one pass over
// the queue's decisions (2000 jobs of 5 pods on 1000 nodes).
func BenchmarkObserveJobs(b *testing.B) {
	e := recomputeBench(b, 1000, 10000, 2000)
	c := e.cluster
	c.metrics = metrics.New(prometheus.NewRegistry())
	snap, model, now := c.Snapshot(), c.config().model, time.Now()
	c.waits.Observe(c.metrics, snap.Queue, snap.jobs, model, c.priorityClassOf, now)
	b.ReportAllocs()
	for b.Loop() {
		c.waits.Observe(c.metrics, snap.Queue, snap.jobs, model, c.priorityClassOf, now)
	}
}
