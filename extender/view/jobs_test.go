package view

import (
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/priority"
)

func TestMembershipOf(t *testing.T) {
	created := time.Unix(1_700_000_000, 0)
	groups := func(source, ns, name string) (gang.PodGroupInfo, bool) {
		switch {
		case source == gang.SourceVolcano && name == "vj":
			return gang.PodGroupInfo{MinMember: 4, Created: created, Annotations: map[string]string{gang.VolcanoTopologyAntiAffinity: "ps"}}, true
		case source == gang.SourceCoscheduling && name == "cj":
			return gang.PodGroupInfo{MinMember: 2, Created: created}, true
		case source == gang.SourceWorkload && name == "wg":
			return gang.PodGroupInfo{MinMember: 6, Created: created, RequiredTopology: "example.com/rack"}, true
		}
		return gang.PodGroupInfo{}, false
	}
	g := config.DefaultConfig().Gang
	tests := []struct {
		name   string
		labels map[string]string
		annots map[string]string
		group  string // spec.schedulingGroup.podGroupName
		gang   func(*config.GangConfig)
		want   membership
		inJob  bool
	}{
		{
			name:   "volcano PodGroup: minimum, creation and hard PS anti-affinity from it",
			annots: map[string]string{gang.VolcanoGroupAnnotation: "vj", gang.VolcanoTaskSpec: "ps", gang.VolcanoTaskIndex: "1"},
			want:   membership{jobKey: "ns/vj", source: gang.SourceVolcano, role: priority.RolePS, index: 1, minMember: 4, created: created, hardPSAntiAffinity: true},
			inJob:  true,
		},
		{
			name:   "coscheduling PodGroup with a Kubeflow replica type",
			labels: map[string]string{gang.CoschedulingLabel: "cj", gang.KubeflowReplicaType: "Worker", gang.KubeflowReplicaIndex: "3"},
			want:   membership{jobKey: "ns/cj", source: gang.SourceCoscheduling, role: priority.RoleWorker, index: 3, minMember: 2, created: created},
			inJob:  true,
		},
		{
			name:   "a PodGroup that does not exist falls back to the min-member label",
			labels: map[string]string{gang.CoschedulingLabel: "missing", g.MinMemberLabel: "5"},
			want:   membership{jobKey: "ns/missing", source: gang.SourceCoscheduling, role: priority.RoleOther, index: -1, minMember: 5},
			inJob:  true,
		},
		{
			name:   "kubeflow labels",
			labels: map[string]string{gang.KubeflowJobLabel: "tf", gang.KubeflowReplicaType: "PS", gang.KubeflowReplicaIndex: "0", g.UserLabel: "alice"},
			want:   membership{jobKey: "ns/tf", source: gang.SourceKubeflow, role: priority.RolePS, index: 0, user: "alice"},
			inJob:  true,
		},
		{
			name:   "own labels, urgent as an annotation",
			labels: map[string]string{g.JobLabel: "j", g.RoleLabel: "chief", g.IndexLabel: "x", g.MinMemberLabel: "3"},
			annots: map[string]string{g.UrgentLabel: "true"},
			want:   membership{jobKey: "ns/j", source: gang.SourceLabels, role: priority.RoleChief, index: -1, minMember: 3, urgent: true},
			inJob:  true,
		},
		{
			name:   "Workload API PodGroup: its minCount, its topology key as required, the role from the labels",
			group:  "wg",
			labels: map[string]string{g.RoleLabel: "worker", g.IndexLabel: "2"},
			want: membership{jobKey: "ns/wg", source: gang.SourceWorkload, role: priority.RoleWorker, index: 2, minMember: 6, created: created,
				topology: &priority.TopologyRequest{Required: "example.com/rack"}},
			inJob: true,
		},
		{
			name:   "topology annotations: the pod's required level wins over its PodGroup's",
			group:  "wg",
			annots: map[string]string{g.RequiredTopologyAnnotation: "topology.kubernetes.io/zone", g.PreferredTopologyAnnotation: "example.com/rack"},
			want: membership{jobKey: "ns/wg", source: gang.SourceWorkload, role: priority.RoleOther, index: -1, minMember: 6, created: created,
				topology: &priority.TopologyRequest{Required: "topology.kubernetes.io/zone", Preferred: "example.com/rack"}},
			inJob: true,
		},
		{
			name:   "Workload source off: the pod's own labels make its job",
			group:  "wg",
			labels: map[string]string{g.JobLabel: "j"},
			gang:   func(g *config.GangConfig) { g.Workload = false },
			want:   membership{jobKey: "ns/j", source: gang.SourceLabels, role: priority.RoleOther, index: -1},
			inJob:  true,
		},
		{
			name:   "a switched-off source is not consulted",
			annots: map[string]string{gang.VolcanoGroupAnnotation: "vj"},
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
			if tt.group != "" {
				pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &tt.group}
			}
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
