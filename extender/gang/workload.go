package gang

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cps-extender/cps-extender/priority"
)

// The workload gang sources: a pod's gang derived from the object that made it (its top
// controller owner), for the operators that do not make PodGroups by default.
const (
	// SourceJobSet is a JobSet's pods (JobSet -> Jobs -> pods; a TrainJob of Kubeflow
	// Trainer v2 runs on one).
	SourceJobSet = "jobset"
	// SourceLeaderWorkerSet is one group of a LeaderWorkerSet: a leader and its workers.
	SourceLeaderWorkerSet = "leaderworkerset"
	// SourceRay is a KubeRay RayCluster's pods (a RayJob's too: it runs a RayCluster).
	SourceRay = "ray"
	// SourceIndexedJob is a batch Job with completionMode Indexed.
	SourceIndexedJob = "indexedjob"
	// SourceKueue is a Kueue plain pod group: pods labelled with its name and annotated
	// with its total count, and no owner.
	SourceKueue = "kueue"
)

// Well-known keys of the workload controllers, as they set them on pods.
const (
	JobSetNameLabel          = "jobset.sigs.k8s.io/jobset-name"
	JobSetReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	JobSetJobIndexLabel      = "jobset.sigs.k8s.io/job-index"
	LWSNameLabel             = "leaderworkerset.sigs.k8s.io/name"
	LWSGroupIndexLabel       = "leaderworkerset.sigs.k8s.io/group-index"
	LWSWorkerIndexLabel      = "leaderworkerset.sigs.k8s.io/worker-index"
	RayClusterLabel          = "ray.io/cluster"
	RayNodeTypeLabel         = "ray.io/node-type"
	JobCompletionIndex       = "batch.kubernetes.io/job-completion-index"
	KueuePodGroupLabel       = "kueue.x-k8s.io/pod-group-name"
	KueuePodGroupTotalCount  = "kueue.x-k8s.io/pod-group-total-count"
)

// LWSExclusiveTopology, an annotation of a LeaderWorkerSet, puts each group in a topology
// domain of its own: its controller creates a group's workers only once the leader is
// scheduled.
const LWSExclusiveTopology = "leaderworkerset.sigs.k8s.io/exclusive-topology"

// WorkloadKind is a kind of object whose pods make one gang (or, for a LeaderWorkerSet,
// one gang per group).
type WorkloadKind struct {
	// Kind is the object's kind, as in owner references: "TFJob".
	Kind string
	// Source is the gang source that switches it on: SourceKubeflow, SourceJobSet, ...
	Source string
	// GVR is the resource the extender reads the objects from.
	GVR schema.GroupVersionResource
}

func kubeflowKind(kind, resource string) WorkloadKind {
	return WorkloadKind{Kind: kind, Source: SourceKubeflow, GVR: schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: resource}}
}

// WorkloadKinds are the kinds whose objects the extender reads to derive gangs.
var WorkloadKinds = []WorkloadKind{
	kubeflowKind("TFJob", "tfjobs"),
	kubeflowKind("PyTorchJob", "pytorchjobs"),
	kubeflowKind("MPIJob", "mpijobs"),
	kubeflowKind("XGBoostJob", "xgboostjobs"),
	kubeflowKind("PaddleJob", "paddlejobs"),
	kubeflowKind("JAXJob", "jaxjobs"),
	{Kind: "JobSet", Source: SourceJobSet, GVR: schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}},
	{Kind: "LeaderWorkerSet", Source: SourceLeaderWorkerSet, GVR: schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}},
	{Kind: "RayCluster", Source: SourceRay, GVR: schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}},
	{Kind: "Job", Source: SourceIndexedJob, GVR: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}},
}

// WorkloadKindOf returns the workload kind named kind.
func WorkloadKindOf(kind string) (WorkloadKind, bool) {
	for _, k := range WorkloadKinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return WorkloadKind{}, false
}

