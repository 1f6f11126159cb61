package volcano

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"

	corev1 "k8s.io/api/core/v1"

	"github.com/cps-extender/cps-extender/priority"
)

// This file turns what Volcano sends into the model's plain values (priority.Job, Pod, Node,
// Resources) and holds the pure decisions of the Volcano verbs. Nothing here does I/O or
// reads a clock.

// --- conversions -------------------------------------------------------------------------

// volcanoAmount converts one of Volcano's float quantities to an integer, clamping
// negative, NaN and out-of-range values so that no input can overflow.
func volcanoAmount(v float64) int64 {
	switch {
	case !(v > 0): // also NaN
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(math.Round(v))
}

// volcanoResources converts a Volcano resource to the model's: "cpu" in millicores,
// "memory" in bytes, scalar resources in Volcano's milli-units. Volcano's "pods" count is
// not a request and is left out. A nil resource is empty.
func volcanoResources(r *Resource) priority.Resources {
	out := priority.Resources{}
	if r == nil {
		return out
	}
	if v := volcanoAmount(r.MilliCPU); v > 0 {
		out[string(corev1.ResourceCPU)] = v
	}
	if v := volcanoAmount(r.Memory); v > 0 {
		out[string(corev1.ResourceMemory)] = v
	}
	for name, q := range r.ScalarResources {
		if v := volcanoAmount(q); v > 0 && name != string(corev1.ResourcePods) {
			out[name] = v
		}
	}
	return out
}

// resourceListToVolcano converts a Kubernetes resource list (a PodGroup's minResources) to
// the units of volcanoResources: cpu in millicores, memory in bytes, other resources in
// milli-units (Volcano keeps scalar resources as MilliValue). "pods" is left out.
func resourceListToVolcano(list corev1.ResourceList) priority.Resources {
	out := priority.Resources{}
	for name, q := range list {
		var v int64
		switch name {
		case corev1.ResourcePods:
			continue
		case corev1.ResourceMemory:
			v = q.Value()
		default: // cpu and scalar resources
			v = q.MilliValue()
		}
		if v > 0 {
			out[string(name)] = v
		}
	}
	return out
}

// addResources adds b to a, saturating instead of overflowing.
func addResources(a, b priority.Resources) {
	for k, v := range b {
		if v > 0 && a[k] > math.MaxInt64-v {
			a[k] = math.MaxInt64
			continue
		}
		a[k] += v
	}
}

// podMeta returns the labels and annotations of a task's pod (nil maps without a pod).
func podMeta(t *TaskInfo) (labels, annotations map[string]string) {
	if t == nil || t.Pod == nil {
		return nil, nil
	}
	return t.Pod.Labels, t.Pod.Annotations
}

// volcanoRole reads a task's role: TaskRole (Volcano v1.12 and later), else the pod's
// volcano.sh/task-spec annotation or label, else the Kubeflow replica type, else the
// project's own role label.
func volcanoRole(g config.GangConfig, t *TaskInfo) priority.Role {
	labels, annotations := podMeta(t)
	return gang.ParseRole(gang.FirstNonEmpty(t.TaskRole, annotations[gang.VolcanoTaskSpec], labels[gang.VolcanoTaskSpec],
		labels[gang.KubeflowReplicaType], labels[g.RoleLabel]))
}

// volcanoPod converts a task to a member of its job. ok is false for a task that neither
// waits for a node nor holds one (releasing, succeeded, failed, unknown). A task in a placed
// status (allocated, pipelined, binding, bound, running) with a node is bound there; any
// other task is pending. onNode names the node when the task came from a node's task list
// without a NodeName of its own.
func volcanoPod(g config.GangConfig, t *TaskInfo, onNode string) (priority.Pod, bool) {
	if t == nil || t.Status&^(TaskPending|volcanoTaskPlaced) != 0 {
		return priority.Pod{}, false
	}
	labels, annotations := podMeta(t)
	p := priority.Pod{
		UID:     t.UID,
		Name:    t.Name,
		Role:    volcanoRole(g, t),
		Index:   gang.ParseIndex(gang.FirstNonEmpty(annotations[gang.VolcanoTaskIndex], labels[gang.VolcanoTaskIndex], labels[gang.KubeflowReplicaIndex], labels[g.IndexLabel])),
		Request: volcanoResources(t.Resreq),
	}
	if p.Name == "" && t.Pod != nil {
		p.Name = t.Pod.Name
	}
	if p.UID == "" && t.Pod != nil {
		p.UID = string(t.Pod.UID)
	}
	node := gang.FirstNonEmpty(t.NodeName, onNode)
	if t.Status&volcanoTaskPlaced != 0 && node != "" {
		p.State, p.Node = priority.PodBound, node
	}
	return p, true
}

// volcanoJobKey names a job "namespace/name", or by its UID when either is missing.
func volcanoJobKey(j *JobInfo) string {
	if j.Namespace != "" && j.Name != "" {
		return j.Namespace + "/" + j.Name
	}
	return j.UID
}

// sortedTasks returns a job's tasks ordered by UID, so that every "first of" is stable.
func sortedTasks(tasks map[string]*TaskInfo) []*TaskInfo {
	keys := make([]string, 0, len(tasks))
	for k, t := range tasks {
		if t != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]*TaskInfo, len(keys))
	for i, k := range keys {
		out[i] = tasks[k]
	}
	return out
}

