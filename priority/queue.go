package priority

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Queue is the admission queue computed by Admit: every job's decision, the jobs that may
// take a turn in queue order.
type Queue struct {
	// Order holds the jobs that are neither running nor unschedulable, in queue order
	// (Position 1, 2, ...).
	Order []*Decision
	// Running holds the running jobs, by key.
	Running []*Decision
	// Unschedulable holds the jobs that cannot be placed even on the nodes' Capacity, in
	// the order they would have had in Order. They take no turn and hold nothing back.
	Unschedulable []*Decision
	// Levels are the configured topology levels as the nodes carry them (State.Topology;
	// nil without one): a level on no node takes no part in the placement.
	Levels []TopologyLevel

	byKey map[string]queueEntry
	// unclaimed is what is left of each node (in State.Nodes order, dims per node) once every
	// admitted plan, reservation and kept room is taken: room no job counts on.
	unclaimed []int64
	dims      []string
}

// Unclaimed reports whether a pod asking request fits in what is left of node (its index in
// State.Nodes) once every admitted plan, reservation and room kept for an arriving gang is
// taken: room that no job of the queue counts on. Resources that no job asks for are not
// counted (no plan takes them). An index out of range, or a nil queue, reports true.
func (q *Queue) Unclaimed(node int, request Resources) bool {
	if q == nil || len(q.dims) == 0 || node < 0 || (node+1)*len(q.dims) > len(q.unclaimed) {
		return true
	}
	r := len(q.dims)
	left := q.unclaimed[node*r : (node+1)*r]
	for d := 0; d < r-1; d++ {
		if left[d] < request[q.dims[d]] {
			return false
		}
	}
	return left[r-1] >= 1 // "pods", always the last dimension
}

// queueEntry is a job's decision and, when admitted, its plan in the walk's terms (see
// keptNodes): what the next Admit reads of it.
type queueEntry struct {
	d       *Decision
	planned []keptPod
}

// Lookup returns the decision for a job key, running or not.
func (q *Queue) Lookup(key string) (*Decision, bool) {
	e := q.entry(key)
	return e.d, e.d != nil
}

// entry is Lookup's entry (zero when the key is not there).
func (q *Queue) entry(key string) queueEntry {
	if q == nil {
		return queueEntry{}
	}
	return q.byKey[key]
}

// Contended reports whether a job of the queue waits with its whole gang there, for room or
// for its turn (a job still short of pods waits for itself, and an unschedulable job holds
// nothing back). Only then is a new pod likely to wait.
func (q *Queue) Contended() bool {
	if q == nil {
		return false
	}
	for _, d := range q.Order {
		if d.Phase != PhaseAdmitted && d.Pods >= d.MinMember && !d.SizeUnknown {
			return true
		}
	}
	return false
}

// Len is the number of jobs in the queue: neither running nor unschedulable.
func (q *Queue) Len() int {
	if q == nil {
		return 0
	}
	return len(q.Order)
}

// The walk classes, in walk order.
const (
	classRepair    = iota // 0 < bound < min: finish a partial gang first
	classGathering        // held > 0: the gate is gathering its binds; keep its turn
	classTurn             // had the turn in the previous queue, within Model.TurnHold
	classUrgent           // urgent (Job.Urgent): a class above every job that is not
	classStarved          // waited past the starvation bound
	classNormal
)

// why a job waits, for its Reason.
type waitKind int

const (
	waitNone          waitKind = iota
	waitIneligible             // may not take the turn (incomplete, gated, cooling down)
	waitNoFit                  // tried and did not fit
	waitReserving              // did not fit and holds the reservation (reserve)
	waitStrictBehind           // behind a job that does not fit (strict)
	waitBesideReserve          // does not fit in what the reservation leaves (reserve)
	waitNeverFits              // does not fit even on the nodes' Capacity: unschedulable
	waitPreempting             // waits while the running jobs evicted for it leave
	waitCannotGather           // gathering at bind, and what it still needs does not fit
	waitYieldTo                // gathering at bind; gives its held room to a gathering job ahead
	waitArriving               // short of pods that are arriving; keeps the room its gang needs
)

// jobView is Admit's working record of one job.
type jobView struct {
	job *Job
	d   *Decision
	// runningP is RunningP of a running job, once a preemption asked for it (hasRunningP).
	runningP    float64
	hasRunningP bool
	class       int
	wait        time.Duration
	eligible    bool
	toFit       []*Pod // pending pods that must fit, in intra-job order
	plan        []plannedPod
	demands     []demand
	psNodes     []string // nodes of the job's bound and held PS
	// required and preferred are the placement levels of the job's TopologyRequest;
	// badTopology says why a request names no level of the topology.
	required, preferred int
	badTopology         string
	// patient: the job waits for one domain of its required level, which it set for the
	// time being, instead of spreading (Model.SpreadAfter); asked is the level it asked for.
	// reserved is what its reservation took, to be given back if its wait turns out idle
	// (see spreadIdle), and fitBlocker why it did not fit, for a job that waited beside
	// its reservation.
	patient    bool
	asked      int
	reserved   []taken
	fitBlocker string
	// preemptNote says why a job that may preempt does not: "; it may not preempt: ...".
	preemptNote string
	// prev is the job's decision in State.Previous (nil: none), looked up once, and
	// prevPlanned its plan in that walk's terms; planned is this walk's (see keptNodes).
	prev                 *Decision
	prevPlanned, planned []keptPod
	// turn is the job's Turn from State.Previous, when it keeps it (hasTurn); keptPlan:
	// place kept that turn's plan whole, so the plan map is the previous one.
	turn              Turn
	hasTurn, keptPlan bool
	// samePlanned: keepPlan took the plan from prevPlanned as it was (see keptNodes).
	samePlanned bool
	// reservedIn is the domain the job reserved in State.Previous (level name and domain
	// name; empty when it reserved none, or over the whole cluster): it keeps it while that
	// domain can hold it (see reserveDomain).
	reservedIn [2]string
	// placed is the job's bound and held pods and placedDemands what they take; the
	// check for a job that can never fit counts them where they are.
	placed        []*Pod
	placedDemands []demand
	// never says, for a job that can never fit, how far it gets (see neverFits).
	never string
	// need is what the job's pods to fit ask for in all (see capacity.total): a job that
	// does not fit says so in words that do not depend on which pod failed where.
	need     string
	kind     waitKind
	blocking *jobView // the strict head, the reserving job, or the gathering job this one yields to
	// yieldTo is the gathering job ahead that this gathering job gives its held room to
	// (see gatherInHeldRoom); it is not placed when walked.
	yieldTo *jobView
	// hasRules: some pod of the job keeps one of its required Rules; it is placed by
	// placeRuled. prefers: a job without them has preferred ones (see preferPlan).
	hasRules, prefers bool
	// arriving: the job is short of pods and its newest was created within
	// Model.ArrivalWindow; toFit then stands for its whole gang (see arrivingPods).
	arriving bool
	// mayNotFit: some pod of the job uses what the fit does not count (Pod.MayNotFit).
	mayNotFit bool
}

