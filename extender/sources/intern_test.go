package sources

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func container(name, cpu string) corev1.Container {
	c := corev1.Container{Name: name, Image: "trainer:" + name, Command: []string{"python"}}
	if cpu != "" {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	return c
}

// TestSharedContainers: two pods get one slice only when every kept field is equal, and
// what is kept is the container's name, resources and restart policy.
func TestSharedContainers(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	withPolicy := func(c corev1.Container) corev1.Container { c.RestartPolicy = &always; return c }
	withLimit := func(c corev1.Container, mem string) corev1.Container {
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}
		return c
	}
	withClaim := func(c corev1.Container, name string) corev1.Container {
		c.Resources.Claims = []corev1.ResourceClaim{{Name: name}}
		return c
	}
	tests := []struct {
		name   string
		a, b   []corev1.Container
		shared bool
	}{
		{"equal", []corev1.Container{container("w", "1")}, []corev1.Container{container("w", "1")}, true},
		{"image and command differ: not kept", []corev1.Container{container("w", "1")},
			[]corev1.Container{{Name: "w", Image: "other", Resources: container("w", "1").Resources}}, true},
		{"name", []corev1.Container{container("w", "1")}, []corev1.Container{container("v", "1")}, false},
		{"request", []corev1.Container{container("w", "1")}, []corev1.Container{container("w", "2")}, false},
		{"no request", []corev1.Container{container("w", "1")}, []corev1.Container{container("w", "")}, false},
		{"restart policy", []corev1.Container{container("w", "1")}, []corev1.Container{withPolicy(container("w", "1"))}, false},
		{"limit", []corev1.Container{withLimit(container("w", "1"), "1Gi")}, []corev1.Container{withLimit(container("w", "1"), "2Gi")}, false},
		{"claim", []corev1.Container{withClaim(container("w", "1"), "gpu")}, []corev1.Container{withClaim(container("w", "1"), "nic")}, false},
		{"names that join alike", []corev1.Container{container("a", "1"), container("bc", "1")},
			[]corev1.Container{container("ab", "1"), container("c", "1")}, false},
		{"one container more", []corev1.Container{container("w", "1")}, []corev1.Container{container("w", "1"), container("w", "1")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := newInternTable()
			a, b := table.sharedContainers(tt.a), table.sharedContainers(tt.b)
			if got := &a[0] == &b[0]; got != tt.shared {
				t.Errorf("shared %v, want %v", got, tt.shared)
			}
			for i, in := range [][]corev1.Container{tt.a, tt.b} {
				out := [][]corev1.Container{a, b}[i]
				if diff := cmp.Diff(containerResources(in), out); diff != "" {
					t.Errorf("kept of list %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
	if got := newInternTable().sharedContainers(nil); got != nil {
		t.Errorf("nil containers: %v", got)
	}
}

// TestSharedTolerations: equal toleration lists share one slice, different ones do not.
func TestSharedTolerations(t *testing.T) {
	sec := func(s int64) *int64 { return &s }
	base := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name   string
		change func(*corev1.Toleration)
		shared bool
	}{
		{"equal", func(*corev1.Toleration) {}, true},
		{"key", func(x *corev1.Toleration) { x.Key = "nic" }, false},
		{"operator", func(x *corev1.Toleration) { x.Operator = corev1.TolerationOpEqual }, false},
		{"value", func(x *corev1.Toleration) { x.Value = "a" }, false},
		{"effect", func(x *corev1.Toleration) { x.Effect = corev1.TaintEffectNoExecute }, false},
		{"seconds", func(x *corev1.Toleration) { x.TolerationSeconds = sec(0) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := newInternTable()
			other := base
			tt.change(&other)
			a := table.sharedTolerations([]corev1.Toleration{base})
			b := table.sharedTolerations([]corev1.Toleration{other})
			if got := &a[0] == &b[0]; got != tt.shared {
				t.Errorf("shared %v, want %v", got, tt.shared)
			}
			if diff := cmp.Diff([]corev1.Toleration{other}, b); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestInternTableBounded: past internLimit distinct lists the table starts again, and
// each answer is still the list asked for.
func TestInternTableBounded(t *testing.T) {
	table := newInternTable()
	for i := range 3 * internLimit {
		name := "c" + strconv.Itoa(i%(internLimit+7))
		got := table.sharedContainers([]corev1.Container{container(name, "1")})
		if got[0].Name != name {
			t.Fatalf("asked for %s, got %s", name, got[0].Name)
		}
		if n := len(table.containers); n > internLimit {
			t.Fatalf("%d entries, limit %d", n, internLimit)
		}
	}
}

// servedPod is a pod of job j on node as decoded: every string its own allocation.
func servedPod(j int, role, node string) *corev1.Pod {
	own := func(s string) string { return string([]byte(s)) }
	prio := int32(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: own("job-" + strconv.Itoa(j) + "-" + role), Namespace: own("team-a"), GenerateName: own("job-" + strconv.Itoa(j) + "-"),
			Labels:          map[string]string{own("cps.io/job"): own("job-" + strconv.Itoa(j)), own("cps.io/role"): own(role)},
			Annotations:     map[string]string{own("note"): own("short"), own("long"): own(strings.Repeat("x", 65))},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: own("kubeflow.org/v1"), Kind: own("TFJob"), Name: own("job-" + strconv.Itoa(j)), UID: types.UID(own("u-" + strconv.Itoa(j)))}},
		},
		Spec: corev1.PodSpec{NodeName: own(node), SchedulerName: own("default-scheduler"), PriorityClassName: own("batch"), Priority: &prio},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(own("Running")), Conditions: []corev1.PodCondition{{
			Type: corev1.PodConditionType(own("PodScheduled")), Status: corev1.ConditionStatus(own("True")), Reason: own("")}}},
	}
}

// TestShareStrings: pods that repeat a string end up with one copy of it (label keys and
// values, namespace, owner, node, scheduler, phase, conditions, priority), long annotation
// values and the pods' own names stay their own, and no value changes.
func TestShareStrings(t *testing.T) {
	table := newInternTable()
	a, b := servedPod(1, "worker", "node-1"), servedPod(1, "ps", "node-1")
	wantA, wantB := a.DeepCopy(), b.DeepCopy()
	table.shareStrings(a)
	table.shareStrings(b)
	for i, p := range []*corev1.Pod{a, b} {
		if diff := cmp.Diff([]*corev1.Pod{wantA, wantB}[i], p); diff != "" {
			t.Errorf("pod %d changed (-want +got):\n%s", i, diff)
		}
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	key := func(m map[string]string, k string) string {
		for mk := range m {
			if mk == k {
				return mk
			}
		}
		t.Fatalf("no key %s", k)
		return ""
	}
	shared := []struct {
		what string
		x, y string
	}{
		{"namespace", a.Namespace, b.Namespace},
		{"generate name", a.GenerateName, b.GenerateName},
		{"label key", key(a.Labels, "cps.io/job"), key(b.Labels, "cps.io/job")},
		{"label value", a.Labels["cps.io/job"], b.Labels["cps.io/job"]},
		{"annotation key", key(a.Annotations, "note"), key(b.Annotations, "note")},
		{"short annotation value", a.Annotations["note"], b.Annotations["note"]},
		{"owner kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		{"owner name", a.OwnerReferences[0].Name, b.OwnerReferences[0].Name},
		{"owner UID", string(a.OwnerReferences[0].UID), string(b.OwnerReferences[0].UID)},
		{"node", a.Spec.NodeName, b.Spec.NodeName},
		{"scheduler", a.Spec.SchedulerName, b.Spec.SchedulerName},
		{"priority class", a.Spec.PriorityClassName, b.Spec.PriorityClassName},
		{"phase", string(a.Status.Phase), string(b.Status.Phase)},
		{"condition type", string(a.Status.Conditions[0].Type), string(b.Status.Conditions[0].Type)},
		{"condition status", string(a.Status.Conditions[0].Status), string(b.Status.Conditions[0].Status)},
	}
	for _, s := range shared {
		if !same(s.x, s.y) {
			t.Errorf("%s %q: two copies", s.what, s.x)
		}
	}
	if a.Spec.Priority != b.Spec.Priority {
		t.Errorf("priority: two copies")
	}
	if same(a.Annotations["long"], b.Annotations["long"]) {
		t.Errorf("a long annotation value is shared")
	}
	if !same(key(a.Labels, "cps.io/role"), key(b.Labels, "cps.io/role")) || same(a.Labels["cps.io/role"], b.Labels["cps.io/role"]) {
		t.Errorf("role label: the key should be shared and the values (worker, ps) not")
	}
}

// TestShareStringsBounded: past stringLimit distinct strings the table starts again, and
// each pod keeps its own values.
func TestShareStringsBounded(t *testing.T) {
	table := newInternTable()
	for i := range stringLimit + 100 {
		p := servedPod(i, "worker", "node-"+strconv.Itoa(i%7))
		table.shareStrings(p)
		if want := "job-" + strconv.Itoa(i); p.Labels["cps.io/job"] != want || p.OwnerReferences[0].Name != want {
			t.Fatalf("pod %d: label %s, owner %s, want %s", i, p.Labels["cps.io/job"], p.OwnerReferences[0].Name, want)
		}
		if n := len(table.strings); n > stringLimit {
			t.Fatalf("%d strings, limit %d", n, stringLimit)
		}
	}
}
