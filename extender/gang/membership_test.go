package gang

import (
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/config"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/priority"
)

func TestMembershipOf(t *testing.T) {
	created := time.Unix(1_700_000_000, 0)
	groups := func(source, ns, name string) (GroupInfo, bool) {
		switch {
		case source == SourceVolcano && name == "vj":
			return GroupInfo{MinMember: 4, Created: created, Annotations: map[string]string{VolcanoTopologyAntiAffinity: "ps"}}, true
		case source == SourceCoscheduling && name == "cj":
			return GroupInfo{MinMember: 2, Created: created}, true
		case source == SourceWorkload && name == "wg":
			return GroupInfo{MinMember: 6, Created: created, RequiredTopology: "example.com/rack"}, true
		case source == "TFJob" && name == "mnist":
			return GroupInfo{MinMember: 6, Created: created}, true
		case source == "TFJob" && name == "done":
			return GroupInfo{MinMember: 3, Created: created, Finished: "its TFJob ns/done succeeded"}, true
		case source == "JobSet" && name == "js":
			return GroupInfo{MinMember: 1, Created: created, Stages: map[string]Stage{"node": {Suffix: "node", MinMember: 8}}}, true
		case source == "LeaderWorkerSet" && name == "lws":
			return GroupInfo{MinMember: 4, Created: created}, true
		case source == "LeaderWorkerSet" && name == "ready": // startupPolicy LeaderReady, size 4
			return GroupInfo{MinMember: 1, Created: created, Stages: map[string]Stage{"workers": {Suffix: "workers", MinMember: 3}}}, true
		}
		return GroupInfo{}, false
	}
	g := config.DefaultConfig().Gang
	tests := []struct {
		name   string
		labels map[string]string
		annots map[string]string
		group  string // spec.schedulingGroup.podGroupName
		owner  *metav1.OwnerReference
		gang   func(*config.GangConfig)
		want   Membership
		inJob  bool
	}{
		{
			name:   "volcano PodGroup: minimum, creation and hard PS anti-affinity from it",
			annots: map[string]string{VolcanoGroupAnnotation: "vj", VolcanoTaskSpec: "ps", VolcanoTaskIndex: "1"},
			want: Membership{JobKey: "ns/vj", Source: SourceVolcano, Role: priority.RolePS, Index: 1, MinMember: 4, Created: created, HardPSAntiAffinity: true,
				Lookup: SourceVolcano, Owner: "vj"},
			inJob: true,
		},
		{
			name:   "coscheduling PodGroup with a Kubeflow replica type",
			labels: map[string]string{CoschedulingLabel: "cj", KubeflowReplicaType: "Worker", KubeflowReplicaIndex: "3"},
			want:   Membership{JobKey: "ns/cj", Source: SourceCoscheduling, Role: priority.RoleWorker, Index: 3, MinMember: 2, Created: created, Lookup: SourceCoscheduling, Owner: "cj"},
			inJob:  true,
		},
		{
			name:   "a PodGroup that does not exist falls back to the min-member label",
			labels: map[string]string{CoschedulingLabel: "missing", g.MinMemberLabel: "5"},
			want:   Membership{JobKey: "ns/missing", Source: SourceCoscheduling, Role: priority.RoleOther, Index: -1, MinMember: 5, Lookup: SourceCoscheduling, Owner: "missing"},
			inJob:  true,
		},
		{
			name:   "a PodGroup not read yet, and no min-member label: the pod waits, saying why",
			labels: map[string]string{CoschedulingLabel: "missing"},
			want: Membership{JobKey: "ns/missing", Source: SourceCoscheduling, Role: priority.RoleOther, Index: -1, Lookup: SourceCoscheduling, Owner: "missing",
				SizeUnknown: "its PodGroup ns/missing is not in the extender's view"},
			inJob: true,
		},
		{
			name:   "kubeflow labels on a pod no Kubeflow job owns: the size is not known",
			labels: map[string]string{KubeflowJobLabel: "tf", KubeflowReplicaType: "PS", KubeflowReplicaIndex: "0", g.UserLabel: "alice"},
			want: Membership{JobKey: "ns/tf", Source: SourceKubeflow, Role: priority.RolePS, Index: 0, User: "alice",
				SizeUnknown: "its pods carry training.kubeflow.org/job-name but no Kubeflow job owns them; set cps-extender.io/min-member"},
			inJob: true,
		},
		{
			name:   "kubeflow labels and a min-member label",
			labels: map[string]string{KubeflowJobLabel: "tf", KubeflowReplicaType: "worker", g.MinMemberLabel: "3"},
			want:   Membership{JobKey: "ns/tf", Source: SourceKubeflow, Role: priority.RoleWorker, Index: -1, MinMember: 3},
			inJob:  true,
		},
		{
			name:   "kubeflow labels, sizeUnknown podsSeen: every pod of the job, as before",
			labels: map[string]string{KubeflowJobLabel: "tf", KubeflowReplicaType: "worker"},
			gang:   func(g *config.GangConfig) { g.SizeUnknown = config.SizeUnknownPodsSeen },
			want:   Membership{JobKey: "ns/tf", Source: SourceKubeflow, Role: priority.RoleWorker, Index: -1, GuessSize: true},
			inJob:  true,
		},
		{
			name:   "a TFJob's pod: the job's gang from the TFJob",
			owner:  &metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "mnist", Controller: ptr(true)},
			labels: map[string]string{KubeflowJobLabel: "mnist", KubeflowReplicaType: "ps", KubeflowReplicaIndex: "0"},
			want: Membership{JobKey: "ns/mnist", Source: SourceKubeflow, Role: priority.RolePS, Index: 0, MinMember: 6, Created: created,
				Lookup: "TFJob", Owner: "mnist"},
			inJob: true,
		},
		{
			name:   "a finished TFJob",
			owner:  &metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "done", Controller: ptr(true)},
			labels: map[string]string{KubeflowReplicaType: "ps"},
			want: Membership{JobKey: "ns/done", Source: SourceKubeflow, Role: priority.RolePS, Index: -1, MinMember: 3, Created: created,
				Lookup: "TFJob", Owner: "done", Finished: "its TFJob ns/done succeeded"},
			inJob: true,
		},
		{
			name:   "a TFJob not read: the pod waits, saying why",
			owner:  &metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "unseen", Controller: ptr(true)},
			labels: map[string]string{KubeflowReplicaType: "worker", KubeflowReplicaIndex: "2"},
			want: Membership{JobKey: "ns/unseen", Source: SourceKubeflow, Role: priority.RoleWorker, Index: 2,
				Lookup: "TFJob", Owner: "unseen", SizeUnknown: "its TFJob ns/unseen is not in the extender's view"},
			inJob: true,
		},
		{
			name:   "a TFJob not read, but the pod's min-member label gives the size",
			owner:  &metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "unseen", Controller: ptr(true)},
			labels: map[string]string{g.MinMemberLabel: "4"},
			want:   Membership{JobKey: "ns/unseen", Source: SourceKubeflow, Role: priority.RoleOther, Index: -1, MinMember: 4, Lookup: "TFJob", Owner: "unseen"},
			inJob:  true,
		},
		{
			name:   "Kubeflow source off: a TFJob's pod is in no job",
			owner:  &metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "mnist", Controller: ptr(true)},
			labels: map[string]string{KubeflowJobLabel: "mnist"},
			gang:   func(g *config.GangConfig) { g.Kubeflow = false },
			want:   Membership{Index: -1},
		},
		{
			name:   "a JobSet's first stage: the JobSet's key and main minimum",
			owner:  &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "js-init-0", Controller: ptr(true)},
			labels: map[string]string{JobSetNameLabel: "js", JobSetReplicatedJobLabel: "init", JobSetJobIndexLabel: "0", JobCompletionIndex: "0"},
			want: Membership{JobKey: "ns/js", Source: SourceJobSet, Role: priority.RoleOther, Index: 0, MinMember: 1, Created: created,
				Lookup: "JobSet", Owner: "js", Part: "init"},
			inJob: true,
		},
		{
			name:   "a JobSet's later stage is a job of its own",
			owner:  &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "js-node-0", Controller: ptr(true)},
			labels: map[string]string{JobSetNameLabel: "js", JobSetReplicatedJobLabel: "node", JobSetJobIndexLabel: "1"},
			want: Membership{JobKey: "ns/js.node", Source: SourceJobSet, Role: priority.RoleWorker, Index: 1, MinMember: 8, Created: created,
				Lookup: "JobSet", Owner: "js", Part: "node"},
			inJob: true,
		},
		{
			name:   "a LeaderWorkerSet group's leader",
			labels: map[string]string{LWSNameLabel: "lws", LWSGroupIndexLabel: "2", LWSWorkerIndexLabel: "0"},
			want: Membership{JobKey: "ns/lws-2", Source: SourceLeaderWorkerSet, Role: priority.RoleChief, Index: 0, MinMember: 4, Created: created,
				Lookup: "LeaderWorkerSet", Owner: "lws"},
			inJob: true,
		},
		{
			name:   "a LeaderWorkerSet group's worker: the same job",
			labels: map[string]string{LWSNameLabel: "lws", LWSGroupIndexLabel: "2", LWSWorkerIndexLabel: "3"},
			want: Membership{JobKey: "ns/lws-2", Source: SourceLeaderWorkerSet, Role: priority.RoleWorker, Index: 3, MinMember: 4, Created: created,
				Lookup: "LeaderWorkerSet", Owner: "lws", Part: "workers"},
			inJob: true,
		},
		{
			name:   "a LeaderReady LeaderWorkerSet group's leader: a job of one",
			labels: map[string]string{LWSNameLabel: "ready", LWSGroupIndexLabel: "0", LWSWorkerIndexLabel: "0"},
			want: Membership{JobKey: "ns/ready-0", Source: SourceLeaderWorkerSet, Role: priority.RoleChief, Index: 0, MinMember: 1, Created: created,
				Lookup: "LeaderWorkerSet", Owner: "ready"},
			inJob: true,
		},
		{
			name:   "a LeaderReady LeaderWorkerSet group's workers: a job of their own",
			labels: map[string]string{LWSNameLabel: "ready", LWSGroupIndexLabel: "0", LWSWorkerIndexLabel: "1"},
			want: Membership{JobKey: "ns/ready-0.workers", Source: SourceLeaderWorkerSet, Role: priority.RoleWorker, Index: 1, MinMember: 3, Created: created,
				Lookup: "LeaderWorkerSet", Owner: "ready", Part: "workers"},
			inJob: true,
		},
		{
			name:   "a Kueue pod group: the size from the pod",
			labels: map[string]string{KueuePodGroupLabel: "kg"},
			annots: map[string]string{KueuePodGroupTotalCount: "5"},
			want:   Membership{JobKey: "ns/kg", Source: SourceKueue, Role: priority.RoleOther, Index: -1, MinMember: 5, Owner: "kg"},
			inJob:  true,
		},
		{
			name:   "a Kueue pod group without its count",
			labels: map[string]string{KueuePodGroupLabel: "kg"},
			want: Membership{JobKey: "ns/kg", Source: SourceKueue, Role: priority.RoleOther, Index: -1, Owner: "kg",
				SizeUnknown: `its Kueue pod group has no valid kueue.x-k8s.io/pod-group-total-count annotation ("")`},
			inJob: true,
		},
		{
			name:   "the project's job label wins over the owner",
			owner:  &metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "mnist", Controller: ptr(true)},
			labels: map[string]string{g.JobLabel: "mine", g.MinMemberLabel: "2"},
			want:   Membership{JobKey: "ns/mine", Source: SourceLabels, Role: priority.RoleOther, Index: -1, MinMember: 2},
			inJob:  true,
		},
		{
			name:   "own labels, urgent as an annotation",
			labels: map[string]string{g.JobLabel: "j", g.RoleLabel: "chief", g.IndexLabel: "x", g.MinMemberLabel: "3"},
			annots: map[string]string{g.UrgentLabel: "true"},
			want:   Membership{JobKey: "ns/j", Source: SourceLabels, Role: priority.RoleChief, Index: -1, MinMember: 3, Urgent: true},
			inJob:  true,
		},
		{
			name:   "Workload API PodGroup: its minCount, its topology key as required, the role from the labels",
			group:  "wg",
			labels: map[string]string{g.RoleLabel: "worker", g.IndexLabel: "2"},
			want: Membership{JobKey: "ns/wg", Source: SourceWorkload, Role: priority.RoleWorker, Index: 2, MinMember: 6, Created: created,
				Lookup: SourceWorkload, Owner: "wg", Topology: &priority.TopologyRequest{Required: "example.com/rack"}},
			inJob: true,
		},
		{
			name:   "topology annotations: the pod's required level wins over its PodGroup's",
			group:  "wg",
			annots: map[string]string{g.RequiredTopologyAnnotation: "topology.kubernetes.io/zone", g.PreferredTopologyAnnotation: "example.com/rack"},
			want: Membership{JobKey: "ns/wg", Source: SourceWorkload, Role: priority.RoleOther, Index: -1, MinMember: 6, Created: created,
				Lookup: SourceWorkload, Owner: "wg", Topology: &priority.TopologyRequest{Required: "topology.kubernetes.io/zone", Preferred: "example.com/rack"}},
			inJob: true,
		},
		{
			name:   "Workload source off: the pod's own labels make its job",
			group:  "wg",
			labels: map[string]string{g.JobLabel: "j"},
			gang:   func(g *config.GangConfig) { g.Workload = false },
			want:   Membership{JobKey: "ns/j", Source: SourceLabels, Role: priority.RoleOther, Index: -1},
			inJob:  true,
		},
		{
			name:   "a switched-off source is not consulted",
			annots: map[string]string{VolcanoGroupAnnotation: "vj"},
			gang:   func(g *config.GangConfig) { g.Volcano = false },
			want:   Membership{Index: -1},
		},
		{
			name: "a plain pod is in no job",
			want: Membership{Index: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := g
			if tt.gang != nil {
				tt.gang(&cfg)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: tt.labels, Annotations: tt.annots}}
			if tt.owner != nil {
				pod.OwnerReferences = []metav1.OwnerReference{*tt.owner}
			}
			if tt.group != "" {
				pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &tt.group}
			}
			got, inJob := MembershipOf(cfg, pod, groups)
			if inJob != tt.inJob {
				t.Fatalf("inJob = %v, want %v", inJob, tt.inJob)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Membership{}, "Group", "LabelMinMember")); diff != "" {
				t.Errorf("membership (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestGroupMemo: a memo completes a membership as WithGroup does, looking each object up
// once however many pods name it; a pod without one looks nothing up.
func TestGroupMemo(t *testing.T) {
	created := time.Unix(1_700_000_000, 0)
	group := func(source, ns, name string) (GroupInfo, bool) {
		return GroupInfo{MinMember: 4, Created: created}, name == "pg"
	}
	lookups := map[string]int{}
	memo := NewGroupMemo(func(source, ns, name string) (GroupInfo, bool) {
		lookups[ns+"/"+name]++
		return group(source, ns, name)
	})
	tests := []struct {
		name      string
		m         Membership
		namespace string
		lookups   map[string]int // so far
	}{
		{"a pod of a PodGroup", Membership{JobKey: "ns/pg", Source: SourceCoscheduling, Lookup: SourceCoscheduling, Owner: "pg"}, "ns", map[string]int{"ns/pg": 1}},
		{"another pod of it", Membership{JobKey: "ns/pg", Source: SourceCoscheduling, Lookup: SourceCoscheduling, Owner: "pg", Index: 1}, "ns",
			map[string]int{"ns/pg": 1}},
		{"the same name in another namespace", Membership{JobKey: "other/pg", Source: SourceCoscheduling, Lookup: SourceCoscheduling, Owner: "pg"}, "other",
			map[string]int{"ns/pg": 1, "other/pg": 1}},
		{"a PodGroup not there", Membership{JobKey: "ns/gone", Source: SourceCoscheduling, Lookup: SourceCoscheduling, Owner: "gone"}, "ns",
			map[string]int{"ns/pg": 1, "other/pg": 1, "ns/gone": 1}},
		{"a pod without one", Membership{JobKey: "ns/j", MinMember: 2}, "ns", map[string]int{"ns/pg": 1, "other/pg": 1, "ns/gone": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.m.WithGroup(group, tt.namespace), memo.Complete(&tt.m, tt.namespace)); diff != "" {
				t.Errorf("membership (-WithGroup +memo):\n%s", diff)
			}
			if diff := cmp.Diff(tt.lookups, lookups); diff != "" {
				t.Errorf("lookups (-want +got):\n%s", diff)
			}
		})
	}
}