// Admit computes the admission queue at now. Jobs with at least their minimum bound are
// running. The others are walked in queue order: repair jobs (0 < bound < min) first, then
// jobs whose binds are gathering (held > 0), then jobs keeping their turn, then urgent
// jobs, then starved jobs (waited > StarvationBound, oldest first), then by combined
// priority P, highest first; ties go to the older job, then to the smaller key. A job may
// take the turn only when its gang is complete, no pending pod is gated and it is not
// cooling down; the others wait without blocking, but an urgent job, or the first of the
// walk, whose pods are still arriving (Model.ArrivalWindow) keeps the room its whole gang
// needs.
// A job's pending pods up to its minimum (PS first) are fitted into the nodes' free
// capacity, less what jobs ahead took; when they fit the job is admitted, and when not,
// the policy decides: strict stops every job behind it, reserve lets the first such job
// keep what fits and lets later jobs use only the rest, besteffort goes on, backfill goes
// on until a job has waited ReserveAfter and then reserves for the first such job. The result
// does not depend on the order of jobs, pods or nodes in s; s is not changed.
func (m Model) Admit(s State, now time.Time) *Queue {
	return m.AdmitIn(s, now, nil)
}

// Workspace holds Admit's scratch space for the next call to reuse, so that recomputing
// the queue after every event does not allocate and clear it anew. The zero value is ready
// to use; a Workspace must not serve two calls at once. Nothing a call returns refers to it.
type Workspace struct {
	views   []jobView
	queue   []*jobView
	pending []*Pod
	fitPods []*Pod
	order   []queueKey
	slots   []int32
	// sentence is the buffer the reasons are written in.
	sentence sentence
	plans    []plannedPod
	demands  demandScratch
	// free is the table of free capacity, reach the one of the nodes' Capacity.
	free, reach capacityArrays
}

