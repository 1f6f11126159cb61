package preempt

import (
	"context"
	"testing"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/extender/gang"
)

// budget is a PodDisruptionBudget over the pods labelled job=<job> whose status allows
// allowed disruptions; behind: its status has not observed its spec yet.
func budget(name, job string, allowed int32, behind bool) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 2},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": job}}},
		Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 2, DisruptionsAllowed: allowed},
	}
	if behind {
		pdb.Status.ObservedGeneration = 1
	}
	return pdb
}

func listedBudgets(t *testing.T, pdbs ...*policyv1.PodDisruptionBudget) *ListedBudgets {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pdb := range pdbs {
		if err := indexer.Add(pdb); err != nil {
			t.Fatal(err)
		}
	}
	pods := func(namespace, name string) (*corev1.Pod, bool) {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"job": "a"}}}, true
	}
	return NewListedBudgets(policylisters.NewPodDisruptionBudgetLister(indexer), pods)
}

// TestListedBudgets: a gang is refused when a budget selects more of its pods than its
// status allows to go, which the Eviction API, one pod at a time, would not see.
func TestListedBudgets(t *testing.T) {
	gangOf2 := []gang.PodRef{{Namespace: "ns", Name: "a-0"}, {Namespace: "ns", Name: "a-1"}}
	tests := []struct {
		name    string
		budgets []*policyv1.PodDisruptionBudget
		refused string
	}{
		{"no budget", nil, ""},
		{"a budget over other pods", []*policyv1.PodDisruptionBudget{budget("other", "b", 0, false)}, ""},
		{"a budget allowing the whole gang", []*policyv1.PodDisruptionBudget{budget("pdb", "a", 2, false)}, ""},
		{"a budget allowing one disruption: the gang of two may not go", []*policyv1.PodDisruptionBudget{budget("pdb", "a", 1, false)},
			"PodDisruptionBudget ns/pdb allows 1 disruptions; the gang has 2 pods under it"},
		{"a budget whose status is behind: left to the Eviction API", []*policyv1.PodDisruptionBudget{budget("pdb", "a", 0, true)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := listedBudgets(t, tt.budgets...).Refusal(gangOf2); got != tt.refused {
				t.Errorf("Refusal = %q, want %q", got, tt.refused)
			}
		})
	}
}

// TestPreemptorChecksTheGangAgainstBudgets: a gang a budget would let go only in part is
// not evicted at all: no dry run, no eviction, the job protected, a refusal counted.
func TestPreemptorChecksTheGangAgainstBudgets(t *testing.T) {
	ev := &fakeEvictor{}
	p, err := New(context.Background(), Options{Log: zap.NewNop(), Evictor: ev,
		Budgets: listedBudgets(t, budget("pdb", "a", 1, false))})
	if err != nil {
		t.Fatal(err)
	}
	snap := preemptingSnapshot(t)
	d, _ := snap.Queue.Lookup("ns/urgent")
	p.Published(snap)
	p.Wait()
	if len(ev.dry) != 0 || len(ev.evicted) != 0 {
		t.Errorf("dry runs %v, evictions %v: want none", ev.dry, ev.evicted)
	}
	if _, ok := p.Protected()[d.Victims[0].Key]; !ok {
		t.Errorf("victim %s not protected: %v", d.Victims[0].Key, p.Protected())
	}
}
