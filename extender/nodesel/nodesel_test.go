package nodesel

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSetsOf: the nodes a pod may use are those kube-scheduler's NodeAffinity and
// TaintToleration filters let it use, and the words say what leaves the others out.
func TestSetsOf(t *testing.T) {
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	evict := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}
	soft := corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}
	node := func(name string, labels map[string]string, ready bool, taints ...corev1.Taint) *corev1.Node {
		status := corev1.ConditionTrue
		if !ready {
			status = corev1.ConditionFalse
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	}
	nodes := []*corev1.Node{
		node("a-0", map[string]string{"pool": "a", "zone": "z1"}, true),
		node("a-1", map[string]string{"pool": "a", "zone": "z2"}, true, soft),
		node("b-0", map[string]string{"pool": "b", "zone": "z1"}, true, gpu),
		node("b-1", map[string]string{"pool": "b", "zone": "z2"}, true, gpu, evict),
		node("c-0", map[string]string{"pool": "c"}, false),
	}
	var fits []*Node
	var names []string
	for _, n := range nodes {
		fits = append(fits, NewNode(n))
		names = append(names, n.Name)
	}
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	tests := []struct {
		name  string
		spec  corev1.PodSpec
		nodes []string // nil: every node (no set)
		why   string
	}{
		{
			name:  "no constraints: every node without a taint that keeps pods off (soft ones do not), and Ready",
			nodes: []string{"a-0", "a-1"},
			// Each node left out names its first untolerated taint.
			why: "the 2 of 5 nodes without a taint it does not tolerate (node.kubernetes.io/not-ready:NoSchedule, nvidia.com/gpu=present:NoSchedule)",
		},
		{
			name:  "tolerating the gpu taint (Equal) still leaves the node that also evicts",
			spec:  corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
			nodes: []string{"a-0", "a-1", "b-0"},
		},
		{
			name:  "a toleration of another value does not tolerate the taint",
			spec:  corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "absent", Effect: corev1.TaintEffectNoSchedule}}},
			nodes: []string{"a-0", "a-1"},
		},
		{
			name:  "Exists with an empty key and no effect tolerates everything: every node",
			spec:  corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			nodes: nil,
		},
		{
			name:  "tolerating gpu, maintenance and not-ready, any effect",
			spec:  corev1.PodSpec{Tolerations: []corev1.Toleration{exists("nvidia.com/gpu", ""), exists("maintenance", ""), exists(corev1.TaintNodeNotReady, "")}},
			nodes: nil,
		},
		{
			name:  "a node selector",
			spec:  corev1.PodSpec{NodeSelector: map[string]string{"pool": "a"}},
			nodes: []string{"a-0", "a-1"},
			why:   "the 2 of 5 nodes matching its node selector (pool=a)",
		},
		{
			name:  "a node selector and the taints of the nodes it selects",
			spec:  corev1.PodSpec{NodeSelector: map[string]string{"pool": "b"}},
			nodes: []string{},
			why:   "the 0 of 5 nodes matching its node selector (pool=b) and without a taint it does not tolerate (nvidia.com/gpu=present:NoSchedule)",
		},
		{
			name: "required node affinity: In, NotIn, and a field term on the node name (terms are ORed)",
			spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}},
							{Key: "pool", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"b"}},
						}},
						{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"b-1"}}}},
					},
				}}},
			},
			nodes: []string{"a-0", "b-1"},
			why:   "the 2 of 5 nodes matching its required node affinity",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := NewSets(fits, names).Of(Of(&corev1.Pod{Spec: tt.spec}))
			if tt.nodes == nil {
				if set != nil {
					t.Fatalf("set %q of %d nodes, want none (every node)", set.Why, set.Len())
				}
				return
			}
			if set == nil {
				t.Fatalf("no set, want %v", tt.nodes)
			}
			var got []string
			for _, n := range names {
				if set.Has(n) {
					got = append(got, n)
				}
			}
			if diff := cmp.Diff(tt.nodes, got, cmp.Comparer(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if tt.why != "" && set.Why != tt.why {
				t.Errorf("why %q, want %q", set.Why, tt.why)
			}
		})
	}
}

// TestSame: pods with the same constraints have equal ones whatever the map order;
// different ones differ; a pod with none has nil.
func TestSame(t *testing.T) {
	sel := func(m map[string]string) *Constraints {
		return Of(&corev1.Pod{Spec: corev1.PodSpec{NodeSelector: m}})
	}
	if Of(&corev1.Pod{}) != nil {
		t.Error("a pod without constraints has some")
	}
	if !Same(sel(map[string]string{"a": "1", "b": "2"}), sel(map[string]string{"b": "2", "a": "1"})) {
		t.Error("equal selectors are not the same")
	}
	if Same(sel(map[string]string{"a": "1"}), sel(map[string]string{"a": "2"})) {
		t.Error("different selectors are the same")
	}
}

// TestTableIntern: equal constraints come back as the first of them, different ones as
// their own, none as nil, and a full table starts afresh.
func TestTableIntern(t *testing.T) {
	sel := func(v string) *Constraints {
		return Of(&corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": v}}})
	}
	var table Table
	first := table.Intern(sel("a"))
	tests := []struct {
		name   string
		c      *Constraints
		shared bool
	}{
		{"equal", sel("a"), true},
		{"different", sel("b"), false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := table.Intern(tt.c)
			if !Same(got, tt.c) {
				t.Fatalf("Intern changed the constraints: %q, want %q", got.key, tt.c.key)
			}
			if (got == first) != tt.shared {
				t.Errorf("shared with the first = %t, want %t", got == first, tt.shared)
			}
		})
	}
	for i := range maxInterned {
		table.Intern(sel(fmt.Sprint(i)))
	}
	if len(table.byKey) > maxInterned {
		t.Errorf("%d interned, want at most %d", len(table.byKey), maxInterned)
	}
}