// grown returns buf with length n, reusing its array when it is large enough. The
// elements are left as they were: the caller writes each before reading it.
func grown[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// AdmitIn is Admit with its scratch space taken from w (nil: a fresh one). The result is
// the same as Admit's.
//
// A job that does not fit the free capacity is fitted once more, on the nodes' Capacity
// (what they would offer with no other job's pods on them), with its own bound and held
// pods where they are. When it does not fit there either it is Unschedulable: waiting for
// its turn would hold other jobs back for room that cannot come. It takes nothing, does
// not reserve and does not stop a strict queue, and it is listed in Unschedulable, not in
// Order.
func (m Model) AdmitIn(s State, now time.Time, w *Workspace) *Queue {
	if w == nil {
		w = &Workspace{}
	}
	// Drop the pointers into this state when done, so the workspace does not keep it alive.
	defer w.release()
	decisions := make([]Decision, len(s.Jobs))
	w.views = grown(w.views, len(s.Jobs))
	views := w.views
	clear(views)
	q := &Queue{byKey: make(map[string]queueEntry, len(s.Jobs))}
	queue := w.queue[:0]
	fitPods := w.fitPods[:0]
	total := 0
	for i := range s.Jobs {
		total += len(s.Jobs[i].Pods)
	}
	pendingBuf := w.pending[:0] // one backing array for every job's pending pods
	if cap(pendingBuf) < total {
		pendingBuf = make([]*Pod, 0, total)
	}
	var placedPods []*Pod  // the bound and held pods of jobs in the queue
	var running []*jobView // the running jobs: preemption's candidate victims
	for i := range s.Jobs {
		v := &views[i]
		v.job, v.d = &s.Jobs[i], &decisions[i]
		v.hasRules = v.job.HasRules()
		v.prefers = !v.hasRules && v.job.HasPreferences()
		prev := s.Previous.entry(v.job.Key)
		v.prev, v.prevPlanned = prev.d, prev.planned
		if t, ok := turnOf(v.prev); ok && m.TurnHold > 0 && now.Sub(t.Since) < m.TurnHold {
			v.turn, v.hasTurn = t, true
		}
		v.reservedIn = reservationOf(v.prev)
		if m.viewJob(v, s.CoolDown, now, &pendingBuf) {
			running = append(running, v)
			continue
		}
		queue = append(queue, v)
		fitPods = append(fitPods, v.toFit...)
		placedPods = append(placedPods, v.placed...)
	}

	w.queue, w.fitPods, w.pending = queue, fitPods, pendingBuf
	var dims dimSet
	demands := dims.demands(append(fitPods, placedPods...), &w.demands)
	fitDemands := demands[:len(fitPods)]
	// One backing array each for every job's demands and plan.
	w.plans = grown(w.plans, len(fitPods))
	plans := w.plans
	placedDemands := demands[len(fitPods):]
	for _, v := range queue {
		n := len(v.toFit)
		v.demands, demands = demands[:n], demands[n:]
		v.plan, plans = plans[:0:n], plans[n:]
		v.placedDemands, placedDemands = placedDemands[:len(v.placed)], placedDemands[len(v.placed):]
	}
	var lay *layout
	if s.Topology != nil {
		if lay = s.Topology.lay; !lay.matches(s.Nodes) {
			lay = newLayout(s.Nodes, s.Topology.topology, nil)
		}
	}
	top := lay.levels() + 1
	for _, v := range queue {
		v.levels(lay, top)
	}
	if lay != nil {
		q.Levels = slices.Clone(lay.carried)
	}
	c := newCapacity(s.Nodes, &dims, &w.free, lay)
	c.wantedBy(fitDemands)
	var reach *capacity // the nodes' Capacity, built when a job first does not fit
	var sameGang map[string]reachFit
	var key []byte
	reachTable := func() *capacity {
		if reach == nil {
			reach = c.sibling(s.Nodes, w.free.order, &dims, &w.reach, fromCapacity)
			reach.wanted = c.wanted
			sameGang = map[string]reachFit{}
		}
		return reach
	}
	// reachOf is tryReach on the nodes' Capacity: once for all the jobs with nothing placed
	// and the same levels, PSApart, roles and demand shapes, in order (the table is the
	// same for each).
	reachOf := func(v *jobView) reachFit {
		reachTable()
		if len(v.placed) > 0 {
			return tryReach(reach, v)
		}
		key = gangKey(key[:0], v)
		f, seen := sameGang[string(key)]
		if !seen {
			f = tryReach(reach, v)
			sameGang[string(key)] = f
		}
		return f
	}
	neverFits := func(v *jobView) bool {
		reachTable()
		if v.hasRules {
			v.never = ruleNever(reach, v, reachRuled(reach, v))
			return v.never != ""
		}
		v.never = neverText(reach, v, reachOf(v))
		return v.never != ""
	}

	sortQueue(queue, w)
	runningByKey := slices.Clone(running)
	slices.SortFunc(runningByKey, func(a, b *jobView) int { return strings.Compare(a.job.Key, b.job.Key) })
	for _, v := range runningByKey {
		q.Running = append(q.Running, v.d)
	}

	policy := m.Policy
	if !ValidPolicy(policy) {
		policy = DefaultPolicy
	}
	var strictHead, reserving *jobView
	// failed: a job walked so far did not fit (the one after it is no head that preempts);
	// preempting: a job preempts in this queue already (one at a time: the next may count
	// on the room its victims leave once they are gone).
	var failed, preempting bool
	tryPreempt := func(v *jobView, blocker string) bool {
		c.rollback()
		p, why := m.preempt(c, v, running, &dims, &s, now, m.MaxPreemptions-s.Preempted)
		if p == nil {
			if why != "" && len(running) > 0 {
				v.preemptNote = "; it may not preempt: " + why
			}
			return false
		}
		d := v.d
		c.begin()
		reserveFor(c, v, p.plan)
		c.commit()
		d.Phase, v.kind = PhasePreempting, waitPreempting
		d.Placement = summarize(c, v.placed, p.plan)
		for _, r := range p.victims {
			d.Victims = append(d.Victims, Victim{Key: r.job.Key, P: m.RunningP(r.job, now), Pods: r.d.Bound,
				RunMinutes: max(now.Sub(r.job.RunningSince).Minutes(), 0)})
		}
		d.Blocker = preemptBlocker(d.Victims)
		v.need = blocker
		return true
	}
	for i, v := range queue {
		d := v.d
		d.Phase = PhaseWaiting
		switch {
		case v.arriving && (v.job.Urgent || i == 0):
			// Short of pods that are on their way: nothing behind it takes the room its
			// whole gang needs, as if it were complete, but it takes no turn yet.
			v.kind = waitArriving
			c.begin()
			switch blocker := place(c, v, nil); {
			case blocker == "":
				c.commit()
				d.Arriving = true
			case neverFits(v):
				c.rollback() // its pods' own filter answers say so once they are all there
			case policy == PolicyStrict:
				c.rollback()
				d.Arriving, strictHead, failed = true, v, true
			case reserving == nil && m.reserves(policy, v):
				c.rollback()
				c.begin()
				reserve(c, reach, v)
				c.commit()
				v.plan = v.plan[:0]
				d.Arriving, reserving, failed = true, v, true
			default:
				c.rollback()
			}
			if d.Arriving {
				d.Blocker += "; the room its gang needs is kept while they arrive"
			}
		case v.yieldTo != nil:
			// Its held room went to a gathering job ahead, which could not gather without it.
			v.kind, v.blocking, d.YieldHeld = waitYieldTo, v.yieldTo, true
			d.Blocker = "it gives the room of its " + heldBinds(d.Held) + " to " + v.yieldTo.job.Key + ", which goes first and cannot gather without it"
		case !v.eligible:
			v.kind = waitIneligible
		case v.badTopology != "":
			v.kind, d.Phase = waitNeverFits, PhaseUnschedulable
			v.never = v.badTopology
			d.Blocker = "never fits: " + v.never
		case strictHead != nil && neverFits(v):
			// Not tried, since it is behind the head; but it should not read as if its
			// turn could come.
			v.kind, d.Phase = waitNeverFits, PhaseUnschedulable
			d.Blocker = "never fits: " + v.never
		case strictHead != nil:
			v.kind, v.blocking = waitStrictBehind, strictHead
			d.Blocker = "strict order: behind " + strictHead.job.Key
			if v.class == classGathering {
				// Its gang cannot gather while the head waits: its held binds go back.
				d.YieldHeld = true
				d.Blocker += "; " + heldGivenBack(d.Held)
			}
		default:
			c.begin()
			var patience func(v *jobView, span int) int
			if v.class > classGathering { // a gang with pods placed is not moved to one domain
				patience = func(v *jobView, span int) int { return m.patience(reachOf, v, span) }
			}
			blocker := place(c, v, patience)
			if blocker != "" && v.class == classGathering && gatherInHeldRoom(c, v, queue[i+1:]) {
				blocker = ""
			}
			switch {
			case blocker == "":
				c.commit()
				d.Phase = PhaseAdmitted
				d.TurnSince = now
				if v.hasTurn {
					d.TurnSince = v.turn.Since
				}
				d.Plan, v.planned = planOf(v, c), plannedOf(v, c)
				d.Placement = summarize(c, v.placed, v.plan)
			case neverFits(v):
				c.rollback()
				v.kind, d.Phase = waitNeverFits, PhaseUnschedulable
				d.Blocker = "never fits: " + v.never
				if v.class == classGathering {
					giveHeld(c, v)
					d.YieldHeld = true
				}
			// A job waiting for one rack by choice (spreadAfter) fits spread: it evicts
			// nobody for its preference.
			case !preempting && !v.patient && m.mayPreempt(v, !failed) && tryPreempt(v, blocker):
				preempting, failed = true, true
				if policy == PolicyStrict {
					strictHead = v
				} else if reserving == nil {
					reserving = v
				}
			case v.class == classGathering:
				// Its gang cannot gather: rather than keep its held binds, and their room,
				// until the gate's hold timeout, it gives them back now and waits as any job
				// that does not fit (from the next queue on, when it may reserve).
				c.rollback()
				giveHeld(c, v)
				v.kind, d.YieldHeld = waitCannotGather, true
				d.Blocker = "its gang cannot gather: " + blocker + "; " + heldGivenBack(d.Held)
				failed = true
				if policy == PolicyStrict {
					strictHead = v
				}
			case reserving == nil && m.reserves(policy, v):
				c.rollback()
				c.begin()
				d.Placement = reserve(c, reach, v)
				if v.patient {
					v.reserved = c.taken(v.reserved[:0])
				}
				c.commit()
				v.plan = v.plan[:0]
				v.kind, reserving = waitReserving, v
				d.Blocker = blocker + v.preemptNote
				failed = true
			default:
				c.rollback()
				v.kind = waitNoFit
				d.Blocker = blocker + v.preemptNote
				failed = true
				if policy == PolicyStrict {
					strictHead = v
				} else if reserving != nil {
					v.kind, v.blocking, v.fitBlocker = waitBesideReserve, reserving, blocker
					d.Blocker = "does not fit beside the reservation of " + reserving.job.Key + ": " + blocker
				}
			}
		}
	}
	spreadIdle(c, queue, now)
	q.unclaimed, q.dims = c.leftover(), slices.Clone(c.names)

	q.Order = make([]*Decision, 0, len(queue))
	var ahead *jobView
	for _, v := range queue {
		d := v.d
		if d.Phase == PhaseUnschedulable {
			q.Unschedulable = append(q.Unschedulable, d)
			continue
		}
		q.Order = append(q.Order, d)
		d.Position = len(q.Order)
		if ahead != nil && d.Phase != PhaseAdmitted {
			d.Ahead, d.AheadP = ahead.job.Key, ahead.d.P
		}
		ahead = v
	}
	for i := range decisions {
		d := &decisions[i]
		d.QueueLen = len(q.Order)
		if d.Phase == PhaseRunning {
			d.Reason = runningReason(d)
		} else {
			v := &views[i]
			var prevReason, prevWait string
			if v.prev != nil {
				prevReason, prevWait = v.prev.Reason, v.prev.Wait
			}
			note := ""
			if v.mayNotFit {
				note = mayNotFit(v.job)
			}
			d.Reason, d.Wait = m.queuedReason(&w.sentence, v, note, prevReason), waitSentence(&w.sentence, v, note, prevWait)
		}
	}
	// Keys are unique by contract; should one repeat, Lookup finds the first in queue
	// order, then the first running, which does not depend on the input order.
	add := func(v *jobView) {
		if _, dup := q.byKey[v.job.Key]; !dup {
			q.byKey[v.job.Key] = queueEntry{d: v.d, planned: v.planned}
		}
	}
	for _, v := range queue {
		if v.d.Phase != PhaseUnschedulable {
			add(v)
		}
	}
	for _, v := range runningByKey {
		add(v)
	}
	for _, v := range queue {
		if v.d.Phase == PhaseUnschedulable {
			add(v)
		}
	}
	return q
}

// release clears the workspace's references into the last state and result.
func (w *Workspace) release() {
	clear(w.views)
	clear(w.queue[:cap(w.queue)])
	clear(w.pending[:cap(w.pending)])
	clear(w.fitPods[:cap(w.fitPods)])
	clear(w.plans)
	clear(w.demands.out)
	clear(w.free.nodes)
	clear(w.reach.nodes)
}

// viewJob fills a job's counts, terms and eligibility, and reports whether it is running.
// Its pending pods are appended to buf.
func (m Model) viewJob(v *jobView, coolDown map[string]time.Time, now time.Time, buf *[]*Pod) bool {
	j, d := v.job, v.d
	d.Key, d.Pods, d.MinMember = j.Key, len(j.Pods), j.MinMembers()
	d.User, d.UserFrom = j.User, j.UserFrom
	d.Urgent, d.UrgentFrom = j.Urgent, j.UrgentFrom
	d.Terms = m.Terms(j, now)
	d.P = m.Combined(d.Terms)
	start := len(*buf)
	gated := 0
	for k := range j.Pods {
		p := &j.Pods[k]
		v.mayNotFit = v.mayNotFit || len(p.MayNotFit) > 0
		switch p.State {
		case PodBound:
			d.Bound++
		case PodHeld:
			d.Held++
		default: // PodPending, and any state the model does not know: it still needs a node
			*buf = append(*buf, p)
			if p.Gated {
				gated++
			}
			continue
		}
		if p.Role == RolePS && p.Node != "" {
			v.psNodes = append(v.psNodes, p.Node)
		}
	}
	if d.Bound >= d.MinMember || j.Finished != "" {
		d.Phase, d.Finished = PhaseRunning, j.Finished
		return true
	}
	if placed := d.Bound + d.Held; placed > 0 {
		v.placed = make([]*Pod, 0, placed)
		for k := range j.Pods {
			if p := &j.Pods[k]; p.State == PodBound || p.State == PodHeld {
				v.placed = append(v.placed, p)
			}
		}
	}

	v.wait = j.Waited(now)
	d.Starved = m.StarvationBound > 0 && v.wait > m.StarvationBound
	d.Repair = d.Bound > 0
	switch {
	case d.Repair:
		v.class = classRepair
	case d.Held > 0:
		v.class = classGathering
	case v.hasTurn:
		v.class = classTurn
	case j.Urgent:
		v.class = classUrgent
	case d.Starved:
		v.class = classStarved
	default:
		v.class = classNormal
	}

	if until, ok := coolDown[j.Key]; ok && until.After(now) {
		d.Blocker = "cooling down until " + until.UTC().Format(time.RFC3339) + " after a hold timeout"
		d.CoolingDown = true
		return false
	}
	if j.SizeUnknown != "" {
		d.Blocker, d.SizeUnknown = "gang size unknown: "+j.SizeUnknown, true
		return false
	}
	if d.Pods < d.MinMember {
		d.Blocker = "gang incomplete: " + strconv.Itoa(d.Pods) + " of " + strconv.Itoa(d.MinMember) + " pods exist"
		if gated == 0 && m.ArrivalWindow > 0 && !j.LastCreated.IsZero() && now.Sub(j.LastCreated) < m.ArrivalWindow {
			v.arriving = true
			v.toFit = arrivingPods(j, (*buf)[start:])
		}
		return false
	}
	if gated > 0 {
		d.Blocker = "scheduling gated: " + strconv.Itoa(gated) + " pending " + plural(gated, "pod has", "pods have") + " scheduling gates"
		return false
	}
	v.eligible = true
	pending := (*buf)[start:]
	slices.SortFunc(pending, comparePods)
	// Only the pods up to the minimum must fit; elastic pods beyond it may come later.
	v.toFit = pending[:max(0, min(len(pending), d.MinMember-d.Bound-d.Held))]
	return false
}

// arrivingPods stands for the pods job j still needs up to its minimum, while its pods
// arrive: its pending pods in intra-job order, then one worker for each pod not created
// yet, asking what the last of its pods in intra-job order asks (most often a worker: the
// pods still to come are most likely workers too) and allowed on the same nodes.
func arrivingPods(j *Job, pending []*Pod) []*Pod {
	var last *Pod
	for k := range j.Pods {
		if p := &j.Pods[k]; last == nil || comparePods(p, last) > 0 {
			last = p
		}
	}
	missing := j.MinMembers() - len(j.Pods)
	if last == nil || missing <= 0 {
		return nil
	}
	out := make([]*Pod, 0, len(pending)+missing)
	out = append(out, pending...)
	slices.SortFunc(out, comparePods)
	more := make([]Pod, missing)
	for k := range more {
		p := &more[k]
		*p = *last
		p.UID, p.Name = j.Key+"\x00arriving-"+strconv.Itoa(k), "a pod of "+j.Key+" not created yet"
		p.Role, p.Index, p.State, p.Node, p.Gated = RoleWorker, -1, PodPending, "", false
		out = append(out, p)
	}
	return out
}

// reachFit is how far a job's required pods get on the nodes' Capacity: how many fit, and
// the first that does not (-1 when all do).
type reachFit struct {
	placed, first int
	// domain: every pod fits, but not inside one domain of the job's required level.
	domain bool
}

// tryReach fits a job's required pods into r, the table of the nodes' Capacity, with the
// job's own bound and held pods taken where they are, and takes everything back out: by
// the topology-aware placement, and when that fails without a required level, by plain
// first fit, which tells how many fit.
func tryReach(r *capacity, v *jobView) reachFit {
	r.begin()
	defer r.rollback()
	takePlaced(r, v)
	m := r.mark()
	g := &r.placer
	g.reset(r, v, v.required, v.preferred)
	if g.run() {
		return reachFit{placed: len(v.toFit), first: -1}
	}
	r.rollbackTo(m)
	out := flatPlace(r, v, nil, true)
	if out.first < 0 && v.required < r.lay.levels()+1 {
		out.domain = true // every pod fits, but not inside one domain of the required level
		out.first = 0
	}
	return out
}

// takePlaced takes the room of v's bound and held pods from r, where they are.
func takePlaced(r *capacity, v *jobView) {
	for i, p := range v.placed {
		if at := r.nodeIndex(p.Node); at >= 0 {
			r.take(at, v.placedDemands[i].needs)
		}
	}
}

// flatPlace places a job's required pods by plain first fit (Fit's rules: PS apart,
// workers on a PS's node, else the first node that fits), appending them to plan when it
// is not nil, and says how far it got. With all it goes on past a pod that does not fit.
func flatPlace(c *capacity, v *jobView, plan *[]plannedPod, all bool) reachFit {
	ps := c.psScratch[:0]
	for _, name := range v.psNodes {
		if at := c.nodeIndex(name); at >= 0 {
			ps = insertSorted(ps, at)
		}
	}
	out := reachFit{first: -1}
	for i, p := range v.toFit {
		if at := c.placeOne(p.Role, v.demands[i], &ps, v.job.PSApart); at >= 0 {
			out.placed++
			if plan != nil {
				*plan = append(*plan, plannedPod{uid: p.UID, node: at, role: p.Role})
			}
			continue
		}
		if out.first < 0 {
			out.first = i
		}
		if !all {
			break
		}
	}
	c.psScratch = ps[:0]
	return out
}

// neverText says how far a job that can never fit gets ("" when it fits): no nodes at all,
// the first pod that fits no node by itself, or how many of its pods fit.
func neverText(r *capacity, v *jobView, f reachFit) string {
	switch {
	case f.first < 0:
		return ""
	case len(r.nodes) == 0:
		return "there are no nodes"
	case f.domain:
		return "no one " + r.lay.levelName(v.required) + " domain can hold its " + strconv.Itoa(len(v.toFit)) + " pods even with no other job's pods on the nodes"
	}
	if d := v.demands[f.first]; !r.anyUsable(d) {
		return r.shortage(podLabel(v.toFit[f.first], namespaceOf(v.job.Key)), d) + " even with no other job's pods on the nodes"
	}
	fit := "only " + strconv.Itoa(f.placed) + " of the " + strconv.Itoa(len(v.toFit)) + " pods it needs fit" + deviceShortage(r, v)
	if set := v.demands[f.first].set; set != nil {
		return fit + " on " + set.Why + " even with no other job's pods on them"
	}
	return fit + " even with no other job's pods on the nodes"
}

// deviceShortage names the first DRA device class (DeviceClassPrefix) a job's pods need more
// of in all than every node has together: " (they need 10 gpu.example.com devices; the
// nodes have 8)"; "" when there is none.
func deviceShortage(r *capacity, v *jobView) string {
	for dim, name := range r.names {
		if !strings.HasPrefix(name, DeviceClassPrefix) {
			continue
		}
		var need, have int64
		for _, d := range v.demands {
			for _, n := range d.needs {
				if n.dim == dim {
					need += n.amount
				}
			}
		}
		if need == 0 {
			continue
		}
		for i := range r.nodes {
			have += max(r.tree[(r.size+i)*r.r+dim], 0)
		}
		if need > have {
			return " (they need " + amount(name, need) + "; the nodes have " + strconv.FormatInt(have, 10) + ")"
		}
	}
	return ""
}

// namespaceOf is the namespace part of a job key ("" when the key has none).
func namespaceOf(key string) string {
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return ""
	}
	return ns
}

