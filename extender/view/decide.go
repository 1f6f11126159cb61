package view

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/nodesel"
	"github.com/cps-extender/cps-extender/extender/tenant"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/cps-extender/cps-extender/priority"
)

// Admission is whether a pod may be placed now.
type Admission struct {
	OK bool
	// Reason says why not: the sentence the filter answers for every node. For a job in
	// the queue it is the decision's Wait, which reads the same until the wait changes.
	Reason string
	// Explain is the decision's whole Reason, with the job's place in the queue and its
	// P, for the Event on the pod ("" when there is none).
	Explain string
	// Queued is true when the pod's job is in the admission queue and waits for its turn
	// (false when the view has not seen the job yet).
	Queued bool
	// Unschedulable is true when the pod's job cannot fit even with no other job's pods on
	// the nodes: no turn can come until the nodes or the pods in no job change.
	Unschedulable bool
	// Job is the pod's job key ("" for a pod in no job).
	Job string
	// Retry is true when the view has not seen the pod's job yet: the filter answers with
	// an error, which kube-scheduler retries after its backoff, instead of turning the pod
	// away (which parks it until a cluster event). Every other wait ends with the job's
	// turn, which Turns brings to the pod.
	Retry bool
	// Gathering is true when the job waits only for the rest of its gang, whose first pod
	// was created less than GatherWindow ago: its pods are most likely being created right
	// now, and the filter may wait a moment for them (see scheduler.AwaitView) rather than
	// turn the pod away, which costs it a trip through kube-scheduler's queues.
	Gathering bool
	// Warnings are what the pod's user most likely did not mean: a workload controller's
	// label on a pod in no job (it is placed on its own), a label the extender ignores.
	Warnings []Warning
	// Changes is how many changes the snapshot the answer comes from reflects, and Latest
	// how many the view had received when the answer was made: a waiting pod decided on a
	// snapshot with Changes < Latest may be waiting for room an event just freed (see
	// scheduler.AwaitView).
	Changes, Latest uint64
}

// The reasons of the Warnings on pods (Admission.Warnings).
const (
	// ReasonNotInGang: the pod carries a workload controller's label but is in no gang.
	ReasonNotInGang = "NotInGang"
	// ReasonLabelIgnored: the pod carries a label the extender does not honour there.
	ReasonLabelIgnored = tenant.ReasonLabelIgnored
)

// Warning is a Warning Event for a pod, sent once per Key (a job, mostly) an hour.
type Warning = tenant.Warning

// GatherWindow is how long after a job's first pod was created its gang counts as still
// being created (Admission.Gathering). Creation times have whole seconds, so a job created
// a moment ago can look up to a second older.
const GatherWindow = 2 * time.Second

// Decisions are the per-pod answers of one snapshot and configuration: a request asks all
// its questions of one Decisions, so that its answer never mixes two snapshots. The node
// lookups fall back to the informer cache for nodes newer than the snapshot. One goroutine
// at a time asks a Decisions (it keeps the pod it last read).
type Decisions struct {
	c    *Cluster
	snap *Snapshot
	cfg  *viewConfig
	// read is the pod whose labels were read last, and what they say (membership), so that
	// the filter's Admit and NodeCheck read a pod once.
	read struct {
		pod   *corev1.Pod
		m     gang.Membership
		inJob bool
	}
}

// membership is which job pod belongs to (gang.MembershipOf), read once per pod.
func (d *Decisions) membership(pod *corev1.Pod) (gang.Membership, bool) {
	if d.read.pod != pod {
		d.read.m, d.read.inJob = gang.MembershipOf(d.cfg.gang, pod, d.c.podGroup)
		d.read.pod = pod
	}
	return d.read.m, d.read.inJob
}

// Decisions returns the answers of the current snapshot.
func (c *Cluster) Decisions() *Decisions {
	return &Decisions{c: c, snap: c.Snapshot(), cfg: c.config()}
}

// NodeName looks a node name up by its bytes: the view's own string for it and true when
// the view knows the node (the snapshot's schedulable nodes answer from one packed table
// without allocating; the informer cache answers unschedulable nodes and nodes newer than
// the snapshot), else a copy of the bytes and false. The name never aliases b.
func (d *Decisions) NodeName(b []byte) (string, bool) {
	if d.snap != nil {
		if i, ok := d.snap.nodeAt[string(b)]; ok {
			return d.snap.nodes[i].Name, true
		}
	}
	name := string(b)
	if n, ok := d.c.Node(name); ok {
		return n.Name, true
	}
	return name, false
}

