package view

import (
	"strconv"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"

	corev1 "k8s.io/api/core/v1"

	"github.com/cps-extender/cps-extender/priority"
)

// membership is what one pod says about its job.
type membership struct {
	jobKey    string
	source    string
	group     string // the job's name within its namespace
	role      priority.Role
	index     int
	minMember int // 0: unknown (every pod of the job)
	// labelMinMember is the pod's min-member label (0: none); a PodGroup's minimum wins,
	// a workload's does not.
	labelMinMember int
	// lookup names the object the gang comes from: a PodGroup source, or a workload kind
	// ("TFJob"); owner is that object's name. Both "" when the pod alone says it all.
	lookup, owner string
	// part is a JobSet pod's replicated job: a later start-up stage is a job of its own.
	part string
	// guessSize: a gang whose size cannot be known is taken to be the pods that exist
	// (gang.sizeUnknown: podsSeen).
	guessSize bool
	// sizeUnknown says why the gang size cannot be known yet; finished how the workload
	// ended (priority.Job's SizeUnknown and Finished).
	sizeUnknown, finished string
	created               time.Time // the PodGroup's or workload's creation; zero without one
	user                  string    // from the pod's label; "" falls back to the namespace
	urgent                bool
	// hardPSAntiAffinity is set by a Volcano PodGroup whose task-topology anti-affinity
	// names the PS task: its PS must sit on distinct nodes.
	hardPSAntiAffinity bool
	// topology is what the pod's annotations ask of its job's placement, the PodGroup's
	// required key taken when the pod names none; nil when neither asks anything (most
	// pods: a pointer keeps the record small, and the recompute reads 10k of them).
	topology *priority.TopologyRequest
}

// membershipOf tells which job a pod belongs to (podMembership) and completes it from the
// object its gang comes from.
func membershipOf(g config.GangConfig, pod *corev1.Pod, groups gang.GroupLookup) (membership, bool) {
	m, ok := podMembership(g, pod)
	if !ok {
		return m, false
	}
	return m.withGroup(groups, pod.Namespace), true
}

// workloadOn reports whether the config reads the gangs of a workload source.
func workloadOn(g config.GangConfig, source string) bool {
	switch source {
	case gang.SourceKubeflow:
		return g.Kubeflow
	case gang.SourceJobSet:
		return g.JobSet
	case gang.SourceLeaderWorkerSet:
		return g.LeaderWorkerSet
	case gang.SourceRay:
		return g.Ray
	case gang.SourceIndexedJob:
		return g.IndexedJob
	case gang.SourceKueue:
		return g.Kueue
	}
	return false
}

// podMembership is what the pod alone says about its job: everything but what the object
// its gang comes from adds (withGroup). It depends only on the pod and the config, so the
// cluster view computes it once per pod event. The sources, in order: the PodGroups
// (Volcano, coscheduling, the Workload API), the project's own job label, the workload that
// made the pod (gang.WorkloadOf: its controller owner), and the Kubeflow labels of a pod
// no Kubeflow job owns.
func podMembership(g config.GangConfig, pod *corev1.Pod) (membership, bool) {
	m := membership{index: -1, guessSize: g.SizeUnknown == config.SizeUnknownPodsSeen}
	labels, annotations := pod.Labels, pod.Annotations
	var group string
	workload, isWorkload := gang.WorkloadOf(pod)
	switch {
	case g.Volcano && annotations[gang.VolcanoGroupAnnotation] != "":
		m.source, group = gang.SourceVolcano, annotations[gang.VolcanoGroupAnnotation]
		m.role = gang.ParseRole(gang.FirstNonEmpty(annotations[gang.VolcanoTaskSpec], labels[gang.VolcanoTaskSpec], labels[g.RoleLabel]))
		m.index = gang.ParseIndex(gang.FirstNonEmpty(annotations[gang.VolcanoTaskIndex], labels[gang.VolcanoTaskIndex], labels[g.IndexLabel]))
		m.lookup, m.owner = m.source, group
	case g.Coscheduling && labels[gang.CoschedulingLabel] != "":
		m.source, group = gang.SourceCoscheduling, labels[gang.CoschedulingLabel]
		m.role = gang.ParseRole(gang.FirstNonEmpty(labels[gang.KubeflowReplicaType], labels[g.RoleLabel]))
		m.index = gang.ParseIndex(gang.FirstNonEmpty(labels[gang.KubeflowReplicaIndex], labels[g.IndexLabel]))
		m.lookup, m.owner = m.source, group
	case g.Workload && workloadGroup(pod) != "":
		m.source, group = gang.SourceWorkload, workloadGroup(pod)
		m.role = gang.ParseRole(gang.FirstNonEmpty(labels[g.RoleLabel], labels[gang.KubeflowReplicaType]))
		m.index = gang.ParseIndex(gang.FirstNonEmpty(labels[g.IndexLabel], labels[gang.KubeflowReplicaIndex]))
		m.lookup, m.owner = m.source, group
	case labels[g.JobLabel] != "":
		m.source, group = gang.SourceLabels, labels[g.JobLabel]
		m.role = gang.ParseRole(labels[g.RoleLabel])
		m.index = gang.ParseIndex(labels[g.IndexLabel])
	case isWorkload && workloadOn(g, workload.Source):
		m.source, group = workload.Source, workload.Group
		m.role, m.index = workload.Role, workload.Index
		if r := labels[g.RoleLabel]; r != "" {
			m.role = gang.ParseRole(r)
		}
		m.lookup, m.owner, m.part = workload.Kind, workload.Name, workload.Part
		m.labelMinMember, m.sizeUnknown = workload.MinMember, workload.Unknown
	case g.Kubeflow && labels[gang.KubeflowJobLabel] != "":
		// Kubeflow's labels on a pod no Kubeflow job owns: its gang size is not known.
		m.source, group = gang.SourceKubeflow, labels[gang.KubeflowJobLabel]
		m.role = gang.ParseRole(labels[gang.KubeflowReplicaType])
		m.index = gang.ParseIndex(labels[gang.KubeflowReplicaIndex])
		m.sizeUnknown = "its pods carry " + gang.KubeflowJobLabel + " but no Kubeflow job owns them; set " + g.MinMemberLabel
	default:
		return m, false
	}
	m.group = group
	m.jobKey = pod.Namespace + "/" + group
	if n, err := strconv.Atoi(labels[g.MinMemberLabel]); err == nil && n > 0 {
		m.labelMinMember = n
	}
	m.user = labels[g.UserLabel]
	m.urgent = gang.IsTrue(labels[g.UrgentLabel]) || gang.IsTrue(annotations[g.UrgentLabel])
	if req, pref := annotations[g.RequiredTopologyAnnotation], annotations[g.PreferredTopologyAnnotation]; req != "" || pref != "" {
		m.topology = &priority.TopologyRequest{Required: req, Preferred: pref}
	}
	return m, true
}