// WorkloadRef is the workload a pod's gang comes from, as the pod itself says it: its
// controller owner reference and the labels its controller sets.
type WorkloadRef struct {
	// Source is the gang source (a WorkloadKind's, or SourceKueue).
	Source string
	// Kind is the object to read the gang from (a WorkloadKind's Kind); "" when the pod
	// alone gives its gang (a Kueue pod group).
	Kind string
	// Name is the object's name in the pod's namespace.
	Name string
	// Group is the gang's name in the pod's namespace: Name, or for a LeaderWorkerSet
	// "<name>-<group index>".
	Group string
	// Part is a JobSet pod's replicated job, or LWSWorkersPart for a LeaderWorkerSet's
	// worker: the parts a workload's gangs may be split by (GroupInfo.Stages).
	Part string
	Role priority.Role
	// Index orders the pods of one role (-1 when unknown).
	Index int
	// MinMember is the gang minimum the pod itself gives (a Kueue pod group's total
	// count); 0 when the object gives it.
	MinMember int
	// Unknown says why the pod's gang size cannot be known ("" when it can).
	Unknown string
}

// kubeflowGroup is the API group of the Kubeflow training-operator's v1 jobs.
const kubeflowGroup = "kubeflow.org"

// WorkloadOf finds the workload a pod's gang comes from: a Kubeflow training job, a
// JobSet, a LeaderWorkerSet group, a RayCluster or an Indexed Job by the pod's
// controller owner and its controller's labels, or a Kueue plain pod group by its labels.
// A JobSet's and a LeaderWorkerSet's pods are owned by objects in between (Jobs,
// StatefulSets), so for those the labels their controllers set on every pod name the top
// owner.
func WorkloadOf(pod *corev1.Pod) (WorkloadRef, bool) {
	labels := pod.Labels
	owner := metav1.GetControllerOfNoCopy(pod)
	ownerGroup := ""
	if owner != nil {
		ownerGroup, _, _ = strings.Cut(owner.APIVersion, "/")
	}
	switch {
	case owner != nil && ownerGroup == kubeflowGroup && isKubeflowKind(owner.Kind):
		return WorkloadRef{Source: SourceKubeflow, Kind: owner.Kind, Name: owner.Name, Group: owner.Name,
			Role: ParseRole(labels[KubeflowReplicaType]), Index: ParseIndex(labels[KubeflowReplicaIndex])}, true
	case labels[JobSetNameLabel] != "":
		name, part := labels[JobSetNameLabel], labels[JobSetReplicatedJobLabel]
		return WorkloadRef{Source: SourceJobSet, Kind: "JobSet", Name: name, Group: name, Part: part,
			Role: ParseRole(part), Index: ParseIndex(FirstNonEmpty(labels[JobSetJobIndexLabel], labels[JobCompletionIndex]))}, true
	case labels[LWSNameLabel] != "" && labels[LWSGroupIndexLabel] != "":
		name, group := labels[LWSNameLabel], labels[LWSGroupIndexLabel]
		ref := WorkloadRef{Source: SourceLeaderWorkerSet, Kind: "LeaderWorkerSet", Name: name, Group: name + "-" + group,
			Role: priority.RoleWorker, Index: ParseIndex(labels[LWSWorkerIndexLabel]), Part: LWSWorkersPart}
		if ref.Index == 0 {
			ref.Role, ref.Part = priority.RoleChief, "" // the group's leader
		}
		return ref, true
	case owner != nil && ownerGroup == "ray.io" && owner.Kind == "RayCluster":
		return WorkloadRef{Source: SourceRay, Kind: "RayCluster", Name: owner.Name, Group: owner.Name,
			Role: ParseRole(labels[RayNodeTypeLabel]), Index: -1}, true
	case owner != nil && owner.APIVersion == "batch/v1" && owner.Kind == "Job" && FirstNonEmpty(labels[JobCompletionIndex], pod.Annotations[JobCompletionIndex]) != "":
		return WorkloadRef{Source: SourceIndexedJob, Kind: "Job", Name: owner.Name, Group: owner.Name,
			Role: priority.RoleWorker, Index: ParseIndex(FirstNonEmpty(labels[JobCompletionIndex], pod.Annotations[JobCompletionIndex]))}, true
	case labels[KueuePodGroupLabel] != "":
		name := labels[KueuePodGroupLabel]
		ref := WorkloadRef{Source: SourceKueue, Name: name, Group: name, Role: priority.RoleOther, Index: -1}
		total := pod.Annotations[KueuePodGroupTotalCount]
		if n, err := strconv.Atoi(total); err == nil && n > 0 {
			ref.MinMember = n
		} else {
			ref.Unknown = "its Kueue pod group has no valid " + KueuePodGroupTotalCount + " annotation (" + strconv.Quote(total) + ")"
		}
		return ref, true
	}
	return WorkloadRef{}, false
}

