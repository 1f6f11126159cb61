// Package gang holds the vocabulary of the gang sources the extender reads (Volcano and
// coscheduling PodGroups, Kubeflow labels, the project's own labels) and the small parsers
// and resource helpers every part shares, and reads which job a pod is in (Membership).
// It imports the priority model and the config.
package gang

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/cps-extender/cps-extender/priority"
)

// Well-known keys of the gang sources.
const (
	VolcanoGroupAnnotation = "scheduling.k8s.io/group-name"
	VolcanoTaskSpec        = "volcano.sh/task-spec"
	VolcanoTaskIndex       = "volcano.sh/task-index"
	CoschedulingLabel      = "scheduling.x-k8s.io/pod-group"
	KubeflowJobLabel       = "training.kubeflow.org/job-name"
	KubeflowReplicaType    = "training.kubeflow.org/replica-type"
	KubeflowReplicaIndex   = "training.kubeflow.org/replica-index"
	// VolcanoTopologyAntiAffinity lists task groups whose pods must not share a node, e.g.
	// "ps" or "ps;worker,evaluator" (groups separated by ";", tasks by ",").
	VolcanoTopologyAntiAffinity = "volcano.sh/task-topology-anti-affinity"
)

// TurnGate is the scheduling gate (KEP-3521) the extender lifts from a pending pod once its
// job has the turn. A pod created with it is not tried by kube-scheduler before then, so it
// costs no scheduling cycles and no backoff while its job waits; the lift, an update of the
// pod, moves it straight to kube-scheduler's active queue.
const TurnGate = "cps-extender.io/turn"

// SchedulingGates reports whether pod carries TurnGate, and whether it carries any other
// scheduling gate (one the extender does not lift).
func SchedulingGates(pod *corev1.Pod) (turn, other bool) {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == TurnGate {
			turn = true
		} else {
			other = true
		}
	}
	return turn, other
}

// ParseRole reads a role name as written in labels, replica types (Kubeflow), replicated
// jobs (JobSet) and node types (Ray), ignoring case and surrounding space: a leader, head,
// driver or coordinator counts as a chief, nodes as workers. Names it does not know give priority.RoleOther, which ranks with workers, so an
// unexpected replica type is still scheduled, just not ahead of anything.
func ParseRole(s string) priority.Role {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "ps", "parameter-server", "parameterserver", "server":
		return priority.RolePS
	case "chief", "master", "launcher", "head", "leader", "driver", "coordinator":
		return priority.RoleChief
	case "worker", "workers", "node", "nodes":
		return priority.RoleWorker
	case "evaluator", "eval":
		return priority.RoleEvaluator
	default:
		return priority.RoleOther
	}
}

// ChiefServes makes a job's chiefs (chief, master, launcher, head, leader) its servers
// when it has no parameter server: the model places a job's PS first, with the workers
// around them, and binds them first; in a PyTorch, MPI, Ray or LeaderWorkerSet job the
// chief is the pod the workers talk to.
func ChiefServes(job *priority.Job) {
	for i := range job.Pods {
		if job.Pods[i].Role == priority.RolePS {
			return
		}
	}
	for i := range job.Pods {
		if p := &job.Pods[i]; p.Role == priority.RoleChief {
			p.Role = priority.RolePS
		}
	}
}

// NamesPSTask reports whether a Volcano task-topology list names a parameter-server task.
func NamesPSTask(list string) bool {
	for _, group := range strings.Split(list, ";") {
		for _, task := range strings.Split(group, ",") {
			if t := strings.TrimSpace(task); t != "" && ParseRole(t) == priority.RolePS {
				return true
			}
		}
	}
	return false
}

// The gang sources, in the order they are checked.
const (
	SourceVolcano      = "volcano"
	SourceCoscheduling = "coscheduling"
	// SourceWorkload is Kubernetes' own Workload API: a scheduling.k8s.io/v1beta1
	// PodGroup that pods name in spec.schedulingGroup.podGroupName.
	SourceWorkload = "workload"
	SourceKubeflow = "kubeflow"
	SourceLabels   = "labels"
)

// HasPodGroup reports whether a source's jobs are PodGroups the extender reads.
func HasPodGroup(source string) bool {
	return source == SourceVolcano || source == SourceCoscheduling || source == SourceWorkload
}

// GroupLookup finds the object a gang comes from: a PodGroup of a source for which
// HasPodGroup is true (lookup is the source), or a workload (lookup is its WorkloadKind's
// Kind), by namespace and name.
type GroupLookup func(lookup, namespace, name string) (GroupInfo, bool)

// FirstNonEmpty returns the first of vs that is not "".
func FirstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// ParseIndex reads a replica or task index; -1 when s is not one.
func ParseIndex(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// IsTrue reads a boolean label or annotation value: true, 1 or yes.
func IsTrue(s string) bool {
	return strings.EqualFold(s, "true") || s == "1" || strings.EqualFold(s, "yes")
}

// requestOptions are the options kube-scheduler v1.37 counts a pod's requests with, for
// the pod it places and for the pods on a node alike (framework PodInfo.CalculateResource,
// with its default features: in-place resize and pod-level resources on).
var requestOptions = resourcehelper.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true}

// PodRequest is the pod's effective request as kube-scheduler counts it
// (component-helpers resource.PodRequests): its containers, sidecars (restartable init
// containers) added, the largest init container's need, pod-level requests where set, the
// pod overhead, and a resize in progress. CPU is in millicores, everything else in its
// base unit.
func PodRequest(pod *corev1.Pod) priority.Resources {
	return ResourcesOf(resourcehelper.PodRequests(pod, requestOptions))
}

// ResourcesOf is a resource list in the model's units: cpu in millicores, everything else
// in its base unit (rounded up, as Quantity.Value does).
func ResourcesOf(list corev1.ResourceList) priority.Resources {
	out := make(priority.Resources, len(list))
	for name, q := range list {
		if name == corev1.ResourceCPU {
			out[string(name)] = q.MilliValue()
		} else {
			out[string(name)] = q.Value()
		}
	}
	return out
}

// ScheduledAt is when the pod's PodScheduled condition turned True (zero when it is not):
// when it was bound.
func ScheduledAt(pod *corev1.Pod) time.Time {
	return ScheduledAtIn(pod.Status.Conditions)
}

// ScheduledAtIn is ScheduledAt of a pod with these status conditions.
func ScheduledAtIn(conditions []corev1.PodCondition) time.Time {
	for _, c := range conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// ScheduledFalse reports whether the pod's PodScheduled condition is False: kube-scheduler has
// tried it and failed.
func ScheduledFalse(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}

// PodTerminated reports whether a pod no longer holds resources.
func PodTerminated(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// PodRef names one pod.
type PodRef struct {
	Namespace string
	Name      string
	UID       types.UID
}

func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

// MemberOf finds pod among the job's pods, by UID or else by namespace/name (a pod of
// role other and index -1 when it is not there).
func MemberOf(job *priority.Job, pod PodRef) priority.Pod {
	name := pod.Namespace + "/" + pod.Name
	for _, p := range job.Pods {
		if (pod.UID != "" && p.UID == string(pod.UID)) || p.Name == name {
			return p
		}
	}
	return priority.Pod{Role: priority.RoleOther, Index: -1}
}