// place fits a job's required pods into c and returns "" or what keeps them out, and sets
// v.plan and v.need. It places them by topology (placement.go); what that cannot place,
// plain first fit may still, unless the job requires one domain of some level. c must be
// in a trial: a job that does not fit leaves what it took for the caller to take back.
//
// patience, when not nil, is asked about a plan that spreads the job over several domains
// of the nearest topology level (span: the level of the smallest domain holding it all): a
// level above 0 at which the job should rather wait for one domain, or 0.
func place(c *capacity, v *jobView, patience func(v *jobView, span int) int) string {
	v.plan, v.keptPlan = v.plan[:0], false
	start := c.mark()
	if v.hasRules {
		return placeWithRules(c, v, start)
	}
	if v.hasTurn && keepPlan(c, v) {
		v.keptPlan = true
		return ""
	}
	c.rollbackTo(start)
	// A gang like one that did not fit on the same free amounts does not fit either, and
	// fails on the same pod: the placement reads nothing else (a waiting backlog of jobs
	// alike tried each one, ~13 us a job; memo).
	memo := start == (mark{}) && len(v.placed) == 0 && len(v.psNodes) == 0
	if memo {
		c.failKey = gangKey(c.failKey[:0], v) // kept for the store below: nothing between writes it
		if f, ok := c.failed[string(c.failKey)]; ok && f.version == c.version && !failMemoOff.Load() {
			failMemoHits.Add(1)
			v.plan = v.plan[:0]
			v.need = c.total(v.demands)
			if f.first < 0 {
				return f.tail
			}
			return podLabel(v.toFit[f.first], namespaceOf(v.job.Key)) + f.tail
		}
	}
	g := &c.placer
	g.reset(c, v, v.required, v.preferred)
	fits := eachHasRoom(c, v) && g.run()
	if fits {
		v.plan = append(v.plan, g.plan...)
	} else {
		c.rollbackTo(start)
		fits = flatPlace(c, v, &v.plan, false).first < 0 && v.required > c.lay.levels()
	}
	if fits {
		span := spanLevel(c, v.placed, v.plan)
		l := 0
		if span > 1 && patience != nil {
			l = patience(v, span)
		}
		if l == 0 {
			if v.prefers {
				preferPlan(c, v)
			}
			return ""
		}
		c.rollbackTo(start)
		v.asked = v.required
		v.plan, v.required, v.patient = v.plan[:0], l, true
		v.need = c.total(v.demands)
		return "it waits for one " + c.lay.levelName(l) + " domain with room for its " + strconv.Itoa(len(v.toFit)) + " pods together, rather than spread over several"
	}
	c.rollbackTo(start)
	v.plan = v.plan[:0]
	f := flatPlace(c, v, &v.plan, false)
	required := v.required < c.lay.levels()+1
	if f.first < 0 && !required {
		return ""
	}
	v.plan = v.plan[:0]
	v.need = c.total(v.demands)
	who, why := "", ""
	if f.first < 0 {
		why = "no one " + c.lay.levelName(v.required) + " domain has room for its " + strconv.Itoa(len(v.toFit)) + " pods together"
	} else {
		// Said on the amounts first fit left, the job's earlier pods taken.
		who = podLabel(v.toFit[f.first], namespaceOf(v.job.Key))
		why = c.shortage(who, v.demands[f.first])
	}
	if memo {
		if c.failed == nil {
			c.failed = map[string]failedFit{}
		}
		c.failed[string(c.failKey)] = failedFit{version: c.version, first: f.first, tail: why[len(who):]}
	}
	return why
}