// Admit says whether a pod may be placed now. Pods in no job, in exempt namespaces, and of
// admitted or running jobs may; a pod of a waiting job may not, and the reason says why (the
// sentence users see in the pod's FailedScheduling event). A job pod the view has not seen
// yet waits too: its job's turn is not known.
func (ds *Decisions) Admit(pod *corev1.Pod) Admission {
	cfg := ds.cfg
	if cfg.gang.Exempt(pod.Namespace) {
		return Admission{OK: true}
	}
	m, inJob := ds.membership(pod)
	if !inJob {
		var warnings []Warning
		if label := gang.WorkloadLabel(pod); label != "" {
			warnings = append(warnings, Warning{Reason: ReasonNotInGang, Key: pod.Namespace + "/" + label + "=" + pod.Labels[label],
				Message: fmt.Sprintf("pod carries %s=%s but is in no gang the extender knows (its gang source is switched off, or the workload's labels are incomplete): it is placed on its own, not with the rest of its job", label, pod.Labels[label])})
		}
		return Admission{OK: true, Warnings: warnings}
	}
	warnings := ds.c.tenants.LabelWarnings(cfg.gang, pod.Namespace, pod.Spec.PriorityClassName, m, nil)
	snap := ds.snap
	job, d, ok := snap.Job(m.JobKey)
	if !ok {
		return Admission{Reason: fmt.Sprintf("job %s is not in the extender's view yet; it is retried shortly", m.JobKey), Job: m.JobKey, Retry: true, Warnings: warnings}
	}
	if d.Phase != priority.PhaseAdmitted && d.Phase != priority.PhaseRunning { // waiting, preempting, unschedulable
		_, seen := snap.JobOf(pod.UID, pod.Namespace, pod.Name)
		return Admission{Reason: d.Wait, Explain: d.Reason, Job: m.JobKey, Queued: true,
			Unschedulable: d.Phase == priority.PhaseUnschedulable, Retry: !seen,
			Gathering: d.Pods < d.MinMember && snap.Computed.Sub(job.Created) < GatherWindow,
			Changes:   snap.changes, Latest: ds.c.index.changes.Load(), Warnings: warnings}
	}
	return Admission{OK: true, Job: m.JobKey, Warnings: warnings}
}

// jobMember finds the pod's job in the snapshot and the pod as the model sees it; it reads
// the pod's labels only for a pod the snapshot does not hold.
func (d *Decisions) jobMember(pod *corev1.Pod) (*priority.Job, priority.Pod, bool) {
	snap := d.snap
	key, ok := snap.JobOf(pod.UID, pod.Namespace, pod.Name)
	if !ok {
		m, inJob := d.membership(pod)
		if !inJob {
			return nil, priority.Pod{}, false
		}
		key = m.JobKey
	}
	job, _, ok := snap.Job(key)
	if !ok {
		return nil, priority.Pod{}, false
	}
	member := gang.MemberOf(job, gang.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID})
	if member.UID == "" {
		m, _ := d.membership(pod)
		member = priority.Pod{UID: string(pod.UID), Name: pod.Namespace + "/" + pod.Name, Role: m.Role, Index: m.Index, Request: gang.PodRequest(pod)}
	}
	return job, member, true
}

// NodeCheck returns the per-node hard constraint of a pod, or nil when none applies: hard
// PS anti-affinity when the config says hard, or when the job's Volcano PodGroup names its
// PS task in volcano.sh/task-topology-anti-affinity. The job is looked up once per request,
// not once per node.
func (d *Decisions) NodeCheck(pod *corev1.Pod) func(node string) (bool, string) {
	aff := d.cfg.affinity
	snap := d.snap
	job, member, ok := d.jobMember(pod)
	if !ok || member.Role != priority.RolePS {
		return nil
	}
	if aff.PSAntiAffinity != priority.AntiAffinityHard && !snap.hardPS[job.Key] {
		return nil
	}
	aff.PSAntiAffinity = priority.AntiAffinityHard
	return func(node string) (bool, string) { return aff.PSConflict(member, job, node) }
}

// Score ranks the candidate nodes by PS-worker affinity, 0..10 each, into out's array when
// it is large enough. Pods in no job get the same score on every node, which never changes
// the scheduler's choice.
func (d *Decisions) Score(pod *corev1.Pod, names []string, out extenderv1.HostPriorityList) extenderv1.HostPriorityList {
	out = slices.Grow(out[:0], len(names))[:len(names)]
	for i, n := range names {
		out[i] = extenderv1.HostPriority{Host: n, Score: extenderv1.MinExtenderPriority}
	}
	snap := d.snap
	job, member, ok := d.jobMember(pod)
	if !ok {
		return out
	}
	var plan map[string]string
	if _, d, ok := snap.Job(job.Key); ok {
		plan = d.Plan
	}
	// Prepared once per request, so that each of thousands of nodes costs a lookup or two.
	scorer := d.cfg.affinity.NewScorer(member, job, plan, d.c.NodeLabels)
	if !scorer.On(snap.topology) { // the topology was reloaded after the snapshot
		for i, name := range names {
			n := snap.node(name)
			out[i].Score = scorer.Score(&n)
		}
		return out
	}
	for i, name := range names {
		if at, ok := snap.nodeAt[name]; ok {
			out[i].Score = scorer.ScoreAt(at, &snap.nodes[at])
			continue
		}
		n := priority.Node{Name: name}
		out[i].Score = scorer.Score(&n)
	}
	return out
}

