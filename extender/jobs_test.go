package extender

import (
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/config"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/priority"
)

func TestMembershipOf(t *testing.T) {
	created := time.Unix(1_700_000_000, 0)
	groups := func(source, ns, name string) (PodGroupInfo, bool) {
		switch {
		case source == SourceVolcano && name == "vj":
			return PodGroupInfo{MinMember: 4, Created: created, Annotations: map[string]string{volcanoTopologyAntiAffinity: "ps"}}, true
		case source == SourceCoscheduling && name == "cj":
			return PodGroupInfo{MinMember: 2, Created: created}, true
		}
		return PodGroupInfo{}, false
	}
	g := config.DefaultConfig().Gang
	tests := []struct {
		name   string
		labels map[string]string
		annots map[string]string
		gang   func(*config.GangConfig)
		want   membership
		inJob  bool
	}{
		{
			name:   "volcano PodGroup: minimum, creation and hard PS anti-affinity from it",
			annots: map[string]string{volcanoGroupAnnotation: "vj", volcanoTaskSpec: "ps", volcanoTaskIndex: "1"},
			want:   membership{jobKey: "ns/vj", source: SourceVolcano, role: priority.RolePS, index: 1, minMember: 4, created: created, hardPSAntiAffinity: true},
			inJob:  true,
		},
		{
			name:   "coscheduling PodGroup with a Kubeflow replica type",
			labels: map[string]string{coschedulingLabel: "cj", kubeflowReplicaType: "Worker", kubeflowReplicaIndex: "3"},
			want:   membership{jobKey: "ns/cj", source: SourceCoscheduling, role: priority.RoleWorker, index: 3, minMember: 2, created: created},
			inJob:  true,
		},
		{
			name:   "a PodGroup that does not exist falls back to the min-member label",
			labels: map[string]string{coschedulingLabel: "missing", g.MinMemberLabel: "5"},
			want:   membership{jobKey: "ns/missing", source: SourceCoscheduling, role: priority.RoleOther, index: -1, minMember: 5},
			inJob:  true,
		},
		{
			name:   "kubeflow labels",
			labels: map[string]string{kubeflowJobLabel: "tf", kubeflowReplicaType: "PS", kubeflowReplicaIndex: "0", g.UserLabel: "alice"},
			want:   membership{jobKey: "ns/tf", source: SourceKubeflow, role: priority.RolePS, index: 0, user: "alice"},
			inJob:  true,
		},
		{
			name:   "own labels, urgent as an annotation",
			labels: map[string]string{g.JobLabel: "j", g.RoleLabel: "chief", g.IndexLabel: "x", g.MinMemberLabel: "3"},
			annots: map[string]string{g.UrgentLabel: "true"},
			want:   membership{jobKey: "ns/j", source: SourceLabels, role: priority.RoleChief, index: -1, minMember: 3, urgent: true},
			inJob:  true,
		},
		{
			name:   "a switched-off source is not consulted",
			annots: map[string]string{volcanoGroupAnnotation: "vj"},
			gang:   func(g *config.GangConfig) { g.Volcano = false },
			want:   membership{index: -1},
		},
		{
			name: "a plain pod is in no job",
			want: membership{index: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := g
			if tt.gang != nil {
				tt.gang(&cfg)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: tt.labels, Annotations: tt.annots}}
			got, inJob := membershipOf(cfg, pod, groups)
			if inJob != tt.inJob {
				t.Fatalf("inJob = %v, want %v", inJob, tt.inJob)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(membership{}), cmpopts.IgnoreFields(membership{}, "group", "labelMinMember")); diff != "" {
				t.Errorf("membership (-want +got):\n%s", diff)
			}
		})
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
			if diff := cmp.Diff(tt.want, podRequest(&corev1.Pod{Spec: tt.spec, Status: tt.st})); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamesPSTask(t *testing.T) {
	for list, want := range map[string]bool{"ps": true, "worker;ps": true, "ps,worker": true, " PS ": true, "worker": false, "": false} {
		if got := namesPSTask(list); got != want {
			t.Errorf("namesPSTask(%q) = %v, want %v", list, got, want)
		}
	}
}