// workloadGroup is the Workload API PodGroup a pod names ("" for none).
func workloadGroup(pod *corev1.Pod) string {
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return *sg.PodGroupName
	}
	return ""
}

// withGroup completes a pod's membership from the object its gang comes from.
func (m membership) withGroup(groups gang.GroupLookup, namespace string) membership {
	return m.withGroupPart(m.lookupGroup(groups, namespace))
}

// groupPart is what a PodGroup or a workload adds to its pods' memberships.
type groupPart struct {
	minMember          int
	created            time.Time
	hardPSAntiAffinity bool
	requiredTopology   string
	// found: the object was read (a PodGroup that is not there adds nothing).
	found bool
	// unknown and finished are GroupInfo's; stages its Stages.
	unknown, finished string
	stages            map[string]gang.Stage
}

// lookupGroup reads the object the pod's gang comes from, if it has one.
func (m membership) lookupGroup(groups gang.GroupLookup, namespace string) groupPart {
	if m.lookup == "" {
		return groupPart{}
	}
	info, ok := groups(m.lookup, namespace, m.owner)
	if !ok {
		return groupPart{}
	}
	return groupPart{minMember: info.MinMember, created: info.Created, hardPSAntiAffinity: gang.NamesPSTask(info.Annotations[gang.VolcanoTopologyAntiAffinity]),
		requiredTopology: info.RequiredTopology, found: true, unknown: info.Unknown, finished: info.Finished, stages: info.Stages}
}

// withGroupPart completes m from what its object says. A PodGroup's minimum wins over the
// pod's min-member label; the label wins over a workload's size, and over a size that
// cannot be known. A JobSet's later start-up stage is a job of its own:
// "<namespace>/<jobset>.<first replicated job of the stage>".
func (m membership) withGroupPart(g groupPart) membership {
	m.minMember, m.created, m.hardPSAntiAffinity = g.minMember, g.created, g.hardPSAntiAffinity
	m.finished = g.finished
	if g.requiredTopology != "" && (m.topology == nil || m.topology.Required == "") {
		t := priority.TopologyRequest{Required: g.requiredTopology}
		if m.topology != nil {
			t.Preferred = m.topology.Preferred
		}
		m.topology = &t
	}
	if stage, ok := g.stages[m.part]; ok {
		m.group += "." + stage.Suffix
		m.jobKey += "." + stage.Suffix
		m.minMember = stage.MinMember
	}
	if !gang.HasPodGroup(m.source) && m.lookup != "" {
		// A workload: its pods wait until it is read.
		switch {
		case !g.found:
			ns, _, _ := strings.Cut(m.jobKey, "/")
			m.sizeUnknown = "its " + m.lookup + " " + ns + "/" + m.owner + " is not in the extender's view"
		case g.unknown != "":
			m.sizeUnknown = g.unknown
		}
	}
	if m.labelMinMember > 0 && (m.minMember == 0 || !gang.HasPodGroup(m.source)) {
		m.minMember, m.sizeUnknown = m.labelMinMember, ""
	}
	if m.sizeUnknown != "" && m.guessSize {
		m.minMember, m.sizeUnknown = 0, ""
	}
	return m
}
