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
	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/sources"
	"github.com/cps-extender/cps-extender/priority"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

func trainSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}}
}

// TestNewPodRules: what of a pod's affinity and spread constraints becomes a rule, and in
// which words.
func TestNewPodRules(t *testing.T) {
	type rule struct {
		Kind    priority.RuleKind
		Key     string
		MaxSkew int
		Why     string
	}
	term := func(key string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: trainSelector()}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []rule
	}{
		{name: "no affinity, no spread: none", spec: corev1.PodSpec{}},
		{
			name: "required anti-affinity by hostname, required affinity by zone",
			spec: corev1.PodSpec{Affinity: &corev1.Affinity{
				PodAffinity:     &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("topology.kubernetes.io/zone")}},
				PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("kubernetes.io/hostname")}},
			}},
			want: []rule{
				{priority.RuleTogether, "topology.kubernetes.io/zone", 0, "its required pod affinity by topology.kubernetes.io/zone (pods app=train)"},
				{priority.RuleApart, "kubernetes.io/hostname", 0, "its required pod anti-affinity by kubernetes.io/hostname (pods app=train)"},
			},
		},
		{
			name: "preferred terms and ScheduleAnyway only score: none",
			spec: corev1.PodSpec{
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term("kubernetes.io/hostname")}},
				}},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
					WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: trainSelector()}},
			},
		},
		{
			name: "a hard spread constraint with matchLabelKeys merged from the pod's labels",
			spec: corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: trainSelector(), MatchLabelKeys: []string{"run"}},
				// As the API server merges it: the same requirement again is not added twice.
				{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule, MatchLabelKeys: []string{"run"},
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"},
						MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "run", Operator: metav1.LabelSelectorOpIn, Values: []string{"r7"}}}}}}},
			want: []rule{
				{priority.RuleSpread, "topology.kubernetes.io/zone", 2, "its topology spread constraint by topology.kubernetes.io/zone (maxSkew 2, pods app=train,run in (r7))"},
				{priority.RuleSpread, "topology.kubernetes.io/zone", 2, "its topology spread constraint by topology.kubernetes.io/zone (maxSkew 2, pods app=train,run in (r7))"},
			},
		},
		{
			name: "namespaces: the empty selector is every namespace; a namespace selector with terms is not modelled",
			spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "kubernetes.io/hostname", LabelSelector: trainSelector(), NamespaceSelector: &metav1.LabelSelector{}},
				{TopologyKey: "kubernetes.io/hostname", LabelSelector: trainSelector(), NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
				{TopologyKey: "kubernetes.io/hostname", LabelSelector: trainSelector(), Namespaces: []string{"b", "a"}},
			}}}},
			want: []rule{
				{priority.RuleApart, "kubernetes.io/hostname", 0, "its required pod anti-affinity by kubernetes.io/hostname (pods app=train in every namespace)"},
				{priority.RuleApart, "kubernetes.io/hostname", 0, "its required pod anti-affinity by kubernetes.io/hostname (pods app=train in namespaces a,b)"},
			},
		},
		{
			name: "a term without a selector counts no pod",
			spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "kubernetes.io/hostname"}}}}},
			want: []rule{{priority.RuleTogether, "kubernetes.io/hostname", 0, "its required pod affinity by kubernetes.io/hostname (no pod)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "train", "run": "r7"}}, Spec: tt.spec}
			// What the informer keeps of the pod must be enough to read them.
			trimmed, err := sources.TrimForCache(pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			var got []rule
			if r := gang.NewPodRules(trimmed.(*corev1.Pod)); r != nil {
				for _, term := range r.Terms {
					got = append(got, rule{term.Kind, term.Topology, term.MaxSkew, term.Why})
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
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
		if !cmp.Equal(p.Keeps, []int{0}) || !cmp.Equal(p.Counts, []int{0}) {
			t.Errorf("pod %s keeps %v and is counted by %v, want [0] and [0]", p.Name, p.Keeps, p.Counts)
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
