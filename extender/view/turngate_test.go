package view

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/priority"
)

// TestTurnGatedPods: the snapshot lists the pending pods that carry gang.TurnGate by job
// ("" for a pod in no job); the queue treats the turn gate as its own (a job gated only by
// it may take the turn) and any other gate as a block.
func TestTurnGatedPods(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	gated := func(name, job string, gates ...string) *corev1.Pod {
		p := capacityPod("default", name, job, "", 1000)
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	pods := []*corev1.Pod{
		gated("a-0", "a", gang.TurnGate), gated("a-1", "a", gang.TurnGate),
		gated("b-0", "b", gang.TurnGate, "example.com/quota"),
		gated("c-0", "c"),
		gated("loose", "", gang.TurnGate),
	}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig(), Holds: &fixedHolds{coolDowns: map[string]time.Time{}}})
	fillStores(t, c, []*corev1.Node{node}, pods)
	c.recompute(time.Unix(1_700_000_000, 0))
	snap := c.Snapshot()

	got := map[string][]string{}
	for job, refs := range snap.TurnGated() {
		for _, r := range refs {
			got[job] = append(got[job], r.Name)
		}
	}
	for _, names := range got {
		slices.Sort(names)
	}
	want := map[string][]string{"default/a": {"a-0", "a-1"}, "default/b": {"b-0"}, "": {"loose"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turn-gated pods (-want +got):\n%s", diff)
	}
	if job, ok := snap.TurnGatedJob("uid-a-1"); !ok || job != "default/a" {
		t.Errorf("TurnGatedJob(a-1) = %q, %v", job, ok)
	}
	if _, ok := snap.TurnGatedJob("uid-c-0"); ok {
		t.Error("c-0 carries no gate, but TurnGatedJob has it")
	}
	for job, want := range map[string]priority.JobPhase{"default/a": priority.PhaseAdmitted, "default/c": priority.PhaseAdmitted} {
		if d, ok := snap.Queue.Lookup(job); !ok || d.Phase != want {
			t.Errorf("%s: %+v, want %s", job, d, want)
		}
	}
	if d, ok := snap.Queue.Lookup("default/b"); !ok || d.Phase == priority.PhaseAdmitted {
		t.Errorf("default/b carries another gate, but the queue gives it the turn: %+v", d)
	}
}
