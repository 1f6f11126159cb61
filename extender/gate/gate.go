// Package gate is the gang gate in bind: it holds the binds of an admitted job until its gang
// has gathered, then binds them together, parameter servers first, and cools a job down when
// its gang fails to gather. It reads jobs through JobView and binds through PodBinder, and
// imports gang, config, metrics and the model.
package gate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"

	gocache "github.com/patrickmn/go-cache"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/priority"
)

// JobView is what the gate reads of the cluster view.
type JobView interface {
	// JobOfPod names the job of a pod in a bind request (inJob false: no job).
	JobOfPod(ctx context.Context, pod gang.PodRef) (key string, inJob bool, err error)
	// Job returns a job and its admission decision in the current queue.
	Job(key string) (*priority.Job, *priority.Decision, bool)
	// BindCheck says whether the pod may be bound to node now: still unbound, the node
	// there, schedulable and one the pod may use (view.Cluster.BindCheck). The release of a
	// gathered gang asks it again for every held pod.
	BindCheck(ctx context.Context, pod gang.PodRef, node string) error
	// HoldsSeen is the gate's change count (Gate.Placed) the current queue was computed
	// from: a gathered gang is released on a queue that has seen it (settle).
	HoldsSeen() uint64
}

// PodBinder binds a pod to a node through the API server.
type PodBinder interface {
	Bind(ctx context.Context, pod gang.PodRef, node string) error
}

// Gate is the authoritative gang gate in bind. Binds of pods in no job, and of jobs that
// already run, pass at once. Binds of an admitted job are held until the job's minimum
// has reached bind or is bound, then all are bound together, PS first.
//
// The gang gathers as long as it makes progress, so that a gang whose pods reach bind over
// a long stretch, such as a backlog kube-scheduler reads in its own order, still gathers.
// When no new member has reached bind for the hold timeout the gang has failed: every held
// bind answers an error, nothing of the job is bound, and the job cools down (loses the
// turn) for a time that doubles per failure. One request is held at most maxHold, which
// must stay below the scheduler's httpTimeout; a request that has waited that long while
// its gang still grows is answered with an error the scheduler retries (the pod comes back
// and joins again).
//
// Every held request is answered: the gang is bound, or the gathering ends (hold timeout,
// given back, refused at release) and answers each with an error the scheduler retries,
// or the request alone ends (maxHold, a newer request for the pod, the scheduler dropping
// it). A gathering lives as long as its timers say, never replaced while it holds binds. It
// is checked again every yieldCheck against the view's newest queue: a gang whose other
// members were bound meanwhile is complete and released then, one told to give its held
// binds back does so.
//
// Gathered gangs are bound a few at a time (bindLanes), so that one gang's Bindings go out
// together instead of interleaved with many others' under the client's rate limit. At
// release every held pod is checked against its node again (JobView.BindCheck): a gang one
// of whose nodes went away or may no longer be used is not bound, and its pods are placed
// again.
//
// Gatherings live in memory, cool-downs and released gangs in go-cache with TTLs: a restart
// loses them harmlessly (held requests fail, the scheduler retries).
type Gate struct {
	log    *zap.Logger
	binder PodBinder
	// changed tells the view that the held binds or cool-downs changed (held pods count
	// as placed, cooling jobs lose the turn).
	changed     chan struct{}
	metrics     *metrics.Metrics
	holdTimeout time.Duration
	maxHold     time.Duration
	coolDown    time.Duration
	maxCoolDown time.Duration
	clock       clock.WithDelayedExecution
	lanes       chan struct{}
	// laneWaits counts the gathered gangs waiting for a bind lane.
	laneWaits atomic.Int32

	// victims says which jobs are being evicted (nil: none).
	victims Victims

	mu sync.Mutex
	// gatherings are the open gatherings by job key. One leaves only when it closes
	// (closeGathering), and whoever closes it answers every bind it holds.
	gatherings map[string]*gathering
	failures   *gocache.Cache // job key -> *coolState
	released   *gocache.Cache // job key -> pod UIDs the gate released: the informer may lag
	// assumed are the pods whose Binding the gate posts or has just posted, by UID: until
	// the informer shows them bound the view counts them where they go (Placed), as
	// kube-scheduler's cache assumes a pod it binds. Without it a bound pod in no job, or a
	// released gang, is free room for the next queue until the informer catches up, and a
	// gang may be admitted and bound on it (TestMixedGangsNoHoldTimeout).
	assumed map[types.UID]assumption
	// seq counts the changes of the held binds and assumed pods; Placed reports it, and a
	// gathered gang is released on a queue computed from a state at least that new (settle).
	seq atomic.Uint64
}