// volcanoJobHeader fills a job's identity and the inputs of its combined priority:
//   - user: the PodGroup's gang.UserLabel label, else the first pod's (by UID), else the namespace;
//   - job priority: JobInfo.Priority (the PodGroup's PriorityClass value);
//   - urgent: the PodGroup's or a pod's PriorityClass in gang.urgentPriorityClasses, or
//     gang.UrgentLabel "true" on the PodGroup or a pod (label or annotation) in a namespace of
//     gang.urgentLabelNamespaces (the Volcano verbs read no namespace labels);
//   - waiting since: JobInfo.CreationTimestamp, else the PodGroup's creation;
//   - gang size: the largest of MinAvailable, the number of tasks, the sum of TaskMinAvailable
//     and 1 (a Volcano Job's pods do not exist yet when it asks to be enqueued).
//
// MinMember is set to that gang size and Pods is left empty: the job is only ordered, never
// fitted, so nothing else of it matters.
func volcanoJobHeader(g config.GangConfig, j *JobInfo, tasks []*TaskInfo) priority.Job {
	job := priority.Job{Key: volcanoJobKey(j), Priority: j.Priority, Created: j.CreationTimestamp.Time}
	var pgLabels, pgAnnotations map[string]string
	if pg := j.PodGroup; pg != nil {
		pgLabels, pgAnnotations = pg.Metadata.Labels, pg.Metadata.Annotations
		if job.Created.IsZero() {
			job.Created = pg.Metadata.CreationTimestamp.Time
		}
	}
	job.User = pgLabels[g.UserLabel]
	pgClass := ""
	if j.PodGroup != nil {
		pgClass = j.PodGroup.Spec.PriorityClassName
	}
	volcanoUrgency(g, &job, j.Namespace, pgClass, pgLabels, pgAnnotations)
	for _, t := range tasks {
		labels, annotations := podMeta(t)
		if job.User == "" {
			job.User = labels[g.UserLabel]
		}
		volcanoUrgency(g, &job, j.Namespace, podClass(t), labels, annotations)
	}
	if job.User == "" {
		job.User = j.Namespace
	}
	var perTask int64
	for _, n := range j.TaskMinAvailable {
		perTask += int64(max(n, 0))
	}
	size := max(int64(j.MinAvailable), int64(len(tasks)), perTask, 1)
	job.MinMember = int(min(size, math.MaxInt32))
	return job
}

