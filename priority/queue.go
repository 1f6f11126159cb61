package priority

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Queue is the admission queue computed by Admit: every job's decision, the jobs that are
// not running in queue order.
type Queue struct {
	// Order holds the jobs that are not running, in queue order (Position 1, 2, ...).
	Order []*Decision
	// Running holds the running jobs, by key.
	Running []*Decision

	byKey map[string]*Decision
}

// Lookup returns the decision for a job key, running or not.
func (q *Queue) Lookup(key string) (*Decision, bool) {
	if q == nil {
		return nil, false
	}
	d, ok := q.byKey[key]
	return d, ok
}

// Len is the number of jobs in the queue, that is, not running.
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
)

// jobView is Admit's working record of one job.
type jobView struct {
	job      *Job
	d        *Decision
	class    int
	wait     time.Duration
	eligible bool
	toFit    []*Pod // pending pods that must fit, in intra-job order
	plan     []plannedPod
	demands  []demand
	psNodes  []string // nodes of the job's bound and held PS
	kind     waitKind
	blocking *jobView // the strict head or the reserving job this one waits on
}

// Admit computes the admission queue at now. Jobs with at least their minimum bound are
// running. The others are walked in queue order: repair jobs (0 < bound < min) first, then
// jobs whose binds are gathering (held > 0), then starved jobs (waited > StarvationBound,
// oldest first), then by combined priority P, highest first; ties go to the older job,
// then to the smaller key. A job may take the turn only when its gang is complete, no
// pending pod is gated and it is not cooling down; the others wait without blocking.
// A job's pending pods up to its minimum (PS first) are fitted into the nodes' free
// capacity, less what jobs ahead took; when they fit the job is admitted, and when not,
// the policy decides: strict stops every job behind it, reserve lets the first such job
// keep what fits and lets later jobs use only the rest, besteffort goes on. The result
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
	plans   []plannedPod
	tree    []int64
	nodes   []string
	order   []int32
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
	q := &Queue{byKey: make(map[string]*Decision, len(s.Jobs))}
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
	for i := range s.Jobs {
		v := &views[i]
		v.job, v.d = &s.Jobs[i], &decisions[i]
		if m.viewJob(v, s.CoolDown, now, &pendingBuf) {
			q.Running = append(q.Running, v.d)
			continue
		}
		queue = append(queue, v)
		fitPods = append(fitPods, v.toFit...)
	}

	w.queue, w.fitPods, w.pending = queue, fitPods, pendingBuf
	var dims dimSet
	demands := dims.demands(fitPods)
	// One backing array each for every job's demands and plan.
	w.plans = grown(w.plans, len(fitPods))
	plans := w.plans
	for _, v := range queue {
		n := len(v.toFit)
		v.demands, demands = demands[:n], demands[n:]
		v.plan, plans = plans[:0:n], plans[n:]
	}
	c := newCapacity(s.Nodes, &dims, w)

	slices.SortFunc(queue, compareQueue)
	slices.SortFunc(q.Running, func(a, b *Decision) int { return strings.Compare(a.Key, b.Key) })

	policy := m.Policy
	if !ValidPolicy(policy) {
		policy = DefaultPolicy
	}
	var strictHead, reserving *jobView
	for _, v := range queue {
		d := v.d
		d.Phase = PhaseWaiting
		switch {
		case !v.eligible:
			v.kind = waitIneligible
		case strictHead != nil:
			v.kind, v.blocking = waitStrictBehind, strictHead
			d.Blocker = "strict order: behind " + strictHead.job.Key
		default:
			keepPartial := policy == PolicyReserve && reserving == nil
			c.begin()
			blocker := place(c, v, keepPartial)
			switch {
			case blocker == "":
				c.commit()
				d.Phase = PhaseAdmitted
				d.Plan = make(map[string]string, len(v.plan))
				for _, pp := range v.plan {
					d.Plan[pp.uid] = c.nodes[pp.node]
				}
			case keepPartial:
				c.commit()
				v.kind, reserving = waitReserving, v
				d.Blocker = blocker
			default:
				c.rollback()
				v.kind = waitNoFit
				d.Blocker = blocker
				if policy == PolicyStrict {
					strictHead = v
				} else if reserving != nil {
					v.kind, v.blocking = waitBesideReserve, reserving
					d.Blocker = "does not fit beside the reservation of " + reserving.job.Key + ": " + blocker
				}
			}
		}
	}

	q.Order = make([]*Decision, len(queue))
	for i, v := range queue {
		d := v.d
		q.Order[i] = d
		d.Position = i + 1
		if i > 0 && d.Phase != PhaseAdmitted {
			d.Ahead, d.AheadP = queue[i-1].job.Key, queue[i-1].d.P
		}
	}
	for i := range decisions {
		d := &decisions[i]
		d.QueueLen = len(queue)
		if d.Phase == PhaseRunning {
			d.Reason = runningReason(d)
		} else {
			d.Reason = m.queuedReason(&views[i])
		}
	}
	// Keys are unique by contract; should one repeat, Lookup finds the first in queue
	// order, then the first running, which does not depend on the input order.
	for _, list := range [][]*Decision{q.Order, q.Running} {
		for _, d := range list {
			if _, dup := q.byKey[d.Key]; !dup {
				q.byKey[d.Key] = d
			}
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
	clear(w.nodes)
}

// viewJob fills a job's counts, terms and eligibility, and reports whether it is running.
// Its pending pods are appended to buf.
func (m Model) viewJob(v *jobView, coolDown map[string]time.Time, now time.Time, buf *[]*Pod) bool {
	j, d := v.job, v.d
	d.Key, d.Pods, d.MinMember = j.Key, len(j.Pods), j.MinMembers()
	d.Terms = m.Terms(j, now)
	d.P = m.Combined(d.Terms)
	start := len(*buf)
	gated := 0
	for k := range j.Pods {
		p := &j.Pods[k]
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
	if d.Bound >= d.MinMember {
		d.Phase = PhaseRunning
		return true
	}

	v.wait = j.Waited(now)
	d.Starved = m.StarvationBound > 0 && v.wait > m.StarvationBound
	d.Repair = d.Bound > 0
	switch {
	case d.Repair:
		v.class = classRepair
	case d.Held > 0:
		v.class = classGathering
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
	if d.Pods < d.MinMember {
		d.Blocker = "gang incomplete: " + strconv.Itoa(d.Pods) + " of " + strconv.Itoa(d.MinMember) + " pods exist"
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

// place fits a job's required pods into c and returns "" or the first pod that did not
// fit. With keepPartial it places every pod that fits (a reservation); otherwise it stops
// at the first that does not, since the caller takes the job back out anyway.
func place(c *capacity, v *jobView, keepPartial bool) string {
	v.plan = v.plan[:0]
	ps := c.psScratch[:0]
	for _, name := range v.psNodes {
		if at := c.nodeIndex(name); at >= 0 {
			ps = insertSorted(ps, at)
		}
	}
	blocker := ""
	for i, p := range v.toFit {
		if at := c.placeOne(p.Role, v.demands[i], &ps); at >= 0 {
			v.plan = append(v.plan, plannedPod{uid: p.UID, node: at})
			continue
		}
		if blocker == "" {
			ns, _, found := strings.Cut(v.job.Key, "/")
			if !found {
				ns = ""
			}
			blocker = c.shortage(podLabel(p, ns), v.demands[i].needs)
		}
		if !keepPartial {
			break
		}
	}
	c.psScratch = ps[:0]
	return blocker
}

// plannedPod is where the fit put one pending pod (a node index of the capacity table).
type plannedPod struct {
	uid  string
	node int
}

// compareQueue is the walk order: class, then (starved: oldest first) P highest first,
// then older first, then key.
func compareQueue(a, b *jobView) int {
	if c := cmp.Compare(a.class, b.class); c != 0 {
		return c
	}
	if a.class != classStarved {
		if c := cmp.Compare(b.d.P, a.d.P); c != 0 {
			return c
		}
	}
	if c := a.job.Created.Compare(b.job.Created); c != 0 {
		return c
	}
	return strings.Compare(a.job.Key, b.job.Key)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