// failMemoOff turns the failed-fit memo of place off, and failMemoHits counts the gangs it
// answered: for TestFailedFitMemoMatchesPlacement.
var (
	failMemoOff  atomic.Bool
	failMemoHits atomic.Int64
)

// failedFit is how a gang did not fit: at which capacity version, the first of its pods
// that plain first fit could not place (-1: each could, but no one domain of its required
// level holds them all), and what the reason says after that pod's name.
type failedFit struct {
	version uint64
	first   int
	tail    string
}

// gangKey appends to buf what a gang's placement reads of a job with nothing placed: its
// levels, PSApart, and its pods to fit, role and shape (needs and node set), in order.
func gangKey(buf []byte, v *jobView) []byte {
	buf = binary.AppendUvarint(buf, uint64(v.required))
	buf = binary.AppendUvarint(buf, uint64(v.preferred))
	buf = append(buf, boolByte(v.job.PSApart))
	for i, p := range v.toFit {
		buf = append(buf, byte(p.Role))
		buf = binary.AppendUvarint(buf, uint64(v.demands[i].shape))
	}
	return buf
}

// eachHasRoom reports whether each of v's pods to fit has, alone, a node it may use with
// room for it. When one has none, no placement places the job, and the gang placer need
// not look (TestEachHasRoomIsNecessary): for jobs that can never fit (a PS larger than
// every node) it walked every node for the pods that do fit, 2.8 s a recompute for 10k
// such jobs on 5000 nodes (BenchmarkRecomputeWaitingBacklog, nodecpu=1); now 51 ms.
func eachHasRoom(c *capacity, v *jobView) bool {
	for _, d := range v.demands {
		if c.firstFitFrom(d, c.cursor[d.shape]) < 0 {
			return false
		}
	}
	return true
}

