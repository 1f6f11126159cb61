package view

import (
	"reflect"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/config"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// fixedHolds is a HoldSource the test sets.
type fixedHolds struct {
	held      map[types.UID]string
	coolDowns map[string]time.Time
	seq       uint64
}

func (h *fixedHolds) Placed() (map[types.UID]string, int, uint64) { return h.held, len(h.held), h.seq }
func (h *fixedHolds) CoolDowns() map[string]time.Time             { return h.coolDowns }
func (h *fixedHolds) Changed() <-chan struct{}                    { return nil }

// recomputeCluster is a view of 40 nodes and 30 jobs of 5, created a minute apart before
// t0, some of their pods on nodes.
func recomputeCluster(t *testing.T, holds *fixedHolds, t0 time.Time) *Cluster {
	t.Helper()
	spec := loadfixture.Spec{Nodes: 40, Jobs: 30, PodsPerJob: 5}
	nodes, pods := loadfixture.Nodes(spec), loadfixture.Pods(spec)
	for i, p := range pods {
		p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Duration(len(pods)-i/5) * time.Minute))
		if i < 20 {
			p.Spec.NodeName = nodes[i].Name
		}
	}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig(), Holds: holds})
	fillStores(t, c, nodes, pods)
	return c
}

// jobsRebuilt says whether b's jobs were built anew rather than taken over from a.
func jobsRebuilt(a, b *Snapshot) bool {
	return reflect.ValueOf(a.jobs).UnsafePointer() != reflect.ValueOf(b.jobs).UnsafePointer()
}

// TestRecomputeWhenOnlyTimeMoved: a recompute with nothing changed but the clock and the
// cool-downs admits the previous snapshot's jobs again, and its queue is the one a view
// built from scratch computes at that time, given the same turns. Any change to what the jobs are built from (a
// pod, a namespace or PodGroup, a held bind, the config) rebuilds them.
func TestRecomputeWhenOnlyTimeMoved(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	holds := &fixedHolds{held: map[types.UID]string{"uid-job-00002-worker-0": "node-00030"}, coolDowns: map[string]time.Time{}}
	c := recomputeCluster(t, holds, t0)
	c.recompute(t0)
	first := c.Snapshot()

	for _, step := range []struct {
		name      string
		at        time.Duration
		coolDowns map[string]time.Time
	}{
		{"a second later", time.Second, nil},
		{"an hour later: waiting terms grew", time.Hour, nil},
		{"a job cools down", time.Hour + time.Second, map[string]time.Time{"default/job-00007": t0.Add(2 * time.Hour)}},
		{"its cool-down is over", 3 * time.Hour, map[string]time.Time{"default/job-00007": t0.Add(2 * time.Hour)}},
	} {
		t.Run(step.name, func(t *testing.T) {
			holds.coolDowns = step.coolDowns
			prev := c.Snapshot()
			c.recompute(t0.Add(step.at))
			got := c.Snapshot()
			if jobsRebuilt(prev, got) {
				t.Error("the jobs were rebuilt although only the clock and cool-downs moved")
			}
			fresh := recomputeCluster(t, &fixedHolds{held: holds.held, coolDowns: step.coolDowns}, t0)
			// The turns the previous queue gave are part of what a queue is computed from.
			fresh.snapshot.Store(&Snapshot{Queue: prev.Queue})
			fresh.recompute(t0.Add(step.at))
			if diff := cmp.Diff(fresh.Snapshot().Queue.Order, got.Queue.Order); diff != "" {
				t.Errorf("queue (-from scratch +time only):\n%s", diff)
			}
		})
	}
	if first.Queue.Order[0].P == c.Snapshot().Queue.Order[0].P {
		t.Error("three hours of waiting left the head's combined priority as it was: the test moves no clock")
	}

	for _, change := range []struct {
		name string
		do   func()
	}{
		{"a pod event", func() {
			obj, ok, err := c.factory.Core().V1().Pods().Informer().GetStore().GetByKey("default/job-00020-worker-0")
			if err != nil || !ok {
				t.Fatalf("no pod default/job-00020-worker-0 in the store (%v)", err)
			}
			bound := obj.(*corev1.Pod).DeepCopy()
			bound.Spec.NodeName = "node-00039"
			c.onPod(bound, false)
		}},
		{"a namespace or PodGroup event", func() { c.sourceChanges.Add(1) }},
		{"a held bind", func() { holds.held = map[types.UID]string{"uid-job-00002-worker-1": "node-00031"} }},
		{"a config reload", func() {
			reloaded := *c.config()
			c.cfg.Store(&reloaded)
		}},
	} {
		t.Run(change.name, func(t *testing.T) {
			prev := c.Snapshot()
			change.do()
			c.recompute(t0.Add(4 * time.Hour))
			if !jobsRebuilt(prev, c.Snapshot()) {
				t.Errorf("after %s the jobs were not rebuilt", change.name)
			}
		})
	}
}
