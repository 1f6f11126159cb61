package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/priority"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

func trainSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}}
}

// TestRecomputeRules: the view gives a job with required anti-affinity its rule, counting
// the matching pods of other jobs and of none where they are: on 6 nodes with a pod in no
// job that it selects on one of them, a gang of 6 that wants one pod a node is
// Unschedulable, naming the rule, and a small job is admitted; once that pod is gone the
// gang is admitted, one pod a node.
func TestRecomputeRules(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	nodes := loadfixture.Nodes(loadfixture.Spec{Nodes: 6})
	apart := loadfixture.Pods(loadfixture.Spec{Jobs: 1, PodsPerJob: 6, JobPrefix: "apart"})
	for _, p := range apart {
		p.Labels["app"] = "train"
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: "kubernetes.io/hostname", LabelSelector: trainSelector()}}}}
	}
	small := loadfixture.Pods(loadfixture.Spec{Jobs: 1, PodsPerJob: 2, JobPrefix: "small"})
	stray := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "default", UID: "uid-stray", Labels: map[string]string{"app": "train"}},
		Spec:       corev1.PodSpec{NodeName: nodes[2].Name},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	pods := append(append(apart, small...), stray)
	for _, p := range pods {
		p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig()})
	fillStores(t, c, nodes, pods)
	c.recompute(t0)

	job, d, ok := c.Snapshot().Job("default/apart-00000")
	if !ok {
		t.Fatal("no job default/apart-00000")
	}
	wantRules := []priority.Rule{{Kind: priority.RuleApart, Key: "kubernetes.io/hostname",
		Why:       "its required pod anti-affinity by kubernetes.io/hostname (pods app=train)",
		Elsewhere: map[string]int{nodes[2].Name: 1}, Staying: map[string]int{nodes[2].Name: 1}}}
	if diff := cmp.Diff(wantRules, job.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	for _, p := range job.Pods {
		if p.RuleRefs == nil || !cmp.Equal(p.RuleRefs.Keeps, []int{0}) || !cmp.Equal(p.RuleRefs.Counts, []int{0}) {
			t.Errorf("pod %s rule refs %+v, want keeps [0] and counted by [0]", p.Name, p.RuleRefs)
		}
	}
	const never = "never fits: only 5 of the 6 pods it needs can be placed keeping its required pod anti-affinity by kubernetes.io/hostname (pods app=train), even with no other job's pods on the nodes"
	if d.Phase != priority.PhaseUnschedulable || d.Blocker != never {
		t.Errorf("with the stray pod: %s %q, want Unschedulable %q", d.Phase, d.Blocker, never)
	}
	if _, ds, _ := c.Snapshot().Job("default/small-00000"); ds.Phase != priority.PhaseAdmitted {
		t.Errorf("small job: %s %q, want Admitted", ds.Phase, ds.Blocker)
	}

	c.onPod(stray, true)
	c.recompute(t0.Add(time.Second))
	_, d, _ = c.Snapshot().Job("default/apart-00000")
	if d.Phase != priority.PhaseAdmitted {
		t.Fatalf("without the stray pod: %s %q, want Admitted", d.Phase, d.Blocker)
	}
	used := map[string]int{}
	for _, n := range d.Plan {
		used[n]++
	}
	if len(used) != 6 {
		t.Errorf("plan %v uses %d nodes, want 6, one pod each", d.Plan, len(used))
	}
}