// assumption is one pod the gate binds: its node, and until when it counts (assumeFor).
type assumption struct {
	node  string
	until time.Time
}

// assumeFor is how long a posted Binding counts as placed when the informer has not shown
// the pod bound by then (it shows it within milliseconds on a healthy control plane; a pod
// the informer shows bound counts where it is bound, whatever the gate assumed).
const assumeFor = 10 * time.Second

// settleMax bounds how long a gathered gang waits for the view's queue to have seen the
// gate's state at its gathering (settle); past it the gang is released as the queue last
// said. settlePoll is how often it looks.
const (
	settleMax  = 2 * time.Second
	settlePoll = 2 * time.Millisecond
)

// bindLanes is how many gathered gangs post their Bindings at once.
const bindLanes = 2

// gathering is one job's held binds while its gang gathers.
type gathering struct {
	job string
	// view is the cluster view the gathering's binds came through; the release checks its
	// members against it.
	view  JobView
	min   int
	start time.Time
	holds map[types.UID]*hold
	// seen is every pod held in this gathering so far, and lastNew when the last pod not
	// seen before arrived: the gathering's progress. stall fires a hold timeout after it.
	seen    map[types.UID]struct{}
	lastNew time.Time
	stall   clock.Timer
	// check looks at the job in the view's newest queue every yieldCheck: a gang whose
	// other members were bound meanwhile is released, one that cannot gather gives its held
	// binds back (Decision.YieldHeld).
	check clock.Timer
}

// yieldCheck is how often a gathering looks at its job in the view's current queue: whether
// its members bound meanwhile complete the gang, or the queue tells it to give its held binds
// back. A wait ended within a recompute or so, not a hold timeout.
const yieldCheck = 250 * time.Millisecond

// releaseCheckTimeout bounds the checks of a gathered gang's nodes at release (they read the
// informer's cache, the API server only for a pod the cache does not have).
const releaseCheckTimeout = 10 * time.Second

// hold is one held bind request.
type hold struct {
	pod     gang.PodRef
	node    string
	role    priority.Role
	index   int
	arrived time.Time
	result  chan error
	timer   clock.Timer
}

// coolState counts a job's hold timeouts and when its cool-down ends.
type coolState struct {
	failures int
	until    time.Time
}

// Options are the dependencies and settings of a Gate.
type Options struct {
	Log    *zap.Logger
	Binder PodBinder
	Config config.GateConfig
	// Metrics counts the bind outcomes; nil means none.
	Metrics *metrics.Metrics
	// Clock times the holds and cool-downs; nil means the real clock.
	Clock clock.WithDelayedExecution
	// Victims says which jobs are being evicted by a preemption; their pods are not bound
	// meanwhile. Nil: none are.
	Victims Victims
}

// Victims tells the gate which jobs a preemption is evicting.
type Victims interface {
	Evicting(job string) bool
}

// New builds the bind gate.
func New(o Options) *Gate {
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	hold := o.Config.HoldTimeout.Duration
	return &Gate{
		log: o.Log, binder: o.Binder, changed: make(chan struct{}, 1), metrics: o.Metrics, clock: clk, lanes: make(chan struct{}, bindLanes),
		victims:     o.Victims,
		holdTimeout: hold, maxHold: max(o.Config.MaxHold.Duration, hold),
		coolDown: o.Config.CoolDown.Duration, maxCoolDown: o.Config.MaxCoolDown.Duration,
		gatherings: map[string]*gathering{},
		failures:   gocache.New(4*o.Config.MaxCoolDown.Duration, time.Minute),
		released:   gocache.New(time.Minute, time.Minute),
		assumed:    map[types.UID]assumption{},
	}
}

// For returns the gate as a binder that finds pods' jobs in view.
func (g *Gate) For(view JobView) *ViewBinder { return &ViewBinder{gate: g, view: view} }

// ViewBinder is the gate over one cluster view: the binder the bind verb calls.
type ViewBinder struct {
	gate *Gate
	view JobView
}