// gatherInHeldRoom fits v, a gathering job that does not fit as things are, into the room
// held at bind by gathering jobs walked after it (lower in the queue): a gang that cannot
// gather must not keep one of higher P from gathering until the gate's hold timeout. The
// held room of those jobs is given back one job at a time, the lowest first, until v fits;
// then each whose room v can do without keeps it, the highest first. Those that give theirs
// yield to v (yieldTo). It reports whether v fits: then c's trial holds the room given and
// v's plan, else c's trial is empty.
func gatherInHeldRoom(c *capacity, v *jobView, behind []*jobView) bool {
	var lower []*jobView
	for _, w := range behind {
		if w.class == classGathering && w.yieldTo == nil && len(w.placed) > 0 {
			lower = append(lower, w)
		}
	}
	fitsWith := func(given []*jobView) bool {
		c.rollback()
		c.begin()
		for _, w := range given {
			giveHeld(c, w)
		}
		return place(c, v, nil) == ""
	}
	var given []*jobView
	fits := false
	for k := len(lower) - 1; k >= 0 && !fits; k-- {
		given = append(given, lower[k])
		fits = fitsWith(given)
	}
	if !fits {
		c.rollback()
		c.begin()
		return false
	}
	for k := len(given) - 2; k >= 0; k-- { // the last given is needed: without it v did not fit
		if fitsWith(slices.Delete(slices.Clone(given), k, k+1)) {
			given = slices.Delete(given, k, k+1)
		}
	}
	fitsWith(given)
	for _, w := range given {
		w.yieldTo = v
	}
	return true
}

// giveHeld gives a gathering job's held room back to c: its bound and held pods' requests
// on their nodes.
func giveHeld(c *capacity, v *jobView) {
	for i, p := range v.placed {
		if at := c.nodeIndex(p.Node); at >= 0 && p.State == PodHeld {
			c.give(at, v.placedDemands[i].needs)
		}
	}
}

// heldBinds is "1 held bind" or "n held binds".
func heldBinds(n int) string {
	return strconv.Itoa(n) + plural(n, " held bind", " held binds")
}

// heldGivenBack is "its n held binds are given back".
func heldGivenBack(n int) string {
	return "its " + heldBinds(n) + plural(n, " is", " are") + " given back"
}

// planOf is a job's plan by pod UID: the previous queue's map for the job when it holds
// the same plan (published decisions are never written, so it is shared), else a new one.
// A recompute that only moved the clock mostly finds the plans as they were: at 10k
// admitted jobs that is some 3 MB less to allocate and collect a recompute.
func planOf(v *jobView, c *capacity) map[string]string {
	plan := v.plan
	if d := v.prev; d != nil && d.Plan != nil && len(d.Plan) == len(plan) {
		// A kept plan is the turn's, pod by pod (d.Plan, or prevPlanned made from it), and
		// the pods' UIDs are distinct: of the same length, it is the same map.
		if v.keptPlan {
			return d.Plan
		}
		same := true
		for _, pp := range plan {
			if d.Plan[pp.uid] != c.nodes[pp.node] {
				same = false
				break
			}
		}
		if same {
			return d.Plan
		}
	}
	out := make(map[string]string, len(plan))
	for _, pp := range plan {
		out[pp.uid] = c.nodes[pp.node]
	}
	return out
}