func isKubeflowKind(kind string) bool {
	k, ok := WorkloadKindOf(kind)
	return ok && k.Source == SourceKubeflow
}

// WorkloadLabel returns the first label of a workload controller the pod carries ("" for
// none): a pod with one that is in no gang is bound on its own, which its user most likely
// did not mean.
func WorkloadLabel(pod *corev1.Pod) string {
	for _, key := range []string{KubeflowJobLabel, JobSetNameLabel, LWSNameLabel, RayClusterLabel, KueuePodGroupLabel} {
		if pod.Labels[key] != "" {
			return key
		}
	}
	return ""
}

// LWSWorkersPart is the part of a LeaderWorkerSet group's workers (WorkloadRef.Part).
const LWSWorkersPart = "workers"

// Stage is a part of a workload that starts apart from the rest and so is a gang of its
// own: the replicated jobs of a JobSet that its controller creates only once others are
// ready or complete; a LeaderWorkerSet group's workers, created only once its leader is
// ready or scheduled.
type Stage struct {
	// Suffix makes the stage's job name: "<workload>.<suffix>".
	Suffix    string
	MinMember int
}

// GroupInfo is what the extender reads from the object a gang comes from: a PodGroup of
// any kind, or a workload.
type GroupInfo struct {
	MinMember int
	Created   time.Time
	// Annotations carry Volcano's task-topology hints.
	Annotations map[string]string
	// RequiredTopology is the node label key one domain of which must hold the whole
	// group (a Workload API PodGroup's schedulingConstraints.topology); "" for none.
	RequiredTopology string
	// Finished says how the workload ended ("its TFJob succeeded"); "" while it runs.
	Finished string
	// Unknown says why the gang size cannot be derived from the object ("" when it can).
	Unknown string
	// Stages are, by part (a JobSet's replicated job, a LeaderWorkerSet group's workers),
	// the parts that are gangs of their own; parts not in it are of the main gang, whose
	// minimum is MinMember.
	Stages map[string]Stage
	// Owner names the object above the workload that a user submitted, when there is one
	// ("TrainJob default/llm"); "" otherwise.
	Owner string
}