// volcanoTaskJob is the job of a task Volcano sent without its JobInfo (no session
// snapshot, or a job the snapshot does not hold): the task alone, a gang of one, with the
// user from its pod's label (else its namespace), the task's priority and the pod's creation.
func volcanoTaskJob(g config.GangConfig, t *TaskInfo) priority.Job {
	labels, annotations := podMeta(t)
	ns := t.Namespace
	if ns == "" && t.Pod != nil {
		ns = t.Pod.Namespace
	}
	job := priority.Job{
		Key:       volcanoTaskJobKey(t, ns),
		User:      gang.FirstNonEmpty(labels[g.UserLabel], ns),
		Priority:  t.Priority,
		MinMember: 1,
	}
	volcanoUrgency(g, &job, ns, podClass(t), labels, annotations)
	if t.Pod != nil {
		job.Created = t.Pod.CreationTimestamp.Time
		if job.Priority == 0 && t.Pod.Spec.Priority != nil {
			job.Priority = *t.Pod.Spec.Priority
		}
	}
	return job
}

// volcanoTaskJobKey names a task's job "namespace/name" from its JobID.
func volcanoTaskJobKey(t *TaskInfo, ns string) string {
	switch {
	case strings.Contains(t.Job, "/"):
		return t.Job
	case t.Job != "":
		return ns + "/" + t.Job
	}
	return ns + "/" + t.Name
}

// volcanoNode converts a node for the affinity score: its idle resources as free capacity and
// the Kubernetes node's labels.
func volcanoNode(n *NodeHead) priority.Node {
	out := priority.Node{Name: n.Name, Free: volcanoResources(n.Idle)}
	if n.Node != nil {
		out.Labels = n.Node.Labels
		if out.Name == "" {
			out.Name = n.Node.Name
		}
	}
	return out
}

// usableNode reports whether a session node counts toward the cluster's idle capacity: it is
// not NotReady in Volcano's eyes and not cordoned.
func usableNode(n *NodeHead) bool {
	return n != nil && n.State.Phase != NodeNotReady && (n.Node == nil || !n.Node.Spec.Unschedulable)
}

// --- jobEnqueueable ----------------------------------------------------------------------

// volcanoDemand is what a job needs to start: its PodGroup's spec.minResources when set
// (what Volcano itself reserves for an Inqueue job), else the requests of its first
// MinAvailable tasks in intra-job order (PS first; all of them when MinAvailable is 0), else
// nothing (the size of the job is unknown, so it is not held back for it).
func volcanoDemand(g config.GangConfig, j *JobInfo, tasks []*TaskInfo) priority.Resources {
	if pg := j.PodGroup; pg != nil && len(pg.Spec.MinResources) > 0 {
		return resourceListToVolcano(pg.Spec.MinResources)
	}
	pods := make([]priority.Pod, 0, len(tasks))
	for _, t := range tasks {
		if p, ok := volcanoPod(g, t, ""); ok {
			pods = append(pods, p)
		}
	}
	priority.SortPods(pods)
	if n := int(j.MinAvailable); n > 0 && n < len(pods) {
		pods = pods[:n]
	}
	out := priority.Resources{}
	for i := range pods {
		addResources(out, pods[i].Request)
	}
	return out
}

// volcanoReserved is what an Inqueue job will still take: its demand less what it has
// allocated (JobInfo.Allocated, else the requests of its placed tasks), never negative.
func volcanoReserved(g config.GangConfig, j *JobInfo, tasks []*TaskInfo) priority.Resources {
	demand := volcanoDemand(g, j, tasks)
	var allocated priority.Resources
	if j.Allocated != nil {
		allocated = volcanoResources(j.Allocated)
	} else {
		allocated = priority.Resources{}
		for _, t := range tasks {
			if t.Status&volcanoTaskPlaced != 0 {
				addResources(allocated, volcanoResources(t.Resreq))
			}
		}
	}
	for k, v := range demand {
		demand[k] = max(v-allocated[k], 0)
	}
	return demand
}

// enqueueCandidate is one pending job the enqueue plan orders.
type enqueueCandidate struct {
	uid    string
	job    priority.Job
	demand priority.Resources
}

