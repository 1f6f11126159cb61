package view

import (
	"strconv"
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
	// labelMinMember is the pod's min-member label (0: none); a PodGroup's minimum wins.
	labelMinMember int
	created        time.Time // the PodGroup's creation; zero without one
	user           string    // from the pod's label; "" falls back to the namespace
	urgent         bool
	// hardPSAntiAffinity is set by a Volcano PodGroup whose task-topology anti-affinity
	// names the PS task: its PS must sit on distinct nodes.
	hardPSAntiAffinity bool
	// topology is what the pod's annotations ask of its job's placement, the PodGroup's
	// required key taken when the pod names none; nil when neither asks anything (most
	// pods: a pointer keeps the record small, and the recompute reads 10k of them).
	topology *priority.TopologyRequest
}

// membershipOf tells which job a pod belongs to, checking the sources in order: Volcano
// PodGroups, coscheduling PodGroups, Kubeflow labels, the project's own labels.
func membershipOf(g config.GangConfig, pod *corev1.Pod, groups gang.PodGroupLookup) (membership, bool) {
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
	case g.Volcano && annotations[gang.VolcanoGroupAnnotation] != "":
		m.source, group = gang.SourceVolcano, annotations[gang.VolcanoGroupAnnotation]
		m.role = priority.ParseRole(gang.FirstNonEmpty(annotations[gang.VolcanoTaskSpec], labels[gang.VolcanoTaskSpec], labels[g.RoleLabel]))
		m.index = gang.ParseIndex(gang.FirstNonEmpty(annotations[gang.VolcanoTaskIndex], labels[gang.VolcanoTaskIndex], labels[g.IndexLabel]))
	case g.Coscheduling && labels[gang.CoschedulingLabel] != "":
		m.source, group = gang.SourceCoscheduling, labels[gang.CoschedulingLabel]
		m.role = priority.ParseRole(gang.FirstNonEmpty(labels[gang.KubeflowReplicaType], labels[g.RoleLabel]))
		m.index = gang.ParseIndex(gang.FirstNonEmpty(labels[gang.KubeflowReplicaIndex], labels[g.IndexLabel]))
	case g.Workload && workloadGroup(pod) != "":
		m.source, group = gang.SourceWorkload, workloadGroup(pod)
		m.role = priority.ParseRole(gang.FirstNonEmpty(labels[g.RoleLabel], labels[gang.KubeflowReplicaType]))
		m.index = gang.ParseIndex(gang.FirstNonEmpty(labels[g.IndexLabel], labels[gang.KubeflowReplicaIndex]))
	case g.Kubeflow && labels[gang.KubeflowJobLabel] != "":
		m.source, group = gang.SourceKubeflow, labels[gang.KubeflowJobLabel]
		m.role = priority.ParseRole(labels[gang.KubeflowReplicaType])
		m.index = gang.ParseIndex(labels[gang.KubeflowReplicaIndex])
	case labels[g.JobLabel] != "":
		m.source, group = gang.SourceLabels, labels[g.JobLabel]
		m.role = priority.ParseRole(labels[g.RoleLabel])
		m.index = gang.ParseIndex(labels[g.IndexLabel])
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

// withGroup completes a pod's membership from its PodGroup (Volcano and coscheduling
// sources): the group's minimum wins over the pod's min-member label.
func (m membership) withGroup(groups gang.PodGroupLookup, namespace string) membership {
	return m.withGroupPart(m.lookupGroup(groups, namespace))
}

// groupPart is what a PodGroup adds to its pods' memberships.
type groupPart struct {
	minMember          int
	created            time.Time
	hardPSAntiAffinity bool
	requiredTopology   string
}

// lookupGroup reads the pod's PodGroup, if its source has one and it exists.
func (m membership) lookupGroup(groups gang.PodGroupLookup, namespace string) groupPart {
	if !gang.HasPodGroup(m.source) {
		return groupPart{}
	}
	pg, ok := groups(m.source, namespace, m.group)
	if !ok {
		return groupPart{}
	}
	return groupPart{minMember: pg.MinMember, created: pg.Created, hardPSAntiAffinity: gang.NamesPSTask(pg.Annotations[gang.VolcanoTopologyAntiAffinity]), requiredTopology: pg.RequiredTopology}
}

func (m membership) withGroupPart(g groupPart) membership {
	m.minMember, m.created, m.hardPSAntiAffinity = g.minMember, g.created, g.hardPSAntiAffinity
	if g.requiredTopology != "" && (m.topology == nil || m.topology.Required == "") {
		t := priority.TopologyRequest{Required: g.requiredTopology}
		if m.topology != nil {
			t.Preferred = m.topology.Preferred
		}
		m.topology = &t
	}
	if m.minMember == 0 {
		m.minMember = m.labelMinMember
	}
	return m
}