// DeriveWorkload reads a workload object's gang: its minimum, when it was created, whether
// it finished, and its stages. kind is the object's WorkloadKind.Kind.
//
//   - Kubeflow jobs (kubeflow.org/v1): runPolicy.schedulingPolicy.minAvailable when set,
//     else the sum of every replica type's replicas (1 when unset), as the training-operator
//     sizes the PodGroups it makes. Finished when a Succeeded or Failed condition is True.
//   - JobSet: the sum over its replicated jobs of replicas x pods per Job (parallelism,
//     or completions when fewer). Replicated jobs that the controller starts later
//     (dependsOn, or startupPolicy InOrder) are gangs of their own, one per start-up
//     stage. Finished when its terminal state or a Completed or Failed condition says so.
//   - LeaderWorkerSet: leaderWorkerTemplate.size per group (1 when unset). When its
//     controller creates a group's workers only once the leader is Ready (startupPolicy
//     LeaderReady) or scheduled (the exclusive-topology annotation), the leader is a gang
//     of its own (1) and the workers another (stage "workers", size - 1): a gang of the
//     whole group would wait for workers that never come.
//   - RayCluster: the head and each worker group's minReplicas x numOfHosts (suspended
//     groups left out). Finished when its state is failed.
//   - Job: an Indexed Job whose parallelism equals its completions is one gang of that
//     size; any other Job's pods are not a gang (minimum 1). Finished when a Complete or
//     Failed condition is True.
func DeriveWorkload(kind string, obj *unstructured.Unstructured) GroupInfo {
	info := GroupInfo{Created: obj.GetCreationTimestamp().Time}
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	ref := kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	switch kind {
	case "JobSet":
		deriveJobSet(&info, spec, ref)
		if owner := metav1.GetControllerOfNoCopy(obj); owner != nil {
			info.Owner = owner.Kind + " " + obj.GetNamespace() + "/" + owner.Name
		}
		if state, _, _ := unstructured.NestedString(obj.Object, "status", "terminalState"); state != "" {
			info.Finished = "its " + ref + " is " + strings.ToLower(state)
		} else {
			info.Finished = finishedByCondition(obj, ref, "Completed", "Failed")
		}
	case "LeaderWorkerSet":
		deriveLeaderWorkerSet(&info, obj, spec, ref)
	case "RayCluster":
		info.MinMember = 1 // the head
		groups, _, _ := unstructured.NestedSlice(spec, "workerGroupSpecs")
		for _, g := range groups {
			group, ok := g.(map[string]any)
			if !ok {
				continue
			}
			if suspended, _, _ := unstructured.NestedBool(group, "suspend"); suspended {
				continue
			}
			info.MinMember += max(intOr(group, 0, "minReplicas"), 0) * max(intOr(group, 1, "numOfHosts"), 1)
		}
		if state, _, _ := unstructured.NestedString(obj.Object, "status", "state"); state == "failed" {
			info.Finished = "its " + ref + " failed"
		}
	case "Job":
		parallelism, completions := intOr(spec, 1, "parallelism"), intOr(spec, -1, "completions")
		mode, _, _ := unstructured.NestedString(spec, "completionMode")
		info.MinMember = 1
		if mode == "Indexed" && parallelism == completions && parallelism > 1 {
			info.MinMember = parallelism
		}
		info.Finished = finishedByCondition(obj, ref, "Complete", "Failed")
	default: // the Kubeflow training jobs
		deriveKubeflow(&info, spec, ref)
		info.Finished = finishedByCondition(obj, ref, "Succeeded", "Failed")
	}
	return info
}

// deriveKubeflow sizes a Kubeflow v1 job from the replica specs map of its spec (the
// field whose name ends in ReplicaSpecs: tfReplicaSpecs, pytorchReplicaSpecs, ...).
func deriveKubeflow(info *GroupInfo, spec map[string]any, ref string) {
	if n, found, _ := unstructured.NestedInt64(spec, "runPolicy", "schedulingPolicy", "minAvailable"); found && n > 0 {
		info.MinMember = int(n)
		return
	}
	found := false
	for field, v := range spec {
		replicas, ok := v.(map[string]any)
		if !ok || !strings.HasSuffix(field, "ReplicaSpecs") {
			continue
		}
		found = true
		for _, r := range replicas {
			if rs, ok := r.(map[string]any); ok {
				info.MinMember += max(intOr(rs, 1, "replicas"), 0)
			}
		}
	}
	if !found || info.MinMember == 0 {
		info.MinMember = 0
		info.Unknown = "its " + ref + " has no replica specs to count"
	}
}

// deriveJobSet sizes a JobSet: its main gang, and the later start-up stages as gangs of
// their own.
func deriveJobSet(info *GroupInfo, spec map[string]any, ref string) {
	jobs, _, _ := unstructured.NestedSlice(spec, "replicatedJobs")
	order, _, _ := unstructured.NestedString(spec, "startupPolicy", "startupPolicyOrder")
	type part struct{ name, stage string }
	var parts []part
	stages := map[string]*Stage{} // by start-up signature
	for _, j := range jobs {
		rj, ok := j.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(rj, "name")
		// Replicated jobs that start together make one stage: every one without
		// dependencies, else those with the same ones; under InOrder each its own.
		stage := dependsOnSignature(rj)
		if order == "InOrder" {
			stage = name
		}
		s := stages[stage]
		if s == nil {
			s = &Stage{Suffix: name}
			stages[stage] = s
		}
		s.MinMember += max(intOr(rj, 1, "replicas"), 0) * podsPerJob(rj)
		parts = append(parts, part{name: name, stage: stage})
	}
	if len(parts) == 0 {
		info.Unknown = "its " + ref + " has no replicated jobs"
		return
	}
	main := parts[0].stage // the controller creates the first replicated job at once
	info.MinMember = stages[main].MinMember
	for _, p := range parts {
		if p.stage != main {
			if info.Stages == nil {
				info.Stages = map[string]Stage{}
			}
			info.Stages[p.name] = *stages[p.stage]
		}
	}
	if info.MinMember == 0 {
		info.Unknown = "its " + ref + " has no pods in its first replicated job"
	}
}

