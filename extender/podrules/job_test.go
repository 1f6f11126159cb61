package podrules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/priority"
)

// TestClusterAdd: a job's terms become one rule each however many pods give them; its
// pods keep (required) or prefer (preferred) and count them; placed pods of other jobs and of none count by their node's
// domain (the node's name for hostname), those in no job also as staying, the job's own
// placed pods not at all, and a term of every namespace counts in every namespace.
func TestClusterAdd(t *testing.T) {
	anti := func(key string, nsAll bool) *corev1.Pod {
		term := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: trainSelector()}
		if nsAll {
			term.NamespaceSelector = &metav1.LabelSelector{}
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Labels: map[string]string{"app": "train"}},
			Spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}}}
	}
	// both: required anti-affinity by hostname and preferred anti-affinity by zone.
	both := func() *corev1.Pod {
		p := anti("kubernetes.io/hostname", false)
		p.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{
			{Weight: 30, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: trainSelector()}}}
		return p
	}
	train := map[string]string{"app": "train"}
	zones := []map[string]string{{"zone": "z1"}, {"zone": "z1"}, {"zone": "z2"}, {}}
	placed := map[string][]Placed{
		"a": {{UID: "own", Namespace: "a", Labels: train, Node: 0}, {UID: "other", Namespace: "a", Labels: train, Node: 1},
			{UID: "stray", Namespace: "a", Labels: train, Node: 3, Staying: true}, {UID: "web", Namespace: "a", Labels: map[string]string{"app": "web"}, Node: 2}},
		"b": {{UID: "far", Namespace: "b", Labels: train, Node: 2, Staying: true}},
	}
	tests := []struct {
		name  string
		pods  []*corev1.Pod // the job's; nil for a pod not known
		want  []priority.Rule
		keeps [][]int
		// prefers and counts: nil for none and for keeps.
		prefers, counts [][]int
	}{
		{name: "no rules", pods: []*corev1.Pod{{}}, keeps: [][]int{nil}},
		{name: "one term of two pods, by hostname, in the pods' namespace", pods: []*corev1.Pod{anti("kubernetes.io/hostname", false), anti("kubernetes.io/hostname", false), nil},
			want: []priority.Rule{{Kind: priority.RuleApart, Key: "kubernetes.io/hostname", Why: "its required pod anti-affinity by kubernetes.io/hostname (pods app=train)",
				Elsewhere: map[string]int{"n1": 1, "n3": 1}, Staying: map[string]int{"n3": 1}}},
			keeps: [][]int{{0}, {0}, nil}},
		{name: "by zone in every namespace: a node without the label counts nowhere", pods: []*corev1.Pod{anti("zone", true)},
			want: []priority.Rule{{Kind: priority.RuleApart, Key: "zone", Why: "its required pod anti-affinity by zone (pods app=train in every namespace)",
				Elsewhere: map[string]int{"z1": 1, "z2": 1}, Staying: map[string]int{"z2": 1}}},
			keeps: [][]int{{0}}},
		{name: "a required and a preferred term: kept and preferred, both counting", pods: []*corev1.Pod{both(), anti("kubernetes.io/hostname", false)},
			want: []priority.Rule{{Kind: priority.RuleApart, Key: "kubernetes.io/hostname", Why: "its required pod anti-affinity by kubernetes.io/hostname (pods app=train)",
				Elsewhere: map[string]int{"n1": 1, "n3": 1}, Staying: map[string]int{"n3": 1}},
				{Kind: priority.RuleApart, Key: "zone", Weight: 30, Why: "its preferred pod anti-affinity by zone (weight 30, pods app=train)",
					Elsewhere: map[string]int{"z1": 1}, Staying: map[string]int{}}},
			keeps: [][]int{{0}, {0}}, prefers: [][]int{{1}, nil}, counts: [][]int{{0, 1}, {0, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Cluster{Placed: placed, JobOf: map[types.UID]string{"own": "a/j", "other": "a/k"}, Names: []string{"n0", "n1", "n2", "n3"},
				Label: func(at int, key string) (string, bool) { v, ok := zones[at][key]; return v, ok }}
			job := &priority.Job{Key: "a/j", Pods: make([]priority.Pod, len(tt.pods))}
			pods := make([]*Pod, len(tt.pods))
			for k, p := range tt.pods {
				if p != nil {
					pods[k] = &Pod{Namespace: p.Namespace, Labels: p.Labels, Rules: Of(p)}
				}
			}
			c.Add(job, pods)
			if diff := cmp.Diff(tt.want, job.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			for k, p := range job.Pods {
				var prefers []int
				counts := tt.keeps[k]
				if tt.prefers != nil {
					prefers, counts = tt.prefers[k], tt.counts[k]
				}
				refs := p.RuleRefs
				if refs == nil {
					refs = &priority.RuleRefs{}
				}
				if !cmp.Equal(refs.Keeps, tt.keeps[k]) || !cmp.Equal(refs.Prefers, prefers) || !cmp.Equal(refs.Counts, counts) {
					t.Errorf("pod %d keeps %v, prefers %v and is counted by %v, want %v, %v and %v", k, refs.Keeps, refs.Prefers, refs.Counts, tt.keeps[k], prefers, counts)
				}
			}
		})
	}
}
