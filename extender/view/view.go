package view

import (
	"maps"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/nodesel"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/priority"
)

// HoldSource tells the view which binds the gate holds or has just made and which jobs cool
// down, so that those pods count as placed and cooling jobs lose the turn.
type HoldSource interface {
	// Placed maps the UID of every pod whose bind is held, or whose Binding the gate posted a
	// moment ago (the informer may not show it yet), to its node; held of them are held
	// binds. seq counts the gate's changes the map has seen (Cluster.HoldsSeen).
	Placed() (nodes map[types.UID]string, held int, seq uint64)
	// CoolDowns maps job keys to the end of their cool-down.
	CoolDowns() map[string]time.Time
	// Changed is signalled after either changes.
	Changed() <-chan struct{}
}

// Publisher is told of the published snapshots, e.g. to bring back the pods kube-scheduler
// turned away once their job's turn comes.
type Publisher interface {
	// Seed gives the pods turned away before this process started; it is called once,
	// after the first snapshot is published.
	Seed(pods []TurnedAway)
	// Published is called with every snapshot once it is current; it must not block.
	Published(snap *Snapshot)
}

// Preemptor evicts the victims the published snapshots name, and tells the view which jobs
// it may not evict (an eviction was refused) and how many victim jobs it evicted since a time.
type Preemptor interface {
	Protected() map[string]time.Time
	Evicted(since time.Time) int
	// Published is called with every snapshot once it is current; it must not block.
	Published(snap *Snapshot)
}

// TurnedAway is a pending pod of a job that kube-scheduler has turned away.
type TurnedAway struct {
	Pod gang.PodRef
	Job string
}

// Snapshot is one computed admission state: the queue, and the jobs it was computed from.
// It is immutable once published; handlers read it without locks.
type Snapshot struct {
	Queue    *priority.Queue
	Computed time.Time
	jobs     map[string]*priority.Job
	podJob   map[types.UID]string
	nameJob  map[string]string // "namespace/name" -> job key, for binds without a UID
	nodes    []priority.Node   // free capacity, sorted by name
	nodeAt   map[string]int
	topology *priority.NodeIndex // nodes' topology labels, numbered
	hardPS   map[string]bool     // jobs whose PodGroup asks for hard PS anti-affinity
	// turnGated is the pending pods that carry gang.TurnGate, by job key ("" for pods the
	// queue does not count, whose gate nothing holds), and turnGatedJob the same by UID.
	turnGated    map[string][]gang.PodRef
	turnGatedJob map[types.UID]string
	// turnedAway reads the live index: the pending pods of a job that kube-scheduler turned
	// away (PodScheduled False), whichever replica's filter did it.
	turnedAway func(job string) []gang.PodRef
	// warnings are the labels of job pods that the extender ignores where the pods are,
	// one per job and label (see Warnings).
	warnings []PodWarning
	// membership is the index's membership count this snapshot was computed at.
	membership uint64
	// changes is the index's change count this snapshot was computed at.
	changes uint64

	// What the jobs were built from, so that a recompute that only moves the clock (see
	// onlyTimeMoved) admits the same jobs again instead of rebuilding them.
	state   priority.State
	cfg     *viewConfig
	held    map[types.UID]string
	sources uint64
	// holdsSeq is the gate's change count held was read at (HoldSource.Placed).
	holdsSeq uint64
	// leavingUntil is the first moment a pod counted as leaving stops counting (see
	// stuckAfter); zero when none does.
	leavingUntil time.Time
}

// node returns a node's free capacity and labels (an empty node when unknown).
func (s *Snapshot) node(name string) priority.Node {
	if i, ok := s.nodeAt[name]; ok {
		return s.nodes[i]
	}
	return priority.Node{Name: name}
}

// JobOf returns the job key of a pod, by UID or else by namespace/name.
func (s *Snapshot) JobOf(uid types.UID, namespace, name string) (string, bool) {
	if s == nil {
		return "", false
	}
	if uid != "" {
		if k, ok := s.podJob[uid]; ok {
			return k, true
		}
	}
	k, ok := s.nameJob[namespace+"/"+name]
	return k, ok
}

// Job returns a job and its admission decision.
func (s *Snapshot) Job(key string) (*priority.Job, *priority.Decision, bool) {
	if s == nil {
		return nil, nil, false
	}
	j, ok := s.jobs[key]
	if !ok {
		return nil, nil, false
	}
	d, ok := s.Queue.Lookup(key)
	return j, d, ok
}