// deriveLeaderWorkerSet sizes a LeaderWorkerSet's groups: the whole group, or the leader
// and then its workers when the controller creates the workers only once the leader is
// Ready (startupPolicy LeaderReady) or scheduled (LWSExclusiveTopology).
func deriveLeaderWorkerSet(info *GroupInfo, obj *unstructured.Unstructured, spec map[string]any, ref string) {
	size := intOr(spec, 1, "leaderWorkerTemplate", "size")
	info.MinMember = size
	if size < 1 {
		info.Unknown = "its " + ref + " has no valid leaderWorkerTemplate.size"
		return
	}
	policy, _, _ := unstructured.NestedString(spec, "startupPolicy")
	_, exclusive := obj.GetAnnotations()[LWSExclusiveTopology]
	if size > 1 && (policy == "LeaderReady" || exclusive) {
		info.MinMember = 1
		info.Stages = map[string]Stage{LWSWorkersPart: {Suffix: LWSWorkersPart, MinMember: size - 1}}
	}
}

// dependsOnSignature is a replicated job's dependencies as one string ("" for none).
func dependsOnSignature(rj map[string]any) string {
	deps, _, _ := unstructured.NestedSlice(rj, "dependsOn")
	var b strings.Builder
	for _, d := range deps {
		if dep, ok := d.(map[string]any); ok {
			name, _, _ := unstructured.NestedString(dep, "name")
			status, _, _ := unstructured.NestedString(dep, "status")
			b.WriteString(name + "=" + status + ";")
		}
	}
	return b.String()
}

// podsPerJob is how many pods of one Job of a replicated job run at once: parallelism (1
// when unset), or completions when fewer.
func podsPerJob(rj map[string]any) int {
	parallelism := intOr(rj, 1, "template", "spec", "parallelism")
	if completions := intOr(rj, -1, "template", "spec", "completions"); completions >= 0 && completions < parallelism {
		return completions
	}
	return max(parallelism, 0)
}

// intOr reads an integer field, def when it is absent or not an integer.
func intOr(m map[string]any, def int, fields ...string) int {
	n, found, err := unstructured.NestedInt64(m, fields...)
	if !found || err != nil {
		return def
	}
	return int(n)
}

// finishedByCondition says how a workload ended by its status conditions: "" unless a
// condition of type success or failure is True.
func finishedByCondition(obj *unstructured.Unstructured, ref, success, failure string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		cond, ok := c.(map[string]any)
		if !ok || cond["status"] != "True" {
			continue
		}
		switch cond["type"] {
		case success:
			return "its " + ref + " succeeded"
		case failure:
			return "its " + ref + " failed"
		}
	}
	return ""
}

// DerivePodGroup reads a PodGroup of a source for which HasPodGroup is true: its minimum,
// creation time and annotations; of a Workload API PodGroup, its gang's minCount (1 for a
// basic, non-gang policy) and its first topology constraint's key.
func DerivePodGroup(source string, obj *unstructured.Unstructured) GroupInfo {
	info := GroupInfo{Created: obj.GetCreationTimestamp().Time, Annotations: obj.GetAnnotations()}
	if source != SourceWorkload {
		info.MinMember = intOr(obj.Object, 0, "spec", "minMember")
		return info
	}
	info.MinMember = intOr(obj.Object, 1, "spec", "schedulingPolicy", "gang", "minCount")
	constraints, _, _ := unstructured.NestedSlice(obj.Object, "spec", "schedulingConstraints", "topology")
	for _, c := range constraints {
		if m, ok := c.(map[string]any); ok {
			if key, ok := m["key"].(string); ok && key != "" {
				info.RequiredTopology = key
				break
			}
		}
	}
	return info
}
