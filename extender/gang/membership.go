package gang

import (
	"strconv"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/config"

	corev1 "k8s.io/api/core/v1"

	"github.com/cps-extender/cps-extender/priority"
)

// Membership is what one pod says about its job.
type Membership struct {
	JobKey    string
	Source    string
	Group     string // the job's name within its namespace
	Role      priority.Role
	Index     int
	MinMember int // 0: unknown (every pod of the job)
	// LabelMinMember is the pod's min-member label (0: none); a PodGroup's minimum wins,
	// a workload's does not.
	LabelMinMember int
	// Lookup names the object the gang comes from: a PodGroup source, or a workload kind
	// ("TFJob"); Owner is that object's name. Both "" when the pod alone says it all.
	Lookup, Owner string
	// Part is a JobSet pod's replicated job: a later start-up stage is a job of its own.
	Part string
	// GuessSize: a gang whose size cannot be known is taken to be the pods that exist
	// (sizeUnknown: podsSeen).
	GuessSize bool
	// SizeUnknown says why the gang size cannot be known yet; Finished how the workload
	// ended (priority.Job's SizeUnknown and Finished).
	SizeUnknown, Finished string
	Created               time.Time // the PodGroup's or workload's creation; zero without one
	User                  string    // from the pod's label; "" falls back to the namespace
	Urgent                bool
	// HardPSAntiAffinity is set by a Volcano PodGroup whose task-topology anti-affinity
	// names the PS task: its PS must sit on distinct nodes.
	HardPSAntiAffinity bool
	// Topology is what the pod's annotations ask of its job's placement, the PodGroup's
	// required key taken when the pod names none; nil when neither asks anything (most
	// pods: a pointer keeps the record small, and the recompute reads 10k of them).
	Topology *priority.TopologyRequest
}

// MembershipOf tells which job a pod belongs to (PodMembership) and completes it from the
// object its gang comes from.
func MembershipOf(g config.GangConfig, pod *corev1.Pod, groups GroupLookup) (Membership, bool) {
	m, ok := PodMembership(g, pod)
	if !ok {
		return m, false
	}
	return m.WithGroup(groups, pod.Namespace), true
}

// WorkloadOn reports whether the config reads the gangs of a workload source.
func WorkloadOn(g config.GangConfig, source string) bool {
	switch source {
	case SourceKubeflow:
		return g.Kubeflow
	case SourceJobSet:
		return g.JobSet
	case SourceLeaderWorkerSet:
		return g.LeaderWorkerSet
	case SourceRay:
		return g.Ray
	case SourceIndexedJob:
		return g.IndexedJob
	case SourceKueue:
		return g.Kueue
	}
	return false
}