// TurnGated returns the pending pods that carry gang.TurnGate, by job key; key "" holds the
// pods of no counted job (not in a gang, or in an exempt namespace). The map is shared: do
// not modify it.
func (s *Snapshot) TurnGated() map[string][]gang.PodRef {
	if s == nil {
		return nil
	}
	return s.turnGated
}

// TurnGatedJob reports whether the pod of that UID is pending with gang.TurnGate in s, and
// its job key ("" when the queue does not count it).
func (s *Snapshot) TurnGatedJob(uid types.UID) (string, bool) {
	if s == nil {
		return "", false
	}
	job, ok := s.turnGatedJob[uid]
	return job, ok
}

// TurnedAwayOf lists the pending pods of a job that kube-scheduler has turned away
// (PodScheduled False) as the view knows them now, not as of the snapshot: a leader brings
// them back on their job's turn also when another replica's filter turned them away.
func (s *Snapshot) TurnedAwayOf(job string) []gang.PodRef {
	if s == nil || s.turnedAway == nil {
		return nil
	}
	return s.turnedAway(job)
}

// WithTurnGated returns a copy of s in which the given pods, by job key, carry
// gang.TurnGate, for callers that build snapshots outside the informers (tests, tools).
func (s *Snapshot) WithTurnGated(pods map[string][]gang.PodRef) *Snapshot {
	c := *s
	c.turnGated, c.turnGatedJob = pods, map[types.UID]string{}
	for job, refs := range pods {
		for _, r := range refs {
			c.turnGatedJob[r.UID] = job
		}
	}
	return &c
}

// WithWarnings returns a copy of s with the given Warnings, for callers that build
// snapshots outside the informers (tests, tools).
func (s *Snapshot) WithWarnings(warnings []PodWarning) *Snapshot {
	c := *s
	c.warnings = warnings
	return &c
}

// SnapshotOf is the snapshot of jobs on nodes as model admits them at now, for callers
// that compute a queue outside the informers (tests, tools): it answers the job lookups and
// the queue, with no informer behind it.
func SnapshotOf(jobs []priority.Job, nodes []priority.Node, model priority.Model, now time.Time) *Snapshot {
	snap := &Snapshot{Computed: now, jobs: map[string]*priority.Job{}, podJob: map[types.UID]string{}, nameJob: map[string]string{}}
	for i := range jobs {
		j := &jobs[i]
		snap.jobs[j.Key] = j
		for _, p := range j.Pods {
			snap.podJob[types.UID(p.UID)] = j.Key
			snap.nameJob[p.Name] = j.Key
		}
	}
	snap.Queue = model.Admit(priority.State{Jobs: jobs, Nodes: nodes}, now)
	return snap
}