// enqueuePlan is the model's enqueue plan of a session's pending jobs, found by job UID.
type enqueuePlan struct {
	*priority.EnqueuePlan
	byUID map[string]*priority.EnqueueJob
}

// volcanoCapacity sums the usable nodes' idle and allocatable resources and lists the
// resources they report (cpu and memory whenever there is a usable node).
func volcanoCapacity(nodes []*NodeHead) (idle, capacity priority.Resources, compared []string) {
	idle, capacity = priority.Resources{}, priority.Resources{}
	seen := map[string]bool{}
	for _, n := range nodes {
		if !usableNode(n) {
			continue
		}
		seen[string(corev1.ResourceCPU)], seen[string(corev1.ResourceMemory)] = true, true
		i, a := volcanoResources(n.Idle), volcanoResources(n.Allocatable)
		addResources(idle, i)
		addResources(capacity, a)
		for k := range i {
			seen[k] = true
		}
		for k := range a {
			seen[k] = true
		}
	}
	for k := range seen {
		compared = append(compared, k)
	}
	slices.Sort(compared)
	return idle, capacity, compared
}

// newEnqueuePlan is the enqueue plan of a session (priority.Model.PlanEnqueue): the
// capacity and the compared resources are the usable nodes', free is their Idle less
// reserved (what Inqueue jobs will still take), and a job key seen twice is named by UID.
func newEnqueuePlan(model priority.Model, now time.Time, pending []enqueueCandidate, reserved priority.Resources, nodes []*NodeHead) *enqueuePlan {
	free, capacity, compared := volcanoCapacity(nodes)
	for k, v := range reserved {
		free[k] -= v
	}
	candidates := make([]priority.EnqueueCandidate, 0, len(pending))
	uidOf := make(map[string]string, len(pending))
	for i := range pending {
		c := &pending[i]
		if _, dup := uidOf[c.job.Key]; dup { // keys must be unique; a repeat is named by UID
			c.job.Key += " (" + c.uid + ")"
		}
		uidOf[c.job.Key] = c.uid
		candidates = append(candidates, priority.EnqueueCandidate{Job: c.job, Demand: c.demand})
	}
	plan := &enqueuePlan{EnqueuePlan: model.PlanEnqueue(candidates, free, capacity, compared, now),
		byUID: make(map[string]*priority.EnqueueJob, len(pending))}
	for _, j := range plan.Order {
		plan.byUID[uidOf[j.Key]] = j
	}
	return plan
}

