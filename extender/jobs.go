package extender

import (
	"strconv"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/config"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/cps-extender/cps-extender/priority"
)

// Well-known keys of the gang sources (protocols.md, section 3).
const (
	volcanoGroupAnnotation = "scheduling.k8s.io/group-name"
	volcanoTaskSpec        = "volcano.sh/task-spec"
	volcanoTaskIndex       = "volcano.sh/task-index"
	coschedulingLabel      = "scheduling.x-k8s.io/pod-group"
	kubeflowJobLabel       = "training.kubeflow.org/job-name"
	kubeflowReplicaType    = "training.kubeflow.org/replica-type"
	kubeflowReplicaIndex   = "training.kubeflow.org/replica-index"
	// volcanoTopologyAntiAffinity lists task groups whose pods must not share a node, e.g.
	// "ps" or "ps;worker,evaluator" (groups separated by ";", tasks by ",").
	volcanoTopologyAntiAffinity = "volcano.sh/task-topology-anti-affinity"
)

// namesPSTask reports whether a Volcano task-topology list names a parameter-server task.
func namesPSTask(list string) bool {
	for _, group := range strings.Split(list, ";") {
		for _, task := range strings.Split(group, ",") {
			if t := strings.TrimSpace(task); t != "" && priority.ParseRole(t) == priority.RolePS {
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
	SourceKubeflow     = "kubeflow"
	SourceLabels       = "labels"
)

// PodGroupInfo is what the extender reads from a PodGroup of either kind.
type PodGroupInfo struct {
	MinMember int
	Created   time.Time
	// Annotations carry Volcano's task-topology hints.
	Annotations map[string]string
}

// PodGroupLookup finds a PodGroup of a source (SourceVolcano or SourceCoscheduling).
type PodGroupLookup func(source, namespace, name string) (PodGroupInfo, bool)

// membership is what one pod says about its job.
type membership struct {
	jobKey    string
	source    string
	group     string // the job's name within its namespace
	role      priority.Role
	index     int
	minMember int // 0: unknown (every pod of the job)
	// labelMinMember is the pod's min-member label (0: none); a PodGroup's minimum wins.
	labelMinMember int
	created        time.Time // the PodGroup's creation; zero without one
	user           string    // from the pod's label; "" falls back to the namespace
	urgent         bool
	// hardPSAntiAffinity is set by a Volcano PodGroup whose task-topology anti-affinity
	// names the PS task: its PS must sit on distinct nodes.
	hardPSAntiAffinity bool
}

// membershipOf tells which job a pod belongs to, checking the sources in order: Volcano
// PodGroups, coscheduling PodGroups, Kubeflow labels, the project's own labels.
func membershipOf(g config.GangConfig, pod *corev1.Pod, groups PodGroupLookup) (membership, bool) {
	m, ok := podMembership(g, pod)
	if !ok {
		return m, false
	}
	return m.withGroup(groups, pod.Namespace), true
}

// podMembership is what the pod alone says about its job: everything but the PodGroup's
// minimum, creation and hints (withGroup adds those). It depends only on the pod and the
// config, so the cluster view computes it once per pod event.
func podMembership(g config.GangConfig, pod *corev1.Pod) (membership, bool) {
	m := membership{index: -1}
	labels, annotations := pod.Labels, pod.Annotations
	var group string
	switch {
	case g.Volcano && annotations[volcanoGroupAnnotation] != "":
		m.source, group = SourceVolcano, annotations[volcanoGroupAnnotation]
		m.role = priority.ParseRole(firstNonEmpty(annotations[volcanoTaskSpec], labels[volcanoTaskSpec], labels[g.RoleLabel]))
		m.index = parseIndex(firstNonEmpty(annotations[volcanoTaskIndex], labels[volcanoTaskIndex], labels[g.IndexLabel]))
	case g.Coscheduling && labels[coschedulingLabel] != "":
		m.source, group = SourceCoscheduling, labels[coschedulingLabel]
		m.role = priority.ParseRole(firstNonEmpty(labels[kubeflowReplicaType], labels[g.RoleLabel]))
		m.index = parseIndex(firstNonEmpty(labels[kubeflowReplicaIndex], labels[g.IndexLabel]))
	case g.Kubeflow && labels[kubeflowJobLabel] != "":
		m.source, group = SourceKubeflow, labels[kubeflowJobLabel]
		m.role = priority.ParseRole(labels[kubeflowReplicaType])
		m.index = parseIndex(labels[kubeflowReplicaIndex])
	case labels[g.JobLabel] != "":
		m.source, group = SourceLabels, labels[g.JobLabel]
		m.role = priority.ParseRole(labels[g.RoleLabel])
		m.index = parseIndex(labels[g.IndexLabel])
	default:
		return m, false
	}
	m.group = group
	m.jobKey = pod.Namespace + "/" + group
	if n, err := strconv.Atoi(labels[g.MinMemberLabel]); err == nil && n > 0 {
		m.labelMinMember = n
	}
	m.user = labels[g.UserLabel]
	m.urgent = isTrue(labels[g.UrgentLabel]) || isTrue(annotations[g.UrgentLabel])
	return m, true
}

// withGroup completes a pod's membership from its PodGroup (Volcano and coscheduling
// sources): the group's minimum wins over the pod's min-member label.
func (m membership) withGroup(groups PodGroupLookup, namespace string) membership {
	return m.withGroupPart(m.lookupGroup(groups, namespace))
}

// groupPart is what a PodGroup adds to its pods' memberships.
type groupPart struct {
	minMember          int
	created            time.Time
	hardPSAntiAffinity bool
}

// lookupGroup reads the pod's PodGroup, if its source has one and it exists.
func (m membership) lookupGroup(groups PodGroupLookup, namespace string) groupPart {
	if m.source != SourceVolcano && m.source != SourceCoscheduling {
		return groupPart{}
	}
	pg, ok := groups(m.source, namespace, m.group)
	if !ok {
		return groupPart{}
	}
	return groupPart{minMember: pg.MinMember, created: pg.Created, hardPSAntiAffinity: namesPSTask(pg.Annotations[volcanoTopologyAntiAffinity])}
}

func (m membership) withGroupPart(g groupPart) membership {
	m.minMember, m.created, m.hardPSAntiAffinity = g.minMember, g.created, g.hardPSAntiAffinity
	if m.minMember == 0 {
		m.minMember = m.labelMinMember
	}
	return m
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func parseIndex(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func isTrue(s string) bool {
	return strings.EqualFold(s, "true") || s == "1" || strings.EqualFold(s, "yes")
}

// requestOptions are the options kube-scheduler v1.37 counts a pod's requests with, for
// the pod it places and for the pods on a node alike (framework PodInfo.CalculateResource,
// with its default features: in-place resize and pod-level resources on).
var requestOptions = resourcehelper.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true}

// podRequest is the pod's effective request as kube-scheduler counts it
// (component-helpers resource.PodRequests): its containers, sidecars (restartable init
// containers) added, the largest init container's need, pod-level requests where set, the
// pod overhead, and a resize in progress. CPU is in millicores, everything else in its
// base unit.
func podRequest(pod *corev1.Pod) priority.Resources {
	return resourcesOf(resourcehelper.PodRequests(pod, requestOptions))
}

// resourcesOf is a resource list in the model's units: cpu in millicores, everything else
// in its base unit (rounded up, as Quantity.Value does).
func resourcesOf(list corev1.ResourceList) priority.Resources {
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

// podTerminated reports whether a pod no longer holds resources.
func podTerminated(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