// recompute rebuilds the admission state from the pod and node records and publishes it.
func (c *Cluster) recompute(now time.Time) {
	start := time.Now()
	cfg := c.config()
	sources, changes := c.sourceChanges.Load(), c.index.changes.Load()
	var held map[types.UID]string
	var heldBinds int
	var holdsSeq uint64
	coolDowns := map[string]time.Time{}
	if c.holds != nil {
		held, heldBinds, holdsSeq = c.holds.Placed()
		coolDowns = c.holds.CoolDowns()
	}
	if prev := c.Snapshot(); !c.full && prev.onlyTimeMoved(cfg, changes, sources, held, now) {
		snap := *prev
		snap.Computed, snap.holdsSeq = now, holdsSeq
		snap.state.CoolDown = coolDowns
		snap.state.Previous = prev.Queue
		c.preemptionState(&snap.state, cfg, now)
		c.admit(&snap, cfg, now, start, heldBinds)
		return
	}
	var moved []types.UID // pods whose held bind changed since the jobs were built
	if c.jobs != nil && !c.full {
		moved = heldMoved(c.jobs.held, held)
	}
	idx, err := c.index.records(cfg, cacheLister{c}, recordsFor{moved: moved, keep: c.keeps(cfg, sources), held: held, all: c.full})
	if err != nil {
		c.log.Error("recomputing the queue", zap.Error(err))
		return
	}
	capacityOf := freeCapacity
	if c.full {
		capacityOf = freeCapacityOfPods // the reference: a pass over every pod record
	}
	nodes, leavingUntil := capacityOf(idx, held, now)
	state := priority.State{Nodes: nodes, CoolDown: coolDowns, Topology: idx.topology}
	if prev := c.Snapshot(); prev != nil {
		state.Previous = prev.Queue
	}
	c.preemptionState(&state, cfg, now)
	snap := &Snapshot{
		turnedAway: c.index.turnedAwayOf,
		Computed:   now,
		nodes:      state.Nodes,
		nodeAt:     idx.nodeAt,
		topology:   idx.topology,
		hardPS:     map[string]bool{},
		membership: idx.membership,
		changes:    idx.changes,
		cfg:        cfg,
		held:       held,
		holdsSeq:   holdsSeq,
		sources:    sources,

		leavingUntil: leavingUntil,
	}
	groups := gang.NewGroupMemo(c.podGroup)
	built, warnings := c.builtGroups(idx, groupInputs{cfg: cfg, groups: groups, held: held, sets: idx.sets}, cacheGen{cfg: cfg, sources: sources, nodeSets: idx.nodeSets})
	// The jobs live in one array, which the snapshot's map points into and Admit reads:
	// copies of the built jobs, so that this snapshot's counts (Leaving) and rules are its
	// own; their pods are shared.
	n := 0
	for _, b := range built {
		n += len(b.jobs)
	}
	state.Jobs = make([]priority.Job, 0, n)
	snap.warnings = warnings
	snap.jobs = make(map[string]*priority.Job, n)
	var ruled []*priority.Job // jobs with a pending pod that has rules
	for _, b := range built {
		at := len(state.Jobs)
		state.Jobs = append(state.Jobs, b.jobs...)
		for k := range b.jobs {
			job := &state.Jobs[at+k]
			snap.jobs[job.Key] = job
			if b.hardPS[k] {
				snap.hardPS[job.Key] = true
			}
		}
		for _, k := range b.ruled {
			ruled = append(ruled, &state.Jobs[at+k])
		}
	}
	// The pod-to-job maps change only when pods come, go or change jobs: after a bind or
	// a status change the previous snapshot's serve again. A PodGroup or workload event
	// may move pods too (a JobSet's stages), so the maps are made anew after one.
	if prev := c.Snapshot(); !c.full && prev != nil && prev.membership == idx.membership && prev.sources == sources && prev.podJob != nil {
		snap.podJob, snap.nameJob = prev.podJob, prev.nameJob
	} else {
		snap.podJob, snap.nameJob = make(map[types.UID]string, idx.count), make(map[string]string, idx.count)
		for _, b := range built {
			for i, pod := range b.pods {
				key := b.jobs[b.podKeys[i]].Key
				snap.podJob[pod.uid] = key
				snap.nameJob[pod.nsName] = key
			}
		}
	}
	if len(ruled) > 0 {
		rulesOf(ruled, idx, held, snap.podJob)
	}
	scan := idx.special // the pods the loop can pick
	if c.full {
		scan = idx.pods
	}
	for _, pod := range scan {
		if pod.turnGated && pod.node == "" && !pod.terminated && !pod.deleting {
			if snap.turnGated == nil {
				snap.turnGated, snap.turnGatedJob = map[string][]gang.PodRef{}, map[types.UID]string{}
			}
			job := ""
			if pod.counted {
				job = snap.podJob[pod.uid]
			}
			ns, name, _ := strings.Cut(pod.nsName, "/")
			snap.turnGated[job] = append(snap.turnGated[job], gang.PodRef{Namespace: ns, Name: name, UID: pod.uid})
			snap.turnGatedJob[pod.uid] = job
		}
		if pod.leaving(now) && pod.inJob && pod.node != "" && !pod.terminated {
			if job := snap.jobs[groups.Complete(new(pod.membership()), pod.namespace).JobKey]; job != nil {
				job.Leaving++
				if until := pod.deleteBy.Add(stuckAfter); snap.leavingUntil.IsZero() || until.Before(snap.leavingUntil) {
					snap.leavingUntil = until // also for a pod on a node the queue does not use
				}
			}
		}
	}
	snap.state = state
	c.admit(snap, cfg, now, start, heldBinds)
}

// preemptionState sets what the preemptor reports in s: the jobs it may not evict and how
// many victims it evicted within the model's window.
func (c *Cluster) preemptionState(s *priority.State, cfg *viewConfig, now time.Time) {
	if c.preemptor == nil {
		return
	}
	s.Protected = c.preemptor.Protected()
	s.Preempted = c.preemptor.Evicted(now.Add(-cfg.model.PreemptionWindow))
}

// onlyTimeMoved says whether a recompute now would build the same jobs and nodes as s:
// nothing the index, the namespaces and PodGroups, the held binds or the config hold has
// changed since, and no pod being deleted has overstayed its grace period. Then only the
// clock (waiting times, starvation) and the cool-downs can change the queue. The periodic recompute mostly finds it so.
func (s *Snapshot) onlyTimeMoved(cfg *viewConfig, changes, sources uint64, held map[types.UID]string, now time.Time) bool {
	return s != nil && s.cfg == cfg && s.changes == changes && s.sources == sources && maps.Equal(s.held, held) &&
		(s.leavingUntil.IsZero() || now.Before(s.leavingUntil))
}