// Unclaimed tells, for a pod in no job, whether it fits on a node in room that no job of
// the queue counts on (priority.Queue.Unclaimed): not planned for an admitted gang, not
// reserved, not kept for one whose pods arrive. A node the snapshot does not hold reports
// true. The pod's request is read once.
func (d *Decisions) Unclaimed(pod *corev1.Pod) func(node string) bool {
	snap := d.snap
	if snap == nil {
		return func(string) bool { return true }
	}
	request := gang.PodRequest(pod)
	return func(node string) bool {
		at, ok := snap.nodeAt[node]
		return !ok || snap.Queue.Unclaimed(at, request)
	}
}

// Planned is the node the admission plan of the pod's job puts the pod on ("" when none).
func (d *Decisions) Planned(pod *corev1.Pod) string {
	key, ok := d.snap.JobOf(pod.UID, pod.Namespace, pod.Name)
	if !ok {
		return ""
	}
	if _, dec, ok := d.snap.Job(key); ok {
		return dec.Plan[string(pod.UID)]
	}
	return ""
}

func (c *Cluster) affinity() priority.Affinity { return c.config().affinity }

// JobOfPod classifies a pod named in a bind request: from the snapshot, else from the
// informer cache, else (a pod newer than the cache) from the API server.
func (c *Cluster) JobOfPod(ctx context.Context, ref gang.PodRef) (string, bool, error) {
	snap := c.Snapshot()
	if key, ok := snap.JobOf(ref.UID, ref.Namespace, ref.Name); ok {
		return key, true, nil
	}
	pod, err := c.pods.Pods(ref.Namespace).Get(ref.Name)
	if err != nil && c.client != nil {
		pod, err = c.client.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("pod %s no longer exists", ref)
	}
	if err != nil {
		return "", false, fmt.Errorf("looking up pod %s: %w", ref, err)
	}
	gangCfg := c.config().gang
	if gangCfg.Exempt(pod.Namespace) {
		return "", false, nil
	}
	m, inJob := gang.MembershipOf(gangCfg, pod, c.podGroup)
	return m.JobKey, inJob, nil
}

// BindCheck says whether the extender may bind a pod to node, defense in depth against a
// caller that is not the scheduler it serves: the pod must be one of a scheduler in the
// config's schedulerNames (empty: any), still unbound, and node one it may use (its node selector,
// required node affinity and tolerations against the node's NoSchedule and NoExecute
// taints, a node that is not Ready or cordoned counting as tainted), as kube-scheduler's filters would
// have checked. The pod is read from the informer cache, else from the API server.
func (c *Cluster) BindCheck(ctx context.Context, ref gang.PodRef, node string) error {
	schedulerNames := c.config().schedulerNames
	pod, err := c.pods.Pods(ref.Namespace).Get(ref.Name)
	if err != nil && c.client != nil {
		pod, err = c.client.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s no longer exists", ref)
	}
	if err != nil {
		return fmt.Errorf("looking up pod %s: %w", ref, err)
	}
	if ref.UID != "" && pod.UID != ref.UID {
		return fmt.Errorf("pod %s is not the pod of UID %s (it was made anew)", ref, ref.UID)
	}
	if len(schedulerNames) > 0 && !slices.Contains(schedulerNames, pod.Spec.SchedulerName) {
		return fmt.Errorf("pod %s is of scheduler %q, not one this extender binds for (%s)", ref, pod.Spec.SchedulerName, strings.Join(schedulerNames, ", "))
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node {
		return fmt.Errorf("pod %s is bound to %s already", ref, pod.Spec.NodeName)
	}
	n, ok := c.Node(node)
	if !ok {
		return fmt.Errorf("node %s is not in the extender's view", node)
	}
	if ok, why := nodesel.Allows(pod, n); !ok {
		return fmt.Errorf("pod %s may not run on node %s: %s", ref, node, why)
	}
	return nil
}

// BindCheck is Cluster.BindCheck.
func (d *Decisions) BindCheck(ctx context.Context, ref gang.PodRef, node string) error {
	return d.c.BindCheck(ctx, ref, node)
}

// MayPreempt says whether a pod may have the scheduler preempt for it: not while its job
// waits for its turn (the gate would turn it away anyway, after the victims were gone).
func (d *Decisions) MayPreempt(pod *corev1.Pod) bool {
	return d.Admit(pod).OK
}

// MayEvict says whether a pod may be a preemption victim: not when it belongs to a gang,
// since evicting one member can leave the whole job below its minimum.
func (d *Decisions) MayEvict(victim gang.PodRef) bool {
	_, inJob := d.snap.JobOf(victim.UID, victim.Namespace, victim.Name)
	return !inJob
}
