package view

import (
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/config"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/priority"
)

// capacityPod is a pod asking for cpu millicores, in a job when job is not "".
func capacityPod(namespace, name, job, node string, cpu int64) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)},
		}}}},
	}
	if job != "" {
		p.Labels = map[string]string{"cps-extender.io/job": job}
	}
	return p
}

// TestFreeAndCapacity: a node's Free is net of every pod on it or held for it (or assumed
// there: bound by the gate, not yet shown bound; a pod shown bound counts where it is, not
// where the gate assumed it); its Capacity only of the pods in no job (and of job pods in an exempt namespace, which the queue does
// not count), since jobs end and the others need not. Pods being deleted or done take
// nothing from the Capacity.
func TestFreeAndCapacity(t *testing.T) {
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
		}}}
	}
	deleting := capacityPod("default", "leaving", "", "n2", 4000)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_700_000_000, 0)}
	done := capacityPod("default", "done", "", "n2", 4000)
	done.Status.Phase = corev1.PodSucceeded
	pods := []*corev1.Pod{
		capacityPod("default", "daemon", "", "n1", 3000),
		capacityPod("default", "job-w-0", "job", "n1", 2000),
		capacityPod("default", "job-w-1", "job", "", 1000), // held for n2
		capacityPod("kube-system", "sys-0", "sys", "n2", 2000),
		capacityPod("default", "plain", "", "", 1000),        // assumed on n1
		capacityPod("default", "job-w-2", "job", "n2", 1000), // assumed on n1, shown bound on n2
		deleting, done,
	}
	holds := &fixedHolds{held: map[types.UID]string{"uid-job-w-1": "n2", "uid-plain": "n1", "uid-job-w-2": "n1"}, coolDowns: map[string]time.Time{}, seq: 7}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig(), Holds: holds})
	fillStores(t, c, []*corev1.Node{node("n1"), node("n2")}, pods)
	c.recompute(time.Unix(1_700_000_000, 0))
	got := map[string][2]priority.Resources{}
	for _, n := range c.Snapshot().nodes {
		got[n.Name] = [2]priority.Resources{n.Free, n.Capacity}
	}
	want := map[string][2]priority.Resources{
		"n1": {{"cpu": 2000, "pods": 107}, {"cpu": 4000, "pods": 108}},
		"n2": {{"cpu": 0, "pods": 106}, {"cpu": 6000, "pods": 109}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("[Free, Capacity] by node (-want +got):\n%s", diff)
	}
	if seen := c.HoldsSeen(); seen != holds.seq {
		t.Errorf("HoldsSeen %d, want the gate's %d the queue was computed from", seen, holds.seq)
	}
}

// TestJobLosingPods: a job's pods being deleted are out of its view but counted in its
// Leaving (bound ones only), and their room is the node's Leaving: what a preemption may
// count on while a victim goes.
func TestJobLosingPods(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	gone := &metav1.Time{Time: time.Unix(1_700_000_000, 0)}
	leaving := capacityPod("default", "victim-w-0", "victim", "n1", 2000)
	leaving.DeletionTimestamp = gone
	unbound := capacityPod("default", "victim-w-2", "victim", "", 2000)
	unbound.DeletionTimestamp = gone
	pods := []*corev1.Pod{leaving, capacityPod("default", "victim-w-1", "victim", "n1", 2000), unbound,
		capacityPod("default", "other-w-0", "other", "n1", 1000)}
	holds := &fixedHolds{held: map[types.UID]string{}, coolDowns: map[string]time.Time{}}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig(), Holds: holds})
	fillStores(t, c, []*corev1.Node{node}, pods)
	c.recompute(time.Unix(1_700_000_000, 0))
	snap := c.Snapshot()
	for key, want := range map[string][2]int{"default/victim": {1, 1}, "default/other": {1, 0}} {
		job, _, ok := snap.Job(key)
		if !ok {
			t.Fatalf("no job %s", key)
		}
		if got := [2]int{len(job.Pods), job.Leaving}; got != want {
			t.Errorf("%s: [pods in view, leaving] = %v, want %v", key, got, want)
		}
	}
	if got, want := snap.nodes[0].Leaving, (priority.Resources{"cpu": 2000, "pods": 1}); !cmp.Equal(got, want) {
		t.Errorf("n1 leaving %v, want %v", got, want)
	}

	// Still there stuckAfter past its grace period (a finalizer, an unreachable node): its
	// room is not coming. Nothing else changed: time alone must end the count.
	c.recompute(gone.Add(stuckAfter))
	snap = c.Snapshot()
	if job, _, _ := snap.Job("default/victim"); job.Leaving != 0 {
		t.Errorf("a pod stuck past its grace period still counts as leaving: job Leaving %d", job.Leaving)
	}
	if got := snap.nodes[0].Leaving; len(got) != 0 {
		t.Errorf("a pod stuck past its grace period still counts as leaving: n1 leaving %v", got)
	}
}
