package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/priority"
)

func controller(apiVersion, kind, name string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, Controller: &yes}}
}

// TestWorkloadOf: each controller's pod, as the controller labels and owns it, names its
// workload, its gang, its role and its index.
func TestWorkloadOf(t *testing.T) {
	tests := []struct {
		name   string
		owners []metav1.OwnerReference
		labels map[string]string
		annots map[string]string
		want   WorkloadRef
		ok     bool
	}{
		{
			name:   "TFJob PS (training-operator v1.9.2 labels)",
			owners: controller("kubeflow.org/v1", "TFJob", "mnist"),
			labels: map[string]string{KubeflowJobLabel: "mnist", KubeflowReplicaType: "ps", KubeflowReplicaIndex: "0", "training.kubeflow.org/job-role": "master"},
			want:   WorkloadRef{Source: SourceKubeflow, Kind: "TFJob", Name: "mnist", Group: "mnist", Role: priority.RolePS, Index: 0},
			ok:     true,
		},
		{
			name:   "PyTorchJob master",
			owners: controller("kubeflow.org/v1", "PyTorchJob", "bert"),
			labels: map[string]string{KubeflowJobLabel: "bert", KubeflowReplicaType: "master", KubeflowReplicaIndex: "0"},
			want:   WorkloadRef{Source: SourceKubeflow, Kind: "PyTorchJob", Name: "bert", Group: "bert", Role: priority.RoleChief, Index: 0},
			ok:     true,
		},
		{
			name:   "MPIJob launcher",
			owners: controller("kubeflow.org/v1", "MPIJob", "pi"),
			labels: map[string]string{KubeflowReplicaType: "launcher"},
			want:   WorkloadRef{Source: SourceKubeflow, Kind: "MPIJob", Name: "pi", Group: "pi", Role: priority.RoleChief, Index: -1},
			ok:     true,
		},
		{
			name:   "a kind of kubeflow.org the extender does not know is no workload",
			owners: controller("kubeflow.org/v1", "Notebook", "nb"),
			want:   WorkloadRef{},
		},
		{
			name:   "JobSet pod, owned by a Job: the JobSet from its labels",
			owners: controller("batch/v1", "Job", "js-workers-1"),
			labels: map[string]string{JobSetNameLabel: "js", JobSetReplicatedJobLabel: "workers", JobSetJobIndexLabel: "1", JobCompletionIndex: "3"},
			want:   WorkloadRef{Source: SourceJobSet, Kind: "JobSet", Name: "js", Group: "js", Part: "workers", Role: priority.RoleWorker, Index: 1},
			ok:     true,
		},
		{
			name:   "LeaderWorkerSet worker: the group is its gang",
			owners: controller("apps/v1", "StatefulSet", "lws-1"),
			labels: map[string]string{LWSNameLabel: "lws", LWSGroupIndexLabel: "1", LWSWorkerIndexLabel: "3"},
			want:   WorkloadRef{Source: SourceLeaderWorkerSet, Kind: "LeaderWorkerSet", Name: "lws", Group: "lws-1", Part: LWSWorkersPart, Role: priority.RoleWorker, Index: 3},
			ok:     true,
		},
		{
			name:   "LeaderWorkerSet leader: the group's server, of no part",
			owners: controller("apps/v1", "StatefulSet", "lws"),
			labels: map[string]string{LWSNameLabel: "lws", LWSGroupIndexLabel: "1", LWSWorkerIndexLabel: "0"},
			want:   WorkloadRef{Source: SourceLeaderWorkerSet, Kind: "LeaderWorkerSet", Name: "lws", Group: "lws-1", Role: priority.RoleChief, Index: 0},
			ok:     true,
		},
		{
			name:   "RayCluster head",
			owners: controller("ray.io/v1", "RayCluster", "rc"),
			labels: map[string]string{RayClusterLabel: "rc", RayNodeTypeLabel: "head"},
			want:   WorkloadRef{Source: SourceRay, Kind: "RayCluster", Name: "rc", Group: "rc", Role: priority.RoleChief, Index: -1},
			ok:     true,
		},
		{
			name:   "Indexed Job pod",
			owners: controller("batch/v1", "Job", "train"),
			labels: map[string]string{JobCompletionIndex: "2", "batch.kubernetes.io/job-name": "train"},
			want:   WorkloadRef{Source: SourceIndexedJob, Kind: "Job", Name: "train", Group: "train", Role: priority.RoleWorker, Index: 2},
			ok:     true,
		},
		{
			name:   "a pod of a Job that is not Indexed is no workload",
			owners: controller("batch/v1", "Job", "plain"),
			labels: map[string]string{"batch.kubernetes.io/job-name": "plain"},
		},
		{
			name:   "Kueue plain pod group",
			labels: map[string]string{KueuePodGroupLabel: "grp"},
			annots: map[string]string{KueuePodGroupTotalCount: "4"},
			want:   WorkloadRef{Source: SourceKueue, Name: "grp", Group: "grp", Role: priority.RoleOther, Index: -1, MinMember: 4},
			ok:     true,
		},
		{
			name:   "Kueue plain pod group with a bad count",
			labels: map[string]string{KueuePodGroupLabel: "grp"},
			annots: map[string]string{KueuePodGroupTotalCount: "many"},
			want: WorkloadRef{Source: SourceKueue, Name: "grp", Group: "grp", Role: priority.RoleOther, Index: -1,
				Unknown: `its Kueue pod group has no valid kueue.x-k8s.io/pod-group-total-count annotation ("many")`},
			ok: true,
		},
		{
			name:   "a ReplicaSet's pod is no workload",
			owners: controller("apps/v1", "ReplicaSet", "web-7d4"),
		},
		{
			name:   "an owner that is not the controller does not count",
			owners: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "mnist"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: tt.owners, Labels: tt.labels, Annotations: tt.annots}}
			got, ok := WorkloadOf(pod)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WorkloadOf (-want +got):\n%s", diff)
			}
		})
	}
}

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	// As the API machinery decodes objects: integers as int64.
	raw, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestDeriveWorkload: owner object -> gang, for every kind, as their users write them.