// Bind binds the pod to node, holding it while its gang gathers (see Gate).
func (b *ViewBinder) Bind(ctx context.Context, pod gang.PodRef, node string) error {
	outcome, err := b.gate.bind(ctx, b.view, pod, node)
	b.gate.metrics.GateDecision("bind", outcome)
	return err
}

// Changed is signalled after the held binds or the cool-downs change.
func (g *Gate) Changed() <-chan struct{} { return g.changed }

// notify signals Changed; many changes before the view reads it make one signal. Every
// change of the held binds or assumed pods is followed by a notify (or a bump, when no
// recompute is needed for it alone).
func (g *Gate) notify() {
	g.seq.Add(1)
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// bind binds the pod, and says how it ended (one of the bind outcomes of Metrics).
func (g *Gate) bind(ctx context.Context, view JobView, pod gang.PodRef, node string) (string, error) {
	key, inJob, err := view.JobOfPod(ctx, pod)
	if err != nil {
		return metrics.OutcomeRefused, err
	}
	if !inJob {
		return g.bindNow(ctx, pod, node)
	}
	job, decision, ok := view.Job(key)
	if !ok {
		return metrics.OutcomeRefused, fmt.Errorf("not bound: job %s is not in the extender's view yet; the scheduler retries", key)
	}
	if g.evicting(key) {
		return metrics.OutcomeRefused, fmt.Errorf("not bound: job %s is being evicted by a preemption; the scheduler retries", key)
	}
	if pod.UID != "" && !hasPod(job, pod.UID) {
		// What a snapshot that has not seen the pod counts as bound may be gone by now: an
		// evicted pod whose controller made this one under its name, or another of the
		// gang evicted with it. Binding on it could bind part of a gang (seen in make eval:
		// two of three recreated pods bound a second before the third).
		return metrics.OutcomeRefused, fmt.Errorf("not bound: the extender's view has not seen pod %s yet; the scheduler retries", pod)
	}
	if decision.Phase == priority.PhaseRunning || g.releasedEnough(job, decision) {
		return g.bindNow(ctx, pod, node)
	}
	if decision.Phase != priority.PhaseAdmitted {
		return metrics.OutcomeRefused, fmt.Errorf("not bound: %s", decision.Reason)
	}
	err = g.hold(ctx, view, job, decision, pod, node)
	var ge *gateError
	switch {
	case err == nil:
		return metrics.OutcomeGathered, nil
	case errors.As(err, &ge):
		return ge.outcome, err
	default:
		return metrics.OutcomeFailed, err
	}
}

// bindNow binds a pod that needs no gathering. It is assumed on node from before its
// Binding is posted; no recompute is asked for (the informer's event asks for one), but a
// gang gathered after it is released on a queue that counts it (settle).
func (g *Gate) bindNow(ctx context.Context, pod gang.PodRef, node string) (string, error) {
	g.mu.Lock()
	g.assume(pod, node)
	g.mu.Unlock()
	g.seq.Add(1)
	if err := g.post(context.WithoutCancel(ctx), pod, node); err != nil {
		g.unassume(&hold{pod: pod, node: node})
		return metrics.OutcomeFailed, err
	}
	g.reassume(pod, node) // it counts assumeFor from its Binding, not from the wait before
	return metrics.OutcomePassed, nil
}

// assume counts pod as placed on node for assumeFor (a pod without a UID cannot be told
// apart in the view: it is not). The caller holds g.mu and bumps seq after.
func (g *Gate) assume(pod gang.PodRef, node string) {
	if pod.UID != "" {
		g.assumed[pod.UID] = assumption{node: node, until: g.clock.Now().Add(assumeFor)}
	}
}

// reassume counts an assumed pod from now for assumeFor, when it is still assumed on node:
// a gang may wait for the queue, a bind lane and the client's rate limit before its
// Bindings go out, and its room must not come free meanwhile.
func (g *Gate) reassume(pod gang.PodRef, node string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if a, ok := g.assumed[pod.UID]; ok && a.node == node {
		g.assume(pod, node)
	}
}

// unassume takes back the assumption of held pods whose Binding was not posted or failed,
// each only while it is assumed on the hold's node: a retry of the pod may be assumed
// elsewhere by now.
func (g *Gate) unassume(holds ...*hold) {
	g.mu.Lock()
	for _, h := range holds {
		if a, ok := g.assumed[h.pod.UID]; ok && a.node == h.node {
			delete(g.assumed, h.pod.UID)
		}
	}
	g.mu.Unlock()
	g.notify()
}

// post creates one Binding, counting failures.
func (g *Gate) post(ctx context.Context, pod gang.PodRef, node string) error {
	err := g.binder.Bind(ctx, pod, node)
	if err != nil {
		g.metrics.BindFailed()
	}
	return err
}

// gateError is an error of a held bind that the gate itself decided; outcome classifies it
// for the metrics.
type gateError struct {
	outcome string
	err     error
}

func (e *gateError) Error() string { return e.err.Error() }
func (e *gateError) Unwrap() error { return e.err }

// hold parks one bind until its gang has gathered, the gathering ends, the request's own
// hold ends (maxHold, superseded), or the scheduler drops the request (ctx). Every way out
// answers it.
func (g *Gate) hold(ctx context.Context, view JobView, job *priority.Job, d *priority.Decision, pod gang.PodRef, node string) error {
	g.metrics.BindWaiting(1)
	defer g.metrics.BindWaiting(-1)
	member := gang.MemberOf(job, pod)
	now := g.clock.Now()
	h := &hold{pod: pod, node: node, role: member.Role, index: member.Index, arrived: now, result: make(chan error, 1)}

	g.mu.Lock()
	gat := g.gathering(job.Key)
	gat.view, gat.min = view, d.MinMember
	if old, ok := gat.holds[pod.UID]; ok {
		// The scheduler retried this pod; the older request is stale.
		old.timer.Stop()
		old.result <- &gateError{metrics.OutcomeSuperseded, errors.New("superseded by a newer bind request for the same pod")}
	}
	if _, seen := gat.seen[pod.UID]; !seen {
		gat.seen[pod.UID] = struct{}{}
		gat.lastNew = now
		gat.stall.Reset(g.holdTimeout)
	}
	// In a goroutine of its own: a fake clock runs the callback while it holds its lock.
	h.timer = g.clock.AfterFunc(g.maxHold, func() { go g.expireHold(gat, h) })
	gat.holds[pod.UID] = h
	held := len(gat.holds)
	bound, min := g.boundBeside(gat, job), gat.min
	gathered := bound+held >= min
	if gathered {
		g.closeGathering(gat)
		g.assumeHolds(gat)
	}
	g.mu.Unlock()
	g.notify() // held pods count as placed

	if gathered {
		g.metrics.GangGathered(now.Sub(gat.start))
		g.log.Info("gang gathered: binding", zap.String("job", job.Key), zap.Int("pods", held), zap.Int("bound", bound), zap.Int("min", min))
		go g.release(gat)
	} else {
		g.log.Debug("bind held", zap.String("job", job.Key), zap.Stringer("pod", pod), zap.Int("held", held), zap.Int("bound", bound), zap.Int("min", min))
	}

	select {
	case err := <-h.result:
		return err
	case <-ctx.Done():
	}
	// The scheduler gave up on this request: drop it so it is never bound, unless the
	// gang has already been released (then its Binding is under way).
	g.mu.Lock()
	if g.gatherings[job.Key] == gat && gat.holds[pod.UID] == h {
		h.timer.Stop()
		delete(gat.holds, pod.UID)
		g.mu.Unlock()
		g.notify()
		return &gateError{metrics.OutcomeCancelled, fmt.Errorf("bind request for %s cancelled while its gang gathered: %w", pod, ctx.Err())}
	}
	g.mu.Unlock()
	return <-h.result
}

// gathering returns the job's open gathering, starting one if needed. The caller holds
// g.mu.
func (g *Gate) gathering(key string) *gathering {
	if gat, ok := g.gatherings[key]; ok {
		return gat
	}
	gat := &gathering{job: key, start: g.clock.Now(), holds: map[types.UID]*hold{}, seen: map[types.UID]struct{}{}}
	gat.stall = g.clock.AfterFunc(g.holdTimeout, func() { go g.stalled(gat) })
	gat.check = g.clock.AfterFunc(yieldCheck, func() { go g.check(gat) })
	g.gatherings[key] = gat
	return gat
}

// closeGathering ends a gathering (released or failed); the caller answers every bind it
// holds, and holds g.mu.
func (g *Gate) closeGathering(gat *gathering) {
	gat.stall.Stop()
	gat.check.Stop()
	for _, h := range gat.holds {
		h.timer.Stop()
	}
	delete(g.gatherings, gat.job)
}

// assumeHolds assumes every pod of a gathered gang on its node: they stay placed for the
// view while the gang waits for its release and its Bindings. The caller holds g.mu, and
// notifies after.
func (g *Gate) assumeHolds(gat *gathering) {
	for _, h := range gat.holds {
		g.assume(h.pod, h.node)
	}
}

// open reports whether gat is its job's open gathering. The caller holds g.mu.
func (g *Gate) open(gat *gathering) bool { return g.gatherings[gat.job] == gat }

// boundBeside counts the job's members bound outside gat: bound as job has them, or released
// by the gate a moment ago (their Bindings may not be in the view yet). With the binds gat
// holds they make the gang. The caller holds g.mu.
func (g *Gate) boundBeside(gat *gathering, job *priority.Job) int {
	var released map[string]bool
	if v, ok := g.released.Get(job.Key); ok {
		released = v.(map[string]bool)
	}
	n := 0
	for _, p := range job.Pods {
		if _, held := gat.holds[types.UID(p.UID)]; held {
			continue
		}
		if p.State == priority.PodBound || released[p.UID] {
			n++
		}
	}
	return n
}

// stalled fails a gathering that no new member has joined for a hold timeout.
func (g *Gate) stalled(gat *gathering) {
	g.mu.Lock()
	grew := g.clock.Since(gat.lastNew) < g.holdTimeout // the timer fired just before a Reset
	g.mu.Unlock()
	if !grew {
		g.expire(gat)
	}
}

// check looks at a gathering's job in the view's current queue. When the members bound
// meanwhile and the binds it holds make the gang (the bind that came last was decided on a
// snapshot that had not seen them bound), the gang is released. When the queue says the gang
// cannot gather (Decision.YieldHeld, for these very held pods): what it still needs does not
// fit, or a gathering job of higher P needs their room, every held bind answers an error the
// scheduler retries after its backoff; nothing is bound, and the job does not cool down: the
// queue keeps it waiting while it does not fit. Otherwise it looks again after yieldCheck.
func (g *Gate) check(gat *gathering) {
	g.mu.Lock()
	if !g.open(gat) {
		g.mu.Unlock()
		return
	}
	view := gat.view
	g.mu.Unlock()
	var job *priority.Job
	var d *priority.Decision
	ok := false // the job is in the view
	if view != nil {
		job, d, ok = view.Job(gat.job)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open(gat) {
		return
	}
	switch {
	case ok && len(gat.holds) > 0 && g.boundBeside(gat, job)+len(gat.holds) >= d.MinMember:
		gat.min = d.MinMember
		g.closeGathering(gat)
		g.assumeHolds(gat)
		g.metrics.GangGathered(g.clock.Since(gat.start))
		g.log.Info("gang complete with members bound meanwhile: binding", zap.String("job", gat.job), zap.Int("pods", len(gat.holds)), zap.Int("min", gat.min))
		g.notify() // never blocks
		go g.release(gat)
	case ok && d.YieldHeld && g.heldHere(gat, job):
		g.closeGathering(gat)
		err := &gateError{metrics.OutcomeRefused, fmt.Errorf("not bound: job %s gives its held binds back: %s; the scheduler retries", gat.job, d.Blocker)}
		for _, h := range gat.holds {
			h.result <- err
		}
		g.log.Info("held binds given back", zap.String("job", gat.job), zap.Int("held", len(gat.holds)), zap.Int("min", gat.min), zap.String("why", d.Blocker))
		g.notify() // never blocks
	default:
		// A new timer rather than Reset: the fake clock of the tests blocks on a
		// func timer that fires twice.
		gat.check = g.clock.AfterFunc(yieldCheck, func() { go g.check(gat) })
	}
}

// heldHere reports whether a pod the job's snapshot counts as held is held in gat: the
// decision to give held binds back was made on this gathering, not on an earlier one. The
// caller holds g.mu.
func (g *Gate) heldHere(gat *gathering, job *priority.Job) bool {
	for _, p := range job.Pods {
		if _, ok := gat.holds[types.UID(p.UID)]; ok && p.State == priority.PodHeld {
			return true
		}
	}
	return false
}

// expireHold ends one held request that has waited maxHold. When the gang has made progress
// since (a pod not held before arrived within a hold timeout), only this request is
// answered, with an error the scheduler retries; otherwise the gang has failed.
func (g *Gate) expireHold(gat *gathering, h *hold) {
	g.mu.Lock()
	if !g.open(gat) || gat.holds[h.pod.UID] != h {
		g.mu.Unlock()
		return // answered by whoever closed the gathering or took the hold out
	}
	if g.clock.Since(gat.lastNew) >= g.holdTimeout {
		g.mu.Unlock()
		g.expire(gat)
		return
	}
	delete(gat.holds, h.pod.UID)
	held, min := len(gat.holds), gat.min
	h.result <- &gateError{metrics.OutcomeExpired, fmt.Errorf("not bound: held %v while job %s gathered its gang (%d of %d at bind, still growing); the scheduler retries it",
		g.maxHold, gat.job, held, min)}
	g.mu.Unlock()
	g.log.Debug("hold expired while the gang still gathers", zap.String("job", gat.job), zap.Stringer("pod", h.pod), zap.Int("held", held), zap.Int("min", min))
	g.notify()
}

// expire fails every held bind of a gathering that made no progress for a hold timeout
// and starts the job's cool-down.
func (g *Gate) expire(gat *gathering) {
	g.mu.Lock()
	if !g.open(gat) {
		g.mu.Unlock()
		return
	}
	g.closeGathering(gat)
	cs := &coolState{}
	if v, ok := g.failures.Get(gat.job); ok {
		cs = v.(*coolState)
	}
	cs.failures++
	wait := g.coolDown << (cs.failures - 1)
	if wait > g.maxCoolDown || wait <= 0 {
		wait = g.maxCoolDown
	}
	cs.until = g.clock.Now().Add(wait)
	g.failures.SetDefault(gat.job, cs)
	err := &gateError{metrics.OutcomeTimeout, fmt.Errorf("job %s did not gather its gang within %v of its last new member (%d of %d reached bind): nothing of it was bound; it loses the turn for %v",
		gat.job, g.holdTimeout, len(gat.holds), gat.min, wait)}
	// Counted before the answers go: whoever reads the metrics after an answer sees it.
	g.metrics.HoldTimeout(gat.min)
	for _, h := range gat.holds {
		h.result <- err
	}
	g.mu.Unlock()
	g.log.Warn("hold timeout", zap.String("job", gat.job), zap.Int("held", len(gat.holds)), zap.Int("min", gat.min), zap.Duration("coolDown", wait), zap.Int("failures", cs.failures))
	g.notify()
}

// release binds a gathered gang: parameter servers and chiefs first, in parallel, then
// everyone else in parallel. If a first-wave bind fails, the rest are not bound. It waits
// for one of the bind lanes first.
func (g *Gate) release(gat *gathering) {
	holds := make([]*hold, 0, len(gat.holds))
	for _, h := range gat.holds {
		holds = append(holds, h)
	}
	seen := g.settle(gat)
	if g.gaveBack(gat, holds, seen) {
		return
	}
	g.laneWaits.Add(1)
	g.lanes <- struct{}{}
	g.laneWaits.Add(-1)
	defer func() { <-g.lanes }()
	// Asked again: while it waited for a lane, a gathering gang of higher P may have been
	// given its room.
	if g.gaveBack(gat, holds, seen) {
		return
	}
	sort.Slice(holds, func(i, j int) bool {
		if holds[i].role != holds[j].role {
			return holds[i].role < holds[j].role
		}
		if holds[i].index != holds[j].index {
			return holds[i].index < holds[j].index
		}
		return holds[i].pod.Name < holds[j].pod.Name
	})
	if g.evicting(gat.job) {
		g.refuseAll(gat.job, holds, fmt.Errorf("not bound: job %s is being evicted by a preemption; the scheduler retries", gat.job))
		return
	}
	if gone := goneMembers(gat.view, gat.job, holds); len(gone) > 0 {
		// A member was deleted (evicted, say) or replaced while the gang gathered: binding
		// the others would place part of the gang. They come back and gather anew.
		g.refuseAll(gat.job, holds, fmt.Errorf("not bound: %s of job %s left while its gang gathered", strings.Join(gone, ", "), gat.job))
		return
	}
	if bad := badNodes(gat.view, holds); len(bad) > 0 {
		// A node was deleted, cordoned or tainted while the gang gathered: bind none of it
		// there. The scheduler places the pods again, and they gather anew.
		g.refuseAll(gat.job, holds, fmt.Errorf("not bound: job %s was gathered for nodes it may no longer use (%s): nothing of it was bound; the scheduler places its pods again", gat.job, strings.Join(bad, "; ")))
		return
	}
	// Released only now, once the checks passed: until its Bindings are in the informer the
	// view may still call the job Admitted, and a further pod of it passes as a member of a
	// released gang (releasedEnough).
	uids := make(map[string]bool, len(holds))
	for _, h := range holds {
		uids[string(h.pod.UID)] = true
	}
	g.mu.Lock()
	g.released.SetDefault(gat.job, uids)
	g.mu.Unlock()
	split := sort.Search(len(holds), func(i int) bool { return holds[i].role > priority.RoleChief })
	if failed := g.bindAll(gat.job, holds[:split]); len(failed) > 0 {
		g.refuseAll(gat.job, holds[split:], fmt.Errorf("not bound: a parameter server of job %s failed to bind: %w", gat.job, errors.Join(failed...)))
		return
	}
	g.bindAll(gat.job, holds[split:])
	g.failures.Delete(gat.job)
}

// settle waits, at most settleMax, until the view's queue was computed from the gate's
// state as it is now (gat's holds, assumed since it gathered, and every Binding posted
// before), and says whether it was (false also without a view). A gang admitted on
// an older queue, one that had not seen a bind of a moment before (of a pod in no job, of
// another gang), may be about to take room that a gathering job of higher P needs: the newer
// queue tells it to give its binds back (Decision.YieldHeld), and release does, instead of
// binding it and leaving the other never to fit.
func (g *Gate) settle(gat *gathering) (seen bool) {
	if gat.view == nil {
		return false
	}
	want, start := g.seq.Load(), g.clock.Now()
	for gat.view.HoldsSeen() < want {
		if g.clock.Since(start) >= settleMax {
			g.log.Warn("the queue has not caught up with the gate: a gathered gang is released on the queue as it is",
				zap.String("job", gat.job), zap.Duration("waited", settleMax))
			return false
		}
		<-g.clock.After(settlePoll)
	}
	return true
}

// gaveBack gives a gathered gang's binds back when the view's current queue tells it to
// (Decision.YieldHeld), and says whether it did. On a queue not known to have seen the
// gathering (seen false), only a decision about these very held pods counts (heldHere): one
// made for an earlier gathering of the job does not.
func (g *Gate) gaveBack(gat *gathering, holds []*hold, seen bool) bool {
	if gat.view == nil {
		return false
	}
	job, d, ok := gat.view.Job(gat.job)
	if !ok || !d.YieldHeld {
		return false
	}
	if !seen {
		g.mu.Lock()
		here := g.heldHere(gat, job)
		g.mu.Unlock()
		if !here {
			return false
		}
	}
	g.refuseAll(gat.job, holds, fmt.Errorf("not bound: job %s gives its held binds back: %s; the scheduler retries", gat.job, d.Blocker))
	g.log.Info("gathered gang given back at release", zap.String("job", gat.job), zap.Int("held", len(holds)), zap.String("why", d.Blocker))
	return true
}

// refuseAll answers every held bind of holds with err, binding none; they are taken out of
// the job's released set first, so that a retry cannot pass as a member of a released gang,
// and are no longer assumed on their nodes.
func (g *Gate) refuseAll(job string, holds []*hold, err error) {
	failed := make([]error, 0, len(holds))
	for _, h := range holds {
		failed = append(failed, &unbound{uid: h.pod.UID, err: err})
	}
	g.unrelease(job, failed)
	g.unassume(holds...)
	for _, h := range holds {
		h.result <- &gateError{metrics.OutcomeRefused, err}
	}
}

// evicting reports whether a preemption is evicting the job.
func (g *Gate) evicting(job string) bool { return g.victims != nil && g.victims.Evicting(job) }

// goneMembers names the held pods that the view no longer has pending in the job: deleted,
// being deleted, replaced by a pod of the same name, or bound meanwhile by someone else.
func goneMembers(view JobView, key string, holds []*hold) []string {
	if view == nil {
		return nil
	}
	job, _, ok := view.Job(key)
	state := map[string]priority.PodState{}
	if ok {
		for _, p := range job.Pods {
			state[p.UID] = p.State
		}
	}
	var gone []string
	for _, h := range holds {
		if h.pod.UID == "" {
			continue // a bind without a UID: nothing to check it by
		}
		if st, ok := state[string(h.pod.UID)]; !ok || st == priority.PodBound {
			gone = append(gone, h.pod.String())
		}
	}
	return gone
}

// badNodes says, for each held pod that may not be bound to its node now, why (the view's
// BindCheck: the node gone, cordoned, not ready, tainted against the pod, the pod bound
// elsewhere).
func badNodes(view JobView, holds []*hold) []string {
	if view == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseCheckTimeout)
	defer cancel()
	var bad []string
	for _, h := range holds {
		if err := view.BindCheck(ctx, h.pod, h.node); err != nil {
			bad = append(bad, err.Error())
		}
	}
	return bad
}

// unbound is the error of one held pod that was not bound.
type unbound struct {
	uid types.UID
	err error
}

func (u *unbound) Error() string { return u.err.Error() }

func (u *unbound) Unwrap() error { return u.err }

// unrelease takes the pods that were not bound out of the job's released set: the
// scheduler retries them, and they must gather again rather than pass as members of a
// released gang (releasedEnough), which could bind a gang's workers without its PS.
func (g *Gate) unrelease(job string, failed []error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.released.Get(job)
	if !ok {
		return
	}
	uids := maps.Clone(v.(map[string]bool))
	for _, err := range failed {
		var u *unbound
		if errors.As(err, &u) {
			delete(uids, string(u.uid))
		}
	}
	g.released.SetDefault(job, uids)
}

// bindAll posts the Bindings in parallel and answers each held request; a pod not bound is
// taken out of the job's released set before its answer. It returns the errors of the pods
// not bound (each an *unbound).
func (g *Gate) bindAll(job string, holds []*hold) []error {
	errs := make([]error, len(holds))
	var wg sync.WaitGroup
	for i, h := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.reassume(h.pod, h.node)
			if err := g.post(context.Background(), h.pod, h.node); err != nil {
				errs[i] = &unbound{uid: h.pod.UID, err: err}
				g.unrelease(job, errs[i:i+1])
				g.unassume(h)
				h.result <- err
				return
			}
			g.reassume(h.pod, h.node)
			h.result <- nil
		}()
	}
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	return failed
}