// decide is the jobEnqueueable vote for a planned job:
//
//	permit (1) when need <= free for every compared resource, that is, when the idle resources
//	           are enough for the job and for every job ahead of it that is still pending (when
//	           all pending jobs together fit, resources are not short and every job is permitted);
//	reject (-1) otherwise, and always for a job too big for the whole cluster.
//
// The reason states the position, P and the resource that is short.
func (p *enqueuePlan) decide(pj *priority.EnqueueJob) (int, string) {
	var b strings.Builder
	b.WriteString("job ")
	b.WriteString(pj.Key)
	if pj.TooBig != "" {
		b.WriteString(" may not enqueue: it needs ")
		b.WriteString(volcanoQuantity(pj.TooBig, pj.Demand[pj.TooBig]))
		b.WriteString(" ")
		b.WriteString(pj.TooBig)
		b.WriteString(", more than the ")
		b.WriteString(volcanoQuantity(pj.TooBig, p.Capacity[pj.TooBig]))
		b.WriteString(" all usable nodes have")
		return Reject, b.String()
	}
	ok, short := p.MayEnqueue(pj)
	if ok {
		b.WriteString(" may enqueue: ")
	} else {
		b.WriteString(" may not enqueue yet: ")
	}
	b.WriteString(priority.Ordinal(pj.Position))
	b.WriteString(" of ")
	b.WriteString(strconv.Itoa(len(p.Order)))
	b.WriteString(" pending (P=")
	b.WriteString(strconv.FormatFloat(pj.P, 'f', 2, 64))
	for _, term := range []struct {
		name string
		v    float64
	}{{": user ", pj.Terms.User}, {", job ", pj.Terms.Job}, {", wait ", pj.Terms.Wait}, {", parallelism ", pj.Terms.Parallelism}} {
		b.WriteString(term.name)
		b.WriteString(strconv.FormatFloat(term.v, 'f', 2, 64))
	}
	b.WriteString(")")
	if pj.Ahead != "" {
		b.WriteString(", behind ")
		b.WriteString(pj.Ahead)
		b.WriteString(" (P=")
		b.WriteString(strconv.FormatFloat(pj.AheadP, 'f', 2, 64))
		b.WriteString(")")
	}
	if len(p.Compared) == 0 {
		b.WriteString("; no node capacity to compare with")
		return Permit, b.String()
	}
	if ok {
		b.WriteString("; with the jobs ahead it needs")
		n := 0
		for _, r := range p.Compared {
			if pj.Need[r] <= 0 {
				continue
			}
			if n > 0 {
				b.WriteString(",")
			}
			n++
			b.WriteString(" ")
			b.WriteString(r)
			b.WriteString(" ")
			b.WriteString(volcanoQuantity(r, pj.Need[r]))
			b.WriteString(" of ")
			b.WriteString(volcanoQuantity(r, p.Free[r]))
		}
		if n == 0 {
			b.WriteString(" nothing")
		}
		b.WriteString(" free")
		return Permit, b.String()
	}
	b.WriteString("; short of ")
	b.WriteString(short)
	b.WriteString(": ")
	b.WriteString(volcanoQuantity(short, pj.Need[short]))
	b.WriteString(" needed with the jobs ahead, ")
	b.WriteString(volcanoQuantity(short, max(p.Free[short], 0)))
	b.WriteString(" free")
	return Reject, b.String()
}

// volcanoQuantity writes an amount in volcanoResources units the way users read it: cpu in
// millicores, memory with the largest exact binary suffix, other resources in whole units
// when they are whole, else in milli-units.
func volcanoQuantity(resource string, v int64) string {
	switch resource {
	case string(corev1.ResourceCPU):
		return strconv.FormatInt(v, 10) + "m"
	case string(corev1.ResourceMemory):
		for _, s := range []struct {
			suffix string
			shift  uint
		}{{"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
			if v != 0 && v%(1<<s.shift) == 0 {
				return strconv.FormatInt(v>>s.shift, 10) + s.suffix
			}
		}
		return strconv.FormatInt(v, 10)
	}
	if v%1000 == 0 {
		return strconv.FormatInt(v/1000, 10)
	}
	return strconv.FormatInt(v, 10) + "m"
}

// --- jobReady ----------------------------------------------------------------------------

// volcanoJobReady reports whether a job has its minimum placed: the tasks in an allocated,
// pipelined, binding, bound or running status number at least MinAvailable. It also returns
// that count. A nil job is ready (nothing to wait for).
func volcanoJobReady(j *JobInfo) (bool, int) {
	if j == nil {
		return true, 0
	}
	placed := 0
	for _, t := range j.Tasks {
		if t != nil && t.Status&volcanoTaskPlaced != 0 {
			placed++
		}
	}
	return placed >= int(j.MinAvailable), placed
}

// volcanoUrgency makes job urgent, saying why, when an object of it (its PodGroup or a pod)
// is: its PriorityClass is listed, or its urgent label counts in namespace.
func volcanoUrgency(g config.GangConfig, job *priority.Job, namespace, class string, labels, annotations map[string]string) {
	if job.Urgent {
		return
	}
	labelled := gang.IsTrue(labels[g.UrgentLabel]) || gang.IsTrue(annotations[g.UrgentLabel])
	if from, _ := g.UrgencyOf(namespace, class, labelled, false); from != "" {
		job.Urgent, job.UrgentFrom = true, from
	}
}

// podClass is the PriorityClass of a task's pod ("" without a pod).
func podClass(t *TaskInfo) string {
	if t.Pod == nil {
		return ""
	}
	return t.Pod.Spec.PriorityClassName
}
