package view

import (
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
)

// TestAdmissionGathering: a pod whose job waits only for the rest of its gang is Gathering
// while the job's first pod is younger than GatherWindow, and not once it is older or the
// gang is complete.
func TestAdmissionGathering(t *testing.T) {
	created := time.Unix(1_700_000_000, 0)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	member := func(name string) *corev1.Pod {
		p := capacityPod("default", name, "g", "", 1000)
		p.Labels["cps-extender.io/min-member"] = "3"
		p.CreationTimestamp = metav1.Time{Time: created}
		return p
	}
	tests := []struct {
		name          string
		pods          int
		after         time.Duration // from the first pod's creation to the recompute
		wantOK        bool
		wantGathering bool
	}{
		{name: "2 of 3 pods, just created", pods: 2, after: time.Second, wantGathering: true},
		{name: "2 of 3 pods, past the window", pods: 2, after: GatherWindow},
		{name: "the gang complete", pods: 3, after: time.Second, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pods []*corev1.Pod
			for _, name := range []string{"g-0", "g-1", "g-2"}[:tt.pods] {
				pods = append(pods, member(name))
			}
			c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig(), Holds: &fixedHolds{coolDowns: map[string]time.Time{}}})
			fillStores(t, c, []*corev1.Node{node}, pods)
			c.recompute(created.Add(tt.after))
			adm := c.Decisions().Admit(pods[0])
			if adm.OK != tt.wantOK || adm.Gathering != tt.wantGathering || adm.Retry {
				t.Errorf("admission %+v: want OK %v, Gathering %v, no retry", adm, tt.wantOK, tt.wantGathering)
			}
		})
	}
}

// TestAdmissionBehindTheView: a waiting pod's admission tells how many changes its snapshot
// reflects and how many the view had received, so that the filter can wait for the
// snapshot of an event that frees the job's room (kube-scheduler acts on such an event,
// often before the view has recomputed for it).
func TestAdmissionBehindTheView(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	running := capacityPod("default", "r-0", "r", "n1", 3000)
	waiting := capacityPod("default", "w-0", "w", "", 2000)
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig(), Holds: &fixedHolds{coolDowns: map[string]time.Time{}}})
	fillStores(t, c, []*corev1.Node{node}, []*corev1.Pod{running, waiting})
	now := time.Unix(1_700_000_000, 0)
	c.recompute(now)
	if adm := c.Decisions().Admit(waiting); adm.OK || !adm.Queued || adm.Changes != adm.Latest {
		t.Fatalf("before the running job ends: %+v, want it queued on a snapshot with every change", adm)
	}
	if err := c.factory.Core().V1().Pods().Informer().GetStore().Delete(running); err != nil {
		t.Fatal(err)
	}
	c.onPod(running, true) // the informer's event; the recompute it asks for has not run
	adm := c.Decisions().Admit(waiting)
	if adm.OK || !adm.Queued || adm.Changes >= adm.Latest {
		t.Fatalf("after the event, before the recompute: %+v, want it queued on a snapshot behind the view", adm)
	}
	c.recompute(now.Add(time.Millisecond))
	if adm := c.Decisions().Admit(waiting); !adm.OK {
		t.Fatalf("after the recompute: %+v, want it admitted", adm)
	}
}
