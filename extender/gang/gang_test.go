package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cps-extender/cps-extender/priority"
)

// TestParseRole: role names in their spellings, and every role's String read back.
func TestParseRole(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want priority.Role
	}{
		{"ps", "ps", priority.RolePS},
		{"upper PS", "PS", priority.RolePS},
		{"parameter-server", "parameter-server", priority.RolePS},
		{"ParameterServer", "ParameterServer", priority.RolePS},
		{"server", "Server", priority.RolePS},
		{"chief", "chief", priority.RoleChief},
		{"master", "Master", priority.RoleChief},
		{"launcher", "LAUNCHER", priority.RoleChief},
		{"worker", "Worker", priority.RoleWorker},
		{"worker with spaces", "  worker ", priority.RoleWorker},
		{"evaluator", "Evaluator", priority.RoleEvaluator},
		{"eval", "eval", priority.RoleEvaluator},
		{"empty", "", priority.RoleOther},
		{"Ray head", "head", priority.RoleChief},
		{"JobSet leader", "leader", priority.RoleChief},
		{"driver", "Driver", priority.RoleChief},
		{"JobSet workers", "workers", priority.RoleWorker},
		{"Trainer v2 node", "node", priority.RoleWorker},
		{"unknown", "dataset-initializer", priority.RoleOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseRole(tt.in); got != tt.want {
				t.Errorf("ParseRole(%q) = %v, want %v", tt.in, got, tt.want)
			}
			if got := ParseRole(tt.want.String()); got != tt.want {
				t.Errorf("ParseRole(%q) = %v: String does not round-trip", tt.want.String(), got)
			}
		})
	}
}

func TestParsers(t *testing.T) {
	tests := []struct {
		in       string
		index    int
		isTrue   bool
		nonEmpty string
	}{
		{in: "", index: -1, nonEmpty: "fallback"},
		{in: "0", index: 0, nonEmpty: "0"},
		{in: "12", index: 12, nonEmpty: "12"},
		{in: "-3", index: -1, nonEmpty: "-3"},
		{in: "1", index: 1, isTrue: true, nonEmpty: "1"},
		{in: "TRUE", index: -1, isTrue: true, nonEmpty: "TRUE"},
		{in: "yes", index: -1, isTrue: true, nonEmpty: "yes"},
		{in: "ps", index: -1, nonEmpty: "ps"},
		{in: "worker;ps,chief", index: -1, nonEmpty: "worker;ps,chief"},
		{in: "worker,evaluator", index: -1, nonEmpty: "worker,evaluator"},
	}
	for _, tt := range tests {
		if got := ParseIndex(tt.in); got != tt.index {
			t.Errorf("ParseIndex(%q) = %d, want %d", tt.in, got, tt.index)
		}
		if got := IsTrue(tt.in); got != tt.isTrue {
			t.Errorf("IsTrue(%q) = %v, want %v", tt.in, got, tt.isTrue)
		}
		if got := FirstNonEmpty("", tt.in, "fallback"); got != tt.nonEmpty {
			t.Errorf("FirstNonEmpty(\"\", %q, \"fallback\") = %q, want %q", tt.in, got, tt.nonEmpty)
		}
	}
}