// PodMembership is what the pod alone says about its job: everything but what the object
// its gang comes from adds (WithGroup). It depends only on the pod and the config, so the
// cluster view computes it once per pod event. The sources, in order: the PodGroups
// (Volcano, coscheduling, the Workload API), the project's own job label, the workload that
// made the pod (WorkloadOf: its controller owner), and the Kubeflow labels of a pod
// no Kubeflow job owns.
func PodMembership(g config.GangConfig, pod *corev1.Pod) (Membership, bool) {
	m := Membership{Index: -1, GuessSize: g.SizeUnknown == config.SizeUnknownPodsSeen}
	labels, annotations := pod.Labels, pod.Annotations
	var group string
	workload, isWorkload := WorkloadOf(pod)
	switch {
	case g.Volcano && annotations[VolcanoGroupAnnotation] != "":
		m.Source, group = SourceVolcano, annotations[VolcanoGroupAnnotation]
		m.Role = ParseRole(FirstNonEmpty(annotations[VolcanoTaskSpec], labels[VolcanoTaskSpec], labels[g.RoleLabel]))
		m.Index = ParseIndex(FirstNonEmpty(annotations[VolcanoTaskIndex], labels[VolcanoTaskIndex], labels[g.IndexLabel]))
		m.Lookup, m.Owner = m.Source, group
	case g.Coscheduling && labels[CoschedulingLabel] != "":
		m.Source, group = SourceCoscheduling, labels[CoschedulingLabel]
		m.Role = ParseRole(FirstNonEmpty(labels[KubeflowReplicaType], labels[g.RoleLabel]))
		m.Index = ParseIndex(FirstNonEmpty(labels[KubeflowReplicaIndex], labels[g.IndexLabel]))
		m.Lookup, m.Owner = m.Source, group
	case g.Workload && workloadGroup(pod) != "":
		m.Source, group = SourceWorkload, workloadGroup(pod)
		m.Role = ParseRole(FirstNonEmpty(labels[g.RoleLabel], labels[KubeflowReplicaType]))
		m.Index = ParseIndex(FirstNonEmpty(labels[g.IndexLabel], labels[KubeflowReplicaIndex]))
		m.Lookup, m.Owner = m.Source, group
	case labels[g.JobLabel] != "":
		m.Source, group = SourceLabels, labels[g.JobLabel]
		m.Role = ParseRole(labels[g.RoleLabel])
		m.Index = ParseIndex(labels[g.IndexLabel])
	case isWorkload && WorkloadOn(g, workload.Source):
		m.Source, group = workload.Source, workload.Group
		m.Role, m.Index = workload.Role, workload.Index
		if r := labels[g.RoleLabel]; r != "" {
			m.Role = ParseRole(r)
		}
		m.Lookup, m.Owner, m.Part = workload.Kind, workload.Name, workload.Part
		m.LabelMinMember, m.SizeUnknown = workload.MinMember, workload.Unknown
	case g.Kubeflow && labels[KubeflowJobLabel] != "":
		// Kubeflow's labels on a pod no Kubeflow job owns: its gang size is not known.
		m.Source, group = SourceKubeflow, labels[KubeflowJobLabel]
		m.Role = ParseRole(labels[KubeflowReplicaType])
		m.Index = ParseIndex(labels[KubeflowReplicaIndex])
		m.SizeUnknown = "its pods carry " + KubeflowJobLabel + " but no Kubeflow job owns them; set " + g.MinMemberLabel
	default:
		return m, false
	}
	m.Group = group
	m.JobKey = pod.Namespace + "/" + group
	if n, err := strconv.Atoi(labels[g.MinMemberLabel]); err == nil && n > 0 {
		m.LabelMinMember = n
	}
	m.User = labels[g.UserLabel]
	m.Urgent = IsTrue(labels[g.UrgentLabel]) || IsTrue(annotations[g.UrgentLabel])
	if req, pref := annotations[g.RequiredTopologyAnnotation], annotations[g.PreferredTopologyAnnotation]; req != "" || pref != "" {
		m.Topology = &priority.TopologyRequest{Required: req, Preferred: pref}
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

// WithGroup completes a pod's membership from the object its gang comes from.
func (m Membership) WithGroup(groups GroupLookup, namespace string) Membership {
	return m.WithGroupPart(m.LookupGroup(groups, namespace))
}

// GroupPart is what a PodGroup or a workload adds to its pods' memberships.
type GroupPart struct {
	minMember          int
	created            time.Time
	hardPSAntiAffinity bool
	requiredTopology   string
	// found: the object was read (its pods wait, size unknown, until it is).
	found bool
	// unknown and finished are GroupInfo's; stages its Stages.
	unknown, finished string
	Stages            map[string]Stage
}

// LookupGroup reads the object the pod's gang comes from, if it has one.
func (m Membership) LookupGroup(groups GroupLookup, namespace string) GroupPart {
	if m.Lookup == "" {
		return GroupPart{}
	}
	info, ok := groups(m.Lookup, namespace, m.Owner)
	if !ok {
		return GroupPart{}
	}
	return GroupPart{minMember: info.MinMember, created: info.Created, hardPSAntiAffinity: NamesPSTask(info.Annotations[VolcanoTopologyAntiAffinity]),
		requiredTopology: info.RequiredTopology, found: true, unknown: info.Unknown, finished: info.Finished, Stages: info.Stages}
}

// WithGroupPart completes m from what its object says. A PodGroup's minimum wins over the
// pod's min-member label; the label wins over a workload's size, and over a size that
// cannot be known. A JobSet's later start-up stage is a job of its own:
// "<namespace>/<jobset>.<first replicated job of the stage>".
func (m Membership) WithGroupPart(g GroupPart) Membership {
	m.MinMember, m.Created, m.HardPSAntiAffinity = g.minMember, g.created, g.hardPSAntiAffinity
	m.Finished = g.finished
	if g.requiredTopology != "" && (m.Topology == nil || m.Topology.Required == "") {
		t := priority.TopologyRequest{Required: g.requiredTopology}
		if m.Topology != nil {
			t.Preferred = m.Topology.Preferred
		}
		m.Topology = &t
	}
	if stage, ok := g.Stages[m.Part]; ok {
		m.Group += "." + stage.Suffix
		m.JobKey += "." + stage.Suffix
		m.MinMember = stage.MinMember
	}
	if m.Lookup != "" {
		// A PodGroup or a workload: its pods wait until it is read. A pod seen before its
		// PodGroup (another informer, another watch) would otherwise be a gang of the pods
		// seen so far, and could be bound alone.
		ns, _, _ := strings.Cut(m.JobKey, "/")
		switch {
		case !g.found && HasPodGroup(m.Source):
			m.SizeUnknown = "its PodGroup " + ns + "/" + m.Owner + " is not in the extender's view"
		case !g.found:
			m.SizeUnknown = "its " + m.Lookup + " " + ns + "/" + m.Owner + " is not in the extender's view"
		case g.unknown != "" && !HasPodGroup(m.Source):
			m.SizeUnknown = g.unknown
		}
	}
	if m.LabelMinMember > 0 && (m.MinMember == 0 || !HasPodGroup(m.Source)) {
		m.MinMember, m.SizeUnknown = m.LabelMinMember, ""
	}
	if m.SizeUnknown != "" && m.GuessSize {
		m.MinMember, m.SizeUnknown = 0, ""
	}
	return m
}

// GroupMemo completes memberships from the objects their gangs come from, looking each
// object up once: for one pass over many pods (a recompute). One goroutine uses it.
type GroupMemo struct {
	lookup GroupLookup
	seen   map[string]GroupPart // lookup + namespace/name -> what its object adds
}

// NewGroupMemo looks objects up with lookup.
func NewGroupMemo(lookup GroupLookup) *GroupMemo {
	return &GroupMemo{lookup: lookup, seen: map[string]GroupPart{}}
}

// Part is what the object of the gang of a pod in namespace, of pod-only membership m
// (PodMembership), adds (nothing for a pod without one).
func (g *GroupMemo) Part(m *Membership, namespace string) GroupPart {
	if m.Lookup == "" {
		return GroupPart{}
	}
	key := m.Lookup + "\x00" + namespace + "/" + m.Owner
	part, ok := g.seen[key]
	if !ok {
		part = m.LookupGroup(g.lookup, namespace)
		g.seen[key] = part
	}
	return part
}

// Complete is the whole membership of a pod in namespace of pod-only membership m.
func (g *GroupMemo) Complete(m *Membership, namespace string) Membership {
	return m.WithGroupPart(g.Part(m, namespace))
}