// spreadIdle admits, spread, each job that waits for one domain by choice (patient: see
// Model.patience) when its wait would leave idle the room it could run in now. Waiting for
// a domain costs the job its wait and costs the cluster nothing only while the jobs behind
// it use that room; so after the walk, in walk order, a patient job is placed once more as
// it asked, on what is left with its own reservation given back, and when it fits there,
// no job behind needed that room: it is admitted where it fits. The jobs that waited beside
// its reservation then wait as jobs that do not fit (the room it released is theirs from
// the next queue on).
func spreadIdle(c *capacity, queue []*jobView, now time.Time) {
	for _, v := range queue {
		d := v.d
		if !v.patient || d.Phase != PhaseWaiting {
			continue
		}
		c.begin()
		for _, t := range v.reserved {
			if t.given {
				c.take(t.node, t.needs)
			} else {
				c.give(t.node, t.needs)
			}
		}
		patient := v.required
		v.required = v.asked
		if place(c, v, nil) != "" {
			c.rollback()
			v.required = patient
			continue
		}
		c.commit()
		v.patient, v.reserved = false, nil
		v.kind, v.blocking = waitNone, nil
		d.Phase, d.Blocker, d.TurnSince = PhaseAdmitted, "", now
		if v.hasTurn {
			d.TurnSince = v.turn.Since
		}
		d.Plan, v.planned = planOf(v, c), plannedOf(v, c)
		d.Placement = summarize(c, v.placed, v.plan)
		for _, w := range queue {
			if w.blocking == v && w.kind == waitBesideReserve {
				w.kind, w.blocking, w.d.Blocker = waitNoFit, nil, w.fitBlocker
			}
		}
	}
}

// reserves reports whether a job that does not fit reserves room when no job ahead of it
// does: always under reserve; under backfill once it has waited ReserveAfter or is starved.
func (m Model) reserves(policy Policy, v *jobView) bool {
	switch policy {
	case PolicyReserve:
		return true
	case PolicyBackfill:
		return v.wait >= m.ReserveAfter || v.d.Starved
	}
	return false
}

// patience is the level of the nearest-level domain a job should wait for rather than be
// spread up to span (see Model.SpreadAfter): the lowest topology level below span one of
// whose domains (nodes that carry its label) could hold the job were the other jobs gone
// (reach: tryReach on the table of the nodes' Capacity, once for each gang shape), while
// the job is younger than SpreadAfter and not starved, and the policy is not strict; 0
// otherwise. Whether the wait would leave room idle is known only after the walk:
// spreadIdle.
func (m Model) patience(reach func(v *jobView) reachFit, v *jobView, span int) int {
	// Under strict a job that waits stops every job behind it: its locality is not worth
	// that.
	if m.SpreadAfter <= 0 || v.wait >= m.SpreadAfter || v.d.Starved || m.Policy == PolicyStrict {
		return 0
	}
	saved := v.required
	defer func() { v.required = saved }()
	for l := 1; l < span; l++ {
		v.required = l
		if reach(v).first < 0 {
			return l
		}
	}
	return 0
}

// spanLevel is the lowest placement level one domain of which holds every placed and
// planned pod of a job (the cluster level when none does).
func spanLevel(c *capacity, placed []*Pod, plan []plannedPod) int {
	first, same := -1, 0
	visit := func(pos int) {
		if first < 0 {
			first = pos
			return
		}
		for same <= c.lay.levels() && !samePlace(c.lay, same, first, pos) {
			same++
		}
	}
	for _, p := range placed {
		if i := c.nodeIndex(p.Node); i >= 0 {
			visit(i)
		}
	}
	for _, pp := range plan {
		visit(pp.node)
	}
	return same
}

// keepPlan places a job that keeps its turn where its turn's plan put its pods, when each
// of them still has a planned node that it may use and that has room: kube-scheduler may
// be placing them there already. It reports whether they all did.
func keepPlan(c *capacity, v *jobView) bool {
	if !keptNodes(c, v) {
		v.plan = v.plan[:0]
		return false
	}
	// The pods planned on one node (mostly the whole gang) are summed and taken at once:
	// one update of the tree a node, as for a gang placed on one node.
	kept := c.kept[:0]
	defer func() { c.kept = kept[:0] }()
	lastAt, k := -1, -1
	for i, pp := range v.plan {
		at := pp.node
		d := v.demands[i]
		if !c.usable(at, d) {
			v.plan = v.plan[:0]
			return false
		}
		if at != lastAt { // a gang's pods mostly share a node
			lastAt, k = at, -1
			for j := range kept {
				if kept[j].at == at {
					k = j
				}
			}
		}
		if k < 0 {
			k = len(kept)
			if k < cap(kept) && cap(kept[:k+1][k].sum) >= c.r { // the last call's sums
				kept = kept[:k+1]
				kept[k].sum = kept[k].sum[:c.r]
				clear(kept[k].sum)
			} else {
				kept = append(kept, keptNode{sum: make([]int64, c.r)})
			}
			kept[k].at = at
		}
		for _, n := range d.needs {
			kept[k].sum[n.dim] += n.amount
		}
	}
	needs := c.keptNeeds[:0]
	defer func() { c.keptNeeds = needs[:0] }()
	for _, n := range kept {
		needs = needs[:0]
		for dim, amount := range n.sum {
			if amount > 0 {
				needs = append(needs, dimNeed{dim, amount})
			}
		}
		if !c.fits(n.at, needs) {
			v.plan = v.plan[:0]
			return false // the caller takes back what the nodes before took
		}
		c.takeCopy(n.at, needs)
	}
	return true
}

// keptPod is one pod of an admitted job's plan: its UID, its node and the node's index in
// the table of the Admit that planned it. The queue keeps an admitted job's plan as a
// list of them, in the order of its pods to fit, for the next Admit to keep the plan
// without looking pods and nodes up by name (see keptNodes); decisions that keep the
// plan share the list.
type keptPod struct {
	uid, node string
	at        int
}

// uniqueUIDs reports whether no two pods of plan share a UID.
func uniqueUIDs(plan []plannedPod) bool {
	if len(plan) > 16 {
		seen := make(map[string]bool, len(plan))
		for _, pp := range plan {
			if seen[pp.uid] {
				return false
			}
			seen[pp.uid] = true
		}
		return true
	}
	for i := range plan {
		for j := range i {
			if plan[i].uid == plan[j].uid {
				return false
			}
		}
	}
	return true
}