// TestPodRequest: requests are counted as kube-scheduler counts them.
func TestPodRequest(t *testing.T) {
	q := resource.MustParse
	always := corev1.ContainerRestartPolicyAlways
	req := func(pairs ...string) corev1.ResourceRequirements {
		l := corev1.ResourceList{}
		for i := 0; i+1 < len(pairs); i += 2 {
			l[corev1.ResourceName(pairs[i])] = q(pairs[i+1])
		}
		return corev1.ResourceRequirements{Requests: l}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		st   corev1.PodStatus
		want priority.Resources
	}{
		{
			name: "containers summed, the largest init container, overhead added",
			spec: corev1.PodSpec{
				Containers:     []corev1.Container{{Name: "a", Resources: req("cpu", "500m", "memory", "1Gi")}, {Name: "b", Resources: req("cpu", "1", "nvidia.com/gpu", "2")}},
				InitContainers: []corev1.Container{{Name: "i", Resources: req("cpu", "2", "memory", "512Mi")}},
				Overhead:       corev1.ResourceList{"cpu": q("100m")},
			},
			want: priority.Resources{"cpu": 2100, "memory": 1 << 30, "nvidia.com/gpu": 2},
		},
		{
			name: "a sidecar (restartable init container) runs beside the containers: summed",
			spec: corev1.PodSpec{
				Containers:     []corev1.Container{{Name: "main", Resources: req("cpu", "2")}},
				InitContainers: []corev1.Container{{Name: "loader", RestartPolicy: &always, Resources: req("cpu", "2")}},
			},
			want: priority.Resources{"cpu": 4000},
		},
		{
			name: "an init container after a sidecar needs room beside it",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Resources: req("cpu", "1")}},
				InitContainers: []corev1.Container{
					{Name: "sidecar", RestartPolicy: &always, Resources: req("cpu", "1")},
					{Name: "setup", Resources: req("cpu", "3")},
				},
			},
			want: priority.Resources{"cpu": 4000}, // max(1 + 1, 1 + 3)
		},
		{
			name: "pod-level requests win over the containers' for cpu and memory",
			spec: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("3"), "memory": q("4Gi")}},
				Containers: []corev1.Container{{Name: "a", Resources: req("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1")}},
			},
			want: priority.Resources{"cpu": 3000, "memory": 4 << 30, "nvidia.com/gpu": 1},
		},
		{
			name: "a resize in progress counts the larger of spec and allocated",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: req("cpu", "1")}}},
			st:   corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "a", AllocatedResources: corev1.ResourceList{"cpu": q("2")}}}},
			want: priority.Resources{"cpu": 2000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, PodRequest(&corev1.Pod{Spec: tt.spec, Status: tt.st})); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamesPSTask(t *testing.T) {
	for list, want := range map[string]bool{"ps": true, "worker;ps": true, "ps,worker": true, " PS ": true, "worker": false, "": false} {
		if got := NamesPSTask(list); got != want {
			t.Errorf("NamesPSTask(%q) = %v, want %v", list, got, want)
		}
	}
}

// TestChiefServes: a job's chiefs become its servers only when it has no PS.
func TestChiefServes(t *testing.T) {
	const ps, chief, worker = priority.RolePS, priority.RoleChief, priority.RoleWorker
	tests := []struct {
		name      string
		roles     []priority.Role
		wantRoles []priority.Role
	}{
		{"a chief and workers: the chief serves", []priority.Role{chief, worker, worker}, []priority.Role{ps, worker, worker}},
		{"a PS: the chief stays a chief", []priority.Role{worker, chief, ps}, []priority.Role{worker, chief, ps}},
		{"workers only: nothing changes", []priority.Role{worker, worker}, []priority.Role{worker, worker}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &priority.Job{}
			for _, r := range tt.roles {
				job.Pods = append(job.Pods, priority.Pod{Role: r})
			}
			ChiefServes(job)
			var got []priority.Role
			for _, p := range job.Pods {
				got = append(got, p.Role)
			}
			if diff := cmp.Diff(tt.wantRoles, got); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScheduledFalse: only a PodScheduled condition that is False says the scheduler
// turned the pod away.
func TestScheduledFalse(t *testing.T) {
	tests := []struct {
		name       string
		conditions []corev1.PodCondition
		want       bool
	}{
		{"no conditions", nil, false},
		{"PodScheduled False", []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}, {Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}, true},
		{"PodScheduled True", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}, false},
		{"another condition False", []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{Conditions: tt.conditions}}
			if got := ScheduledFalse(pod); got != tt.want {
				t.Errorf("ScheduledFalse = %t, want %t", got, tt.want)
			}
		})
	}
}
