package podrules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/extender/sources"
	"github.com/cps-extender/cps-extender/priority"
)

func trainSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}}
}

// TestOf: what of a pod's affinity and spread constraints becomes a rule, and in
// which words.
func TestOf(t *testing.T) {
	type rule struct {
		Kind    priority.RuleKind
		Key     string
		MaxSkew int
		Weight  int
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
				{priority.RuleTogether, "topology.kubernetes.io/zone", 0, 0, "its required pod affinity by topology.kubernetes.io/zone (pods app=train)"},
				{priority.RuleApart, "kubernetes.io/hostname", 0, 0, "its required pod anti-affinity by kubernetes.io/hostname (pods app=train)"},
			},
		},
		{
			name: "preferred terms with their weight, ScheduleAnyway with weight 100, after the required ones of their kind",
			spec: corev1.PodSpec{
				Affinity: &corev1.Affinity{
					PodAffinity: &corev1.PodAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 50, PodAffinityTerm: term("kubernetes.io/hostname")}},
					},
					PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{term("topology.kubernetes.io/zone")},
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term("kubernetes.io/hostname")}},
					},
				},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
					WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: trainSelector()}},
			},
			want: []rule{
				{priority.RuleTogether, "kubernetes.io/hostname", 0, 50, "its preferred pod affinity by kubernetes.io/hostname (weight 50, pods app=train)"},
				{priority.RuleApart, "topology.kubernetes.io/zone", 0, 0, "its required pod anti-affinity by topology.kubernetes.io/zone (pods app=train)"},
				{priority.RuleApart, "kubernetes.io/hostname", 0, 10, "its preferred pod anti-affinity by kubernetes.io/hostname (weight 10, pods app=train)"},
				{priority.RuleSpread, "topology.kubernetes.io/zone", 1, 100, "its ScheduleAnyway topology spread constraint by topology.kubernetes.io/zone (maxSkew 1, pods app=train)"},
			},
		},
		{
			name: "a preferred term with a namespace selector with terms is not modelled",
			spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey: "kubernetes.io/hostname", LabelSelector: trainSelector(), NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}}},
			}}},
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
				{priority.RuleSpread, "topology.kubernetes.io/zone", 2, 0, "its topology spread constraint by topology.kubernetes.io/zone (maxSkew 2, pods app=train,run in (r7))"},
				{priority.RuleSpread, "topology.kubernetes.io/zone", 2, 0, "its topology spread constraint by topology.kubernetes.io/zone (maxSkew 2, pods app=train,run in (r7))"},
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
				{priority.RuleApart, "kubernetes.io/hostname", 0, 0, "its required pod anti-affinity by kubernetes.io/hostname (pods app=train in every namespace)"},
				{priority.RuleApart, "kubernetes.io/hostname", 0, 0, "its required pod anti-affinity by kubernetes.io/hostname (pods app=train in namespaces a,b)"},
			},
		},
		{
			name: "a term without a selector counts no pod",
			spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "kubernetes.io/hostname"}}}}},
			want: []rule{{priority.RuleTogether, "kubernetes.io/hostname", 0, 0, "its required pod affinity by kubernetes.io/hostname (no pod)"}},
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
			if r := Of(trimmed.(*corev1.Pod)); r != nil {
				for _, term := range r.Terms {
					got = append(got, rule{term.Kind, term.Topology, term.MaxSkew, term.Weight, term.Why})
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}