// admit computes snap's queue from its state and publishes it.
func (c *Cluster) admit(snap *Snapshot, cfg *viewConfig, now, start time.Time, held int) {
	snap.Queue = cfg.model.AdmitIn(snap.state, now, &c.admitSpace)
	// The next recompute takes this queue as its Previous; the one before is not kept
	// alive by this snapshot (at 20k jobs its decisions, plans and reasons are ~20 MB).
	snap.state.Previous = nil
	c.publish(snap)
	if c.turns != nil {
		c.turns.Published(snap)
	}
	if c.preemptor != nil {
		c.preemptor.Published(snap)
	}
	c.metrics.ObserveQueue(snap.Queue, held)
	c.metrics.Recomputed(time.Since(start))
	c.waits.Observe(c.metrics, snap.Queue, snap.jobs, cfg.model, c.priorityClassOf, now)
	c.levels.note(c.log, snap.Queue.Levels)
	if ce := c.log.Check(zap.DebugLevel, "queue recomputed"); ce != nil {
		ce.Write(zap.Int("jobs", len(snap.jobs)), zap.Int("queue", snap.Queue.Len()), zap.Duration("took", time.Since(start)))
	}
}

// addMember adds one pod to its job's view; sets gives a pending pod the nodes it may use.
func addMember(job *priority.Job, pod *podRecord, m gang.Membership, held map[types.UID]string, sets map[*nodesel.Constraints]*priority.NodeSet) {
	p := priority.Pod{
		UID: string(pod.uid), Name: pod.nsName, Role: m.Role, Index: m.Index,
		Request: pod.request, Gated: pod.gated, MayNotFit: pod.mayNotFit,
	}
	if pod.node == "" {
		p.Nodes = sets[pod.constraints]
	}
	switch node, isHeld := held[pod.uid]; {
	case pod.node != "":
		p.State, p.Node = priority.PodBound, pod.node
	case isHeld:
		p.State, p.Node = priority.PodHeld, node
	}
	job.Pods = append(job.Pods, p)
	if m.MinMember > job.MinMember {
		job.MinMember = m.MinMember
	}
	if pod.node != "" && pod.scheduledAt.After(job.RunningSince) {
		job.RunningSince = pod.scheduledAt
	}
	if pod.priority != nil && (len(job.Pods) == 1 || *pod.priority > job.Priority) {
		job.Priority = *pod.priority
	}
	if pod.created.After(job.LastCreated) {
		job.LastCreated = pod.created
	}
	// A pod that gives the size (a min-member label) makes it known for the job.
	switch {
	case job.MinMember > 0:
		job.SizeUnknown = ""
	case job.SizeUnknown == "":
		job.SizeUnknown = m.SizeUnknown
	}
	if t := m.Topology; t != nil {
		// Pods of a job that ask for different levels: the smallest name wins, whatever
		// order the pods came in, so that every replica places the job alike.
		job.Topology.Required = smallerNonEmpty(job.Topology.Required, t.Required)
		job.Topology.Preferred = smallerNonEmpty(job.Topology.Preferred, t.Preferred)
	}
	if m.Created.IsZero() && (job.Created.IsZero() || pod.created.Before(job.Created)) {
		job.Created = pod.created
	}
}

// turnedAway lists the pending pods of jobs in the view that kube-scheduler has turned away
// (PodScheduled False): before this process started, it may have parked them.
func (c *Cluster) turnedAway() []TurnedAway {
	idx, err := c.index.records(c.config(), cacheLister{c}, recordsFor{all: true})
	if err != nil {
		return nil
	}
	var out []TurnedAway
	groups := gang.NewGroupMemo(c.podGroup)
	for _, pod := range idx.pods {
		if pod.counted && pod.turnedAway && pod.node == "" {
			ns, name, _ := strings.Cut(pod.nsName, "/")
			out = append(out, TurnedAway{Pod: gang.PodRef{Namespace: ns, Name: name, UID: pod.uid}, Job: groups.Complete(new(pod.membership()), pod.namespace).JobKey})
		}
	}
	return out
}

// PodWarning is a Warning about one pod.
type PodWarning struct {
	Pod gang.PodRef
	Warning
}

// Warnings are the labels of job pods that the extender ignores where the pods are (see
// Admission.Warnings), the first pod of each job and label: the leader sends them as
// Events, since a pod that no node has room for never reaches the filter.
func (s *Snapshot) Warnings() []PodWarning {
	if s == nil {
		return nil
	}
	return s.warnings
}