// hasPod reports whether the job has the pod of this UID.
func hasPod(job *priority.Job, uid types.UID) bool {
	for _, p := range job.Pods {
		if p.UID == string(uid) {
			return true
		}
	}
	return false
}

// releasedEnough reports whether a job whose snapshot is not yet Running has, counting the
// pods the gate released a moment ago (their Bindings may not be in the informer yet), at
// least its minimum bound. Only the same pods count: a job deleted and created anew is gated.
func (g *Gate) releasedEnough(job *priority.Job, d *priority.Decision) bool {
	v, ok := g.released.Get(job.Key)
	if !ok {
		return false
	}
	uids := v.(map[string]bool)
	n := d.Bound
	for _, p := range job.Pods {
		if p.State != priority.PodBound && uids[p.UID] {
			n++
		}
	}
	return n >= d.MinMember
}

// Placed maps the UID of every pod the gate holds or binds to its node: the held binds and
// the pods assumed (their Binding posted, or about to be, within assumeFor), held of them
// held binds. seq is the count of changes the map has seen (HoldsSeen's currency). It
// forgets the assumptions that ran out.
func (g *Gate) Placed() (nodes map[types.UID]string, held int, seq uint64) {
	seq = g.seq.Load() // first: the map built after it has at least the changes it counts
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	nodes = make(map[types.UID]string, len(g.assumed))
	for uid, a := range g.assumed {
		if !now.Before(a.until) {
			delete(g.assumed, uid)
			continue
		}
		nodes[uid] = a.node
	}
	for _, gat := range g.gatherings {
		for uid, h := range gat.holds {
			nodes[uid] = h.node
			held++
		}
	}
	return nodes, held, seq
}

// CoolDowns maps each cooling job to the end of its cool-down.
func (g *Gate) CoolDowns() map[string]time.Time {
	now := g.clock.Now()
	out := map[string]time.Time{}
	for key, item := range g.failures.Items() {
		if cs := item.Object.(*coolState); cs.until.After(now) {
			out[key] = cs.until
		}
	}
	return out
}