// keptNodes sets v.plan to the turn's plan, pod by pod in the order of v.toFit, and
// reports whether every pod to fit has a planned node that is in c. The previous
// queue's planned list serves when it holds the same pods in the same order, its indices
// name the same nodes in c and no two nodes share a name (samePlanned); else each pod and
// node is looked up by name.
func keptNodes(c *capacity, v *jobView) bool {
	v.plan, v.samePlanned = v.plan[:0], false
	if pl := v.prevPlanned; len(pl) == len(v.toFit) && c.uniqueNames() {
		same := true
		for i, p := range v.toFit {
			if k := pl[i]; k.uid != p.UID || k.at >= len(c.nodes) || c.nodes[k.at] != k.node {
				same = false
				break
			}
		}
		if same {
			for i, p := range v.toFit {
				v.plan = append(v.plan, plannedPod{uid: p.UID, node: pl[i].at, role: p.Role})
			}
			v.samePlanned = true
			return true
		}
	}
	lastNode, lastAt := "", -1
	for _, p := range v.toFit {
		node, ok := v.turn.Plan[p.UID]
		if !ok {
			return false
		}
		if node != lastNode || lastAt < 0 {
			lastNode, lastAt = node, c.nodeIndex(node)
		}
		if lastAt < 0 {
			return false
		}
		v.plan = append(v.plan, plannedPod{uid: p.UID, node: lastAt, role: p.Role})
	}
	return true
}

// plannedOf is v.planned for an admitted job: the previous queue's when the plan is the
// same list (kept whole from it), else a new one; none when two of its pods share a UID
// (by contract they do not), so that the next queue keeps the plan by name, one node a
// UID, as the plan map has it.
func plannedOf(v *jobView, c *capacity) []keptPod {
	if v.keptPlan && v.samePlanned {
		return v.prevPlanned
	}
	if !uniqueUIDs(v.plan) {
		return nil
	}
	out := make([]keptPod, len(v.plan))
	for i, pp := range v.plan {
		out[i] = keptPod{uid: pp.uid, node: c.nodes[pp.node], at: pp.node}
	}
	return out
}

// keptNode is what a kept plan puts on one node, summed by resource dimension.
type keptNode struct {
	at  int
	sum []int64
}

// reservationOf is the domain a job reserved in its previous decision d (level and domain
// name), if one.
func reservationOf(d *Decision) [2]string {
	// Only a waiting job's Placement is its reservation (Admit sets it on no other).
	if d == nil || d.Phase != PhaseWaiting || len(d.Placement.Domains) != 1 || d.Placement.Level == "cluster" {
		return [2]string{}
	}
	return [2]string{d.Placement.Level, d.Placement.Domains[0]}
}

// turnOf is the turn a job's previous decision d gave it: when it had the turn and where
// its pods were planned; false when d did not admit it.
func turnOf(d *Decision) (Turn, bool) {
	if d == nil || d.Phase != PhaseAdmitted {
		return Turn{}, false
	}
	return Turn{Since: d.TurnSince, Plan: d.Plan}, true
}

// plannedPod is where the fit put one pending pod (a node index of the capacity table).
type plannedPod struct {
	uid  string
	node int
	role Role
}

// levels resolves the job's TopologyRequest into placement levels of lay (top: the
// cluster); a key that is no level of it leaves badTopology saying so.
func (v *jobView) levels(lay *layout, top int) {
	req := v.job.Topology
	var ok bool
	if v.required, ok = lay.levelOf(req.Required, top); !ok {
		v.badTopology = "it requires one " + req.Required + " domain, and " + req.Required + " is not a topology level of the extender (affinity.topology)"
		if lay.configured(req.Required) {
			v.badTopology = "it requires one " + req.Required + " domain, and no node carries the label " + req.Required
		}
		v.required = top
	}
	if v.preferred, ok = lay.levelOf(req.Preferred, top); !ok || req.Preferred == "" {
		v.preferred = nodeLevel
	}
	v.preferred = min(v.preferred, v.required)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// queueKey is a job's place in the walk order, copied out of its view and decision so
// that the sort compares adjacent memory.
type queueKey struct {
	class   int
	p       float64
	created time.Time
	v       *jobView
}

// sortQueue sorts queue in walk order (compareQueue), through keys kept in w. The keys
// start in the previous queue's order, jobs new to it after: between two recomputes few
// jobs move, and pdqsort finishes runs already in order in linear time. The order is
// total (job keys are unique by contract), so where the keys start does not change the
// result.
func sortQueue(queue []*jobView, w *Workspace) {
	slots := w.slots[:0]
	for i, v := range queue {
		if d := v.prev; d != nil && d.Position >= 1 && d.Position <= 4*len(queue) {
			for len(slots) < d.Position {
				slots = append(slots, -1)
			}
			if slots[d.Position-1] < 0 {
				slots[d.Position-1] = int32(i)
			}
		}
	}
	keys := w.order[:0]
	for _, i := range slots {
		if i >= 0 {
			keys = append(keys, keyOf(queue[i]))
			queue[i] = nil
		}
	}
	for _, v := range queue {
		if v != nil {
			keys = append(keys, keyOf(v))
		}
	}
	slices.SortFunc(keys, compareKeys)
	for i := range keys {
		queue[i] = keys[i].v
	}
	clear(keys)
	w.order, w.slots = keys[:0], slots[:0]
}

// compareKeys is compareQueue on keys.
func compareKeys(a, b queueKey) int {
	if c := cmp.Compare(a.class, b.class); c != 0 {
		return c
	}
	if a.class != classStarved {
		if c := cmp.Compare(b.p, a.p); c != 0 {
			return c
		}
	}
	if c := a.created.Compare(b.created); c != 0 {
		return c
	}
	return strings.Compare(a.v.job.Key, b.v.job.Key)
}

// compareQueue is the walk order: class, then (starved: oldest first) P highest first,
// then older first, then key.
func compareQueue(a, b *jobView) int {
	return compareKeys(keyOf(a), keyOf(b))
}

// keyOf is v's queueKey.
func keyOf(v *jobView) queueKey {
	return queueKey{class: v.class, p: v.d.P, created: v.job.Created, v: v}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Rank is the order in which Admit walks the jobs that are not running, without fitting
// anything: each decision has the job's counts, Terms, P, Starved, Repair and Position
// (1-based), and no phase or reason. It serves callers that place jobs themselves (the
// Volcano enqueue plan) and need only the combined order. No job cools down.
func (m Model) Rank(jobs []Job, now time.Time) []*Decision {
	views := make([]jobView, len(jobs))
	decisions := make([]Decision, len(jobs))
	var pending []*Pod
	queue := make([]*jobView, 0, len(jobs))
	for i := range jobs {
		v := &views[i]
		v.job, v.d = &jobs[i], &decisions[i]
		if !m.viewJob(v, nil, now, &pending) {
			queue = append(queue, v)
		}
	}
	slices.SortFunc(queue, compareQueue)
	out := make([]*Decision, len(queue))
	for i, v := range queue {
		v.d.Phase, v.d.Blocker, v.d.CoolingDown = "", "", false
		v.d.Position, v.d.QueueLen = i+1, len(queue)
		out[i] = v.d
	}
	return out
}