func TestDeriveWorkload(t *testing.T) {
	created := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	meta := "metadata: {name: j, namespace: ns, creationTimestamp: \"2026-12-04T10:00:00Z\"}\n"
	tests := []struct {
		name string
		kind string
		doc  string
		want GroupInfo
	}{
		{
			name: "TFJob: the sum of its replicas, 1 for a replica type without a count",
			kind: "TFJob",
			doc: meta + `spec:
  tfReplicaSpecs:
    PS: {replicas: 1, template: {}}
    Worker: {replicas: 5, template: {}}
    Chief: {template: {}}`,
			want: GroupInfo{MinMember: 7, Created: created},
		},
		{
			name: "TFJob with runPolicy.schedulingPolicy.minAvailable",
			kind: "TFJob",
			doc: meta + `spec:
  runPolicy: {schedulingPolicy: {minAvailable: 3}}
  tfReplicaSpecs:
    PS: {replicas: 1}
    Worker: {replicas: 5}`,
			want: GroupInfo{MinMember: 3, Created: created},
		},
		{
			name: "a succeeded TFJob whose PS still runs",
			kind: "TFJob",
			doc: meta + `spec:
  tfReplicaSpecs: {PS: {replicas: 1}, Worker: {replicas: 2}}
status:
  conditions:
  - {type: Created, status: "True"}
  - {type: Running, status: "False"}
  - {type: Succeeded, status: "True"}`,
			want: GroupInfo{MinMember: 3, Created: created, Finished: "its TFJob ns/j succeeded"},
		},
		{
			name: "a failed PyTorchJob",
			kind: "PyTorchJob",
			doc: meta + `spec:
  pytorchReplicaSpecs: {Master: {replicas: 1}, Worker: {replicas: 3}}
status: {conditions: [{type: Failed, status: "True"}]}`,
			want: GroupInfo{MinMember: 4, Created: created, Finished: "its PyTorchJob ns/j failed"},
		},
		{
			name: "MPIJob",
			kind: "MPIJob",
			doc:  meta + `spec: {mpiReplicaSpecs: {Launcher: {replicas: 1}, Worker: {replicas: 4}}}`,
			want: GroupInfo{MinMember: 5, Created: created},
		},
		{
			name: "a Kubeflow job without replica specs",
			kind: "XGBoostJob",
			doc:  meta + `spec: {}`,
			want: GroupInfo{Created: created, Unknown: "its XGBoostJob ns/j has no replica specs to count"},
		},
		{
			name: "JobSet: replicas x parallelism over its replicated jobs (defaults 1)",
			kind: "JobSet",
			doc: meta + `spec:
  replicatedJobs:
  - name: leader
    template: {spec: {template: {}}}
  - name: workers
    replicas: 2
    template: {spec: {parallelism: 4, completions: 4}}`,
			want: GroupInfo{MinMember: 9, Created: created},
		},
		{
			name: "JobSet: completions below parallelism run fewer pods",
			kind: "JobSet",
			doc: meta + `spec:
  replicatedJobs:
  - {name: w, replicas: 3, template: {spec: {parallelism: 4, completions: 2}}}`,
			want: GroupInfo{MinMember: 6, Created: created},
		},
		{
			name: "a TrainJob's JobSet with initializers: one gang per start-up stage",
			kind: "JobSet",
			doc: `metadata:
  name: j
  namespace: ns
  creationTimestamp: "2026-12-04T10:00:00Z"
  ownerReferences: [{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: j, uid: u, controller: true}]
spec:
  replicatedJobs:
  - {name: dataset-initializer, template: {spec: {template: {}}}}
  - name: model-initializer
    dependsOn: [{name: dataset-initializer, status: Complete}]
    template: {spec: {template: {}}}
  - name: node
    dependsOn: [{name: model-initializer, status: Complete}]
    template: {spec: {parallelism: 4, completions: 4}}`,
			want: GroupInfo{MinMember: 1, Created: created, Owner: "TrainJob ns/j", Stages: map[string]Stage{
				"model-initializer": {Suffix: "model-initializer", MinMember: 1},
				"node":              {Suffix: "node", MinMember: 4},
			}},
		},
		{
			name: "JobSet: replicated jobs with the same dependencies start together",
			kind: "JobSet",
			doc: meta + `spec:
  replicatedJobs:
  - {name: driver}
  - {name: ps, replicas: 2, dependsOn: [{name: driver, status: Ready}]}
  - {name: workers, replicas: 4, dependsOn: [{name: driver, status: Ready}]}`,
			want: GroupInfo{MinMember: 1, Created: created, Stages: map[string]Stage{
				"ps":      {Suffix: "ps", MinMember: 6},
				"workers": {Suffix: "ps", MinMember: 6},
			}},
		},
		{
			name: "JobSet: startupPolicy InOrder starts each replicated job on its own",
			kind: "JobSet",
			doc: meta + `spec:
  startupPolicy: {startupPolicyOrder: InOrder}
  replicatedJobs:
  - {name: leader}
  - {name: workers, replicas: 3}`,
			want: GroupInfo{MinMember: 1, Created: created, Stages: map[string]Stage{"workers": {Suffix: "workers", MinMember: 3}}},
		},
		{
			name: "a completed JobSet",
			kind: "JobSet",
			doc: meta + `spec: {replicatedJobs: [{name: w, replicas: 2}]}
status: {terminalState: Completed}`,
			want: GroupInfo{MinMember: 2, Created: created, Finished: "its JobSet ns/j is completed"},
		},
		{
			name: "LeaderWorkerSet: the group size",
			kind: "LeaderWorkerSet",
			doc:  meta + `spec: {replicas: 3, leaderWorkerTemplate: {size: 4}}`,
			want: GroupInfo{MinMember: 4, Created: created},
		},
		{
			name: "LeaderWorkerSet, startupPolicy LeaderCreated (the default): the group",
			kind: "LeaderWorkerSet",
			doc:  meta + `spec: {replicas: 3, startupPolicy: LeaderCreated, leaderWorkerTemplate: {size: 4}}`,
			want: GroupInfo{MinMember: 4, Created: created},
		},
		{
			name: "LeaderWorkerSet, startupPolicy LeaderReady: the leader, then its workers",
			kind: "LeaderWorkerSet",
			doc:  meta + `spec: {replicas: 3, startupPolicy: LeaderReady, leaderWorkerTemplate: {size: 4}}`,
			want: GroupInfo{MinMember: 1, Created: created, Stages: map[string]Stage{"workers": {Suffix: "workers", MinMember: 3}}},
		},
		{
			name: "LeaderWorkerSet of exclusive topology: the leader, then its workers",
			kind: "LeaderWorkerSet",
			doc: `metadata:
  name: j
  namespace: ns
  creationTimestamp: "2026-12-04T10:00:00Z"
  annotations: {leaderworkerset.sigs.k8s.io/exclusive-topology: topology.kubernetes.io/zone}
spec: {leaderWorkerTemplate: {size: 2}}`,
			want: GroupInfo{MinMember: 1, Created: created, Stages: map[string]Stage{"workers": {Suffix: "workers", MinMember: 1}}},
		},
		{
			name: "LeaderWorkerSet, LeaderReady, of a leader alone: no workers to wait for",
			kind: "LeaderWorkerSet",
			doc:  meta + `spec: {startupPolicy: LeaderReady, leaderWorkerTemplate: {size: 1}}`,
			want: GroupInfo{MinMember: 1, Created: created},
		},
		{
			name: "LeaderWorkerSet without a valid size",
			kind: "LeaderWorkerSet",
			doc:  meta + `spec: {startupPolicy: LeaderReady, leaderWorkerTemplate: {size: 0}}`,
			want: GroupInfo{Created: created, Unknown: "its LeaderWorkerSet ns/j has no valid leaderWorkerTemplate.size"},
		},
		{
			name: "RayCluster: the head and each group's minReplicas x numOfHosts",
			kind: "RayCluster",
			doc: meta + `spec:
  headGroupSpec: {}
  workerGroupSpecs:
  - {groupName: gpu, replicas: 4, minReplicas: 2, numOfHosts: 2}
  - {groupName: cpu, minReplicas: 3}
  - {groupName: off, minReplicas: 5, suspend: true}`,
			want: GroupInfo{MinMember: 8, Created: created},
		},
		{
			name: "Indexed Job with parallelism = completions is one gang",
			kind: "Job",
			doc:  meta + `spec: {completionMode: Indexed, parallelism: 4, completions: 4}`,
			want: GroupInfo{MinMember: 4, Created: created},
		},
		{
			name: "an Indexed Job that runs its pods in waves is no gang",
			kind: "Job",
			doc:  meta + `spec: {completionMode: Indexed, parallelism: 2, completions: 8}`,
			want: GroupInfo{MinMember: 1, Created: created},
		},
		{
			name: "a complete Job",
			kind: "Job",
			doc: meta + `spec: {completionMode: Indexed, parallelism: 2, completions: 2}
status: {conditions: [{type: Complete, status: "True"}]}`,
			want: GroupInfo{MinMember: 2, Created: created, Finished: "its Job ns/j succeeded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DeriveWorkload(tt.kind, object(t, tt.doc))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DeriveWorkload (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDerivePodGroup: a PodGroup of each kind.
func TestDerivePodGroup(t *testing.T) {
	tests := []struct {
		name, source, doc string
		want              GroupInfo
	}{
		{name: "Volcano", source: SourceVolcano, doc: `{metadata: {name: g, annotations: {a: b}}, spec: {minMember: 4}}`,
			want: GroupInfo{MinMember: 4, Annotations: map[string]string{"a": "b"}}},
		{name: "coscheduling", source: SourceCoscheduling, doc: `{metadata: {name: g}, spec: {minMember: 2}}`, want: GroupInfo{MinMember: 2}},
		{name: "Workload API gang with a topology constraint", source: SourceWorkload,
			doc:  `{metadata: {name: g}, spec: {schedulingPolicy: {gang: {minCount: 6}}, schedulingConstraints: {topology: [{key: example.com/rack}]}}}`,
			want: GroupInfo{MinMember: 6, RequiredTopology: "example.com/rack"}},
		{name: "Workload API basic policy", source: SourceWorkload, doc: `{metadata: {name: g}, spec: {schedulingPolicy: {basic: {}}}}`,
			want: GroupInfo{MinMember: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, DerivePodGroup(tt.source, object(t, tt.doc))); diff != "" {
				t.Errorf("DerivePodGroup (-want +got):\n%s", diff)
			}
		})
	}
}