// appendWarnings appends pod's warnings to out (tenant.Reader.LabelWarnings gives each key
// once).
func appendWarnings(out []PodWarning, pod *podRecord, warnings []Warning) []PodWarning {
	for _, w := range warnings {
		ns, name, _ := strings.Cut(pod.nsName, "/")
		out = append(out, PodWarning{Pod: gang.PodRef{Namespace: ns, Name: name, UID: pod.uid}, Warning: w})
	}
	return out
}

// smallerNonEmpty is the smaller of a and b, an empty one counting as absent.
func smallerNonEmpty(a, b string) string {
	if a == "" || (b != "" && b < a) {
		return b
	}
	return a
}

// freeCapacity is every schedulable node's allocatable minus the requests of the pods
// bound or held there (Free), and minus those of the bound pods in no job, which the queue
// cannot wait out (Capacity), in name order, with the requests of the pods leaving at now
// (Leaving; see stuckAfter) and the first moment one of those stops counting. A node with
// nothing on it shares its record's allocatable map: nobody writes to a published
// snapshot's nodes. The bound pods come summed by the index (idx.nodes), so the cost is
// the nodes, the held binds and the pods being deleted, not every pod.
func freeCapacity(idx indexed, held map[types.UID]string, now time.Time) (nodes []priority.Node, leavingUntil time.Time) {
	out, ownFree, ownCapacity := idx.nodes, idx.ownFree, idx.ownCapacity
	for _, pod := range idx.held {
		i, ok := idx.nodeAt[held[pod.uid]]
		if !ok {
			continue
		}
		subtract(&out[i].Free, &ownFree[i], pod.request)
		if !pod.counted && !pod.deleting {
			subtract(&out[i].Capacity, &ownCapacity[i], pod.request)
		}
	}
	for _, pod := range idx.special {
		if i, ok := idx.placedAt(pod, held); ok && pod.leaving(now) {
			leave(&out[i], pod, &leavingUntil)
		}
	}
	return out, leavingUntil
}

// placedAt is the position of the schedulable node a pod that is not terminated is bound
// to or held for.
func (idx indexed) placedAt(pod *podRecord, held map[types.UID]string) (int, bool) {
	if pod.terminated {
		return 0, false
	}
	node := pod.node
	if node == "" {
		node = held[pod.uid]
	}
	i, ok := idx.nodeAt[node]
	return i, ok && node != ""
}

// leave counts a pod leaving a node, on its way out: room a preemption may count on until
// *until (the first such moment of all).
func leave(n *priority.Node, pod *podRecord, until *time.Time) {
	add(&n.Leaving, pod.request)
	if end := pod.deleteBy.Add(stuckAfter); until.IsZero() || end.Before(*until) {
		*until = end
	}
}

// freeCapacityOfPods is freeCapacity from a pass over every pod record (idx.pods): the
// reference the full view computes with.
func freeCapacityOfPods(idx indexed, held map[types.UID]string, now time.Time) (nodes []priority.Node, leavingUntil time.Time) {
	out := make([]priority.Node, len(idx.schedulable))
	for i, n := range idx.schedulable {
		out[i] = priority.Node{Name: idx.names[i], Free: n.allocatable, Capacity: n.allocatable, Labels: n.labels}
	}
	ownFree, ownCapacity := make([]bool, len(out)), make([]bool, len(out))
	for _, pod := range idx.pods {
		i, ok := idx.placedAt(pod, held)
		if !ok {
			continue
		}
		subtract(&out[i].Free, &ownFree[i], pod.request)
		if pod.leaving(now) {
			leave(&out[i], pod, &leavingUntil)
		}
		// A pod being deleted is on its way out; a job's pods end with their job.
		if !pod.counted && !pod.deleting {
			subtract(&out[i].Capacity, &ownCapacity[i], pod.request)
		}
	}
	return out, leavingUntil
}

// add adds one pod's request, and its pod slot, to *r (allocated on first use).
func add(r *priority.Resources, request priority.Resources) {
	if *r == nil {
		*r = priority.Resources{}
	}
	for k, v := range request {
		(*r)[k] += v
	}
	(*r)["pods"]++
}

// subtract takes one pod's request, and its pod slot, out of *free, copying the map first
// unless *owned says it is this node's own already.
func subtract(free *priority.Resources, owned *bool, request priority.Resources) {
	if !*owned {
		*free, *owned = maps.Clone(*free), true
	}
	for k, v := range request {
		(*free)[k] -= v
	}
	if _, ok := (*free)["pods"]; ok {
		(*free)["pods"]--
	}
}
