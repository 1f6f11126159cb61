package sources

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
