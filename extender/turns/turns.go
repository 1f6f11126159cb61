// Package turns brings back the pods the filter turned away once their job's turn comes:
// kube-scheduler parks a rejected pod until a cluster event, and a turn that passes by time
// alone is no event, so Turns writes one (an annotation on the pod). It reads the view's
// snapshots and imports view, gang, metrics and the model.
package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/gang"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/priority"
)

// TurnAnnotation is the annotation the extender writes on a pod it turned away once its
// job's turn comes; its value is when (RFC 3339). The write is what brings the pod back.
const TurnAnnotation = "cps-extender.io/turn"

// PodNudger writes to a pod so that kube-scheduler looks at it again.
type PodNudger interface {
	Nudge(ctx context.Context, pod gang.PodRef, at time.Time) error
}

// APINudger nudges pods through the API server: a merge patch that sets TurnAnnotation,
// refused when the pod of that name is not the one with that UID any more.
type APINudger struct {
	client  kubernetes.Interface
	timeout time.Duration
}

// NewAPINudger returns a nudger that patches through client, each call bounded by timeout.
func NewAPINudger(client kubernetes.Interface, timeout time.Duration) *APINudger {
	return &APINudger{client: client, timeout: timeout}
}

// Nudge sets the pod's TurnAnnotation to at.
func (n *APINudger) Nudge(ctx context.Context, pod gang.PodRef, at time.Time) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pod.UID, // a precondition: the same name may be a new pod by now
		"annotations": map[string]string{TurnAnnotation: at.UTC().Format(time.RFC3339Nano)},
	}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	_, err = n.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Turns brings back to kube-scheduler the pods the filter turned away, once their job's
// turn comes, whatever made it come.
//
// kube-scheduler parks a pod that every node rejected until a cluster event it watches. For
// a pod an extender rejected, any event counts (its rejectors include the "Extender"
// pseudo-plugin, which registers for every event: kube-scheduler v1.37 schedule_one.go,
// framework/runtime/framework.go), among them an update of the pod itself. Many turns come
// with no such event: the gang's last pod is created (another unscheduled pod's creation
// requeues nobody), a cool-down ends, the wait term or the starvation bound reorders the
// queue, the model is reloaded, or the extender's view catches up with an event that woke
// the pod too early. So the filter records each pod it turns away, and when a published
// snapshot gives the job the turn (Admitted, or Running), Turns writes TurnAnnotation on
// the pod: one API write per parked pod per turn, and no polling. kube-scheduler moves the
// pod to its backoff queue, and it is tried again when that ends (10 s at most, shipped), or
// at once when the scheduler has nothing else to do.
//
// What it records is soft state, as the gate's: after a restart, the pods kube-scheduler
// had already turned away (PodScheduled False) are taken as parked (see Seed).
type Turns struct {
	log     *zap.Logger
	nudger  PodNudger
	metrics *metrics.Metrics
	clock   clock.WithTicker
	// minInterval is the least time between two nudges of one pod; delay how long after
	// the turn a pod is nudged.
	minInterval, delay time.Duration

	mu      sync.Mutex
	current *view.Snapshot                    // the newest published snapshot
	parked  map[types.UID]parkedPod           // pods turned away, by UID
	byJob   map[string]map[types.UID]struct{} // the same, by job key
	nudged  map[types.UID]time.Time           // last nudge of each pod, for minInterval
	// queued is the pods queued to be nudged: true until the filter sees the pod again
	// (kube-scheduler came back by itself) or it is nudged.
	queued map[types.UID]bool

	queue workqueue.TypedRateLimitingInterface[gang.PodRef]
	sent  atomic.Uint64

	// ungater lifts gang.TurnGate from pods whose job has the turn (nil: gates are left
	// alone); lifts is the pods queued for it, lifting the same by UID until the view sees
	// the gate gone, lifted how many lifts were written.
	ungater PodUngater
	lifts   workqueue.TypedRateLimitingInterface[gang.PodRef]
	lifting map[types.UID]struct{}
	lifted  atomic.Uint64
	// waiting is told why gated pods wait (nil: nobody), at most every explainEvery, the
	// last time at explainedAt.
	waiting     WaitingNotifier
	explainedAt time.Time
	leading     func() bool
}

// parkedPod is a pod the filter turned away.
type parkedPod struct {
	ref gang.PodRef
	job string
}

// Options are the dependencies and settings of Turns.
type Options struct {
	Log    *zap.Logger
	Nudger PodNudger
	// Ungater lifts gang.TurnGate from the pods of jobs that have the turn; nil leaves
	// scheduling gates alone.
	Ungater PodUngater
	// Waiting is told why the gated pods of waiting jobs wait; nil tells nobody.
	Waiting WaitingNotifier
	// Metrics counts the nudges; nil means none.
	Metrics *metrics.Metrics
	// Clock is the clock; nil means the real one.
	Clock clock.WithTicker
	// MinInterval is the least time between two nudges of one pod (default 1 s): a job
	// whose turn comes and goes cannot make a pod a write hotspot.
	MinInterval time.Duration
	// Delay is how long after its job's turn a pod is nudged (0: at once). When the turn
	// came with a cluster event kube-scheduler requeues the pod by itself; a pod the filter
	// lets through meanwhile needs no nudge.
	Delay time.Duration
	// Leading says whether this replica leads: only the leader nudges, lifts gates and
	// explains gated pods (nil: always). A follower keeps its records, for when it leads.
	Leading func() bool
}

// New builds Turns; Run starts its workers.
func New(o Options) *Turns {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MinInterval <= 0 {
		o.MinInterval = time.Second
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[gang.PodRef](100*time.Millisecond, 10*time.Second)
	return &Turns{
		log: o.Log, nudger: o.Nudger, metrics: o.Metrics, clock: o.Clock, minInterval: o.MinInterval, delay: o.Delay,
		parked: map[types.UID]parkedPod{}, byJob: map[string]map[types.UID]struct{}{}, nudged: map[types.UID]time.Time{},
		queued: map[types.UID]bool{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[gang.PodRef]{
			Name: "turns", Clock: o.Clock,
		}),
		ungater: o.Ungater, lifting: map[types.UID]struct{}{}, waiting: o.Waiting, leading: o.Leading,
		lifts: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[gang.PodRef](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[gang.PodRef]{Name: "turn-gates", Clock: o.Clock}),
	}
}

// hasTurn reports whether a job key has the turn (or runs) in snap.
func hasTurn(snap *view.Snapshot, job string) bool {
	if snap == nil {
		return false
	}
	d, ok := snap.Queue.Lookup(job)
	return ok && (d.Phase == priority.PhaseAdmitted || d.Phase == priority.PhaseRunning)
}

// Parked records that the filter turned pod away while its job waited, so kube-scheduler
// parks it. It reports true, and records nothing, when the newest published snapshot gives
// the job the turn already: the filter decided on an older one and should answer with a
// retry instead. A nil Turns records nothing.
func (t *Turns) Parked(pod *corev1.Pod, job string) (turnCame bool) {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if hasTurn(t.current, job) {
		return true
	}
	t.park(gang.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, job)
	return false
}

// park records one pod. t.mu is held.
func (t *Turns) park(ref gang.PodRef, job string) {
	if old, ok := t.parked[ref.UID]; ok && old.job != job {
		t.forget(ref.UID)
	}
	t.parked[ref.UID] = parkedPod{ref: ref, job: job}
	pods := t.byJob[job]
	if pods == nil {
		pods = map[types.UID]struct{}{}
		t.byJob[job] = pods
	}
	pods[ref.UID] = struct{}{}
}

// forget drops one pod's record. t.mu is held.
func (t *Turns) forget(uid types.UID) {
	p, ok := t.parked[uid]
	if !ok {
		return
	}
	delete(t.parked, uid)
	if pods := t.byJob[p.job]; pods != nil {
		delete(pods, uid)
		if len(pods) == 0 {
			delete(t.byJob, p.job)
		}
	}
}

// Passed forgets a pod the filter let through: it is not parked.
func (t *Turns) Passed(pod *corev1.Pod) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.parked) > 0 {
		t.forget(pod.UID)
	}
	if t.queued[pod.UID] {
		t.queued[pod.UID] = false
	}
}

// Seed takes pods as parked that kube-scheduler turned away before this process started
// (their PodScheduled condition is False), so that their turn reaches them too.
func (t *Turns) Seed(pods []view.TurnedAway) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range pods {
		t.park(p.Pod, p.Job)
	}
	t.release(t.current)
}

// Published takes a newly published snapshot: the parked pods of every job it gives the
// turn are queued to be nudged, and the records of jobs that are gone are dropped. The
// cluster view calls it after each publish, from one goroutine.
func (t *Turns) Published(snap *view.Snapshot) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.current
	t.current = snap
	if t.leading != nil && !t.leading() {
		return
	}
	t.adoptTurnedAway(prev, snap)
	t.release(snap)
	t.queueLifts(snap)
	t.warn(snap)
}

// warn sends the snapshot's Warnings (labels the extender ignores) as Events: a pod no node
// has room for never reaches the filter, which tells the others. The notifier limits each
// warning key to one Event a while. t.mu is held.
func (t *Turns) warn(snap *view.Snapshot) {
	if t.waiting == nil {
		return
	}
	for _, w := range snap.Warnings() {
		t.waiting.Warn(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.Pod.Namespace, Name: w.Pod.Name, UID: w.Pod.UID}}, w.Warning)
	}
}

// adoptTurnedAway takes as parked the pods kube-scheduler turned away (the view's record
// of them, whichever replica's filter turned them away) of every job snap gives the turn
// that prev did not: their turn reaches them from the leader also when another replica
// answered their filter. t.mu is held.
func (t *Turns) adoptTurnedAway(prev, snap *view.Snapshot) {
	if snap == nil || snap.Queue == nil {
		return
	}
	for _, d := range snap.Queue.Order {
		if d.Phase != priority.PhaseAdmitted || hasTurn(prev, d.Key) {
			continue
		}
		for _, ref := range snap.TurnedAwayOf(d.Key) {
			if _, queued := t.queued[ref.UID]; !queued {
				t.park(ref, d.Key)
			}
		}
	}
}

// release queues the parked pods of the jobs that have the turn in snap. t.mu is held.
func (t *Turns) release(snap *view.Snapshot) {
	if snap == nil {
		return
	}
	for job, pods := range t.byJob {
		if _, _, exists := snap.Job(job); !exists {
			for uid := range pods {
				delete(t.parked, uid)
			}
			delete(t.byJob, job)
			continue
		}
		if !hasTurn(snap, job) {
			continue
		}
		if ce := t.log.Check(zap.DebugLevel, "turn came: nudging the pods the filter turned away"); ce != nil {
			ce.Write(zap.String("job", job), zap.Int("pods", len(pods)))
		}
		for uid := range pods {
			if t.delay > 0 {
				t.queue.AddAfter(t.parked[uid].ref, t.delay)
			} else {
				t.queue.Add(t.parked[uid].ref)
			}
			t.queued[uid] = true
			delete(t.parked, uid)
		}
		delete(t.byJob, job)
	}
}

// Run nudges queued pods, and lifts queued gates, with workers goroutines each until ctx
// ends.
func (t *Turns) Run(ctx context.Context, workers int) {
	go func() {
		<-ctx.Done()
		t.queue.ShutDown()
		t.lifts.ShutDown()
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for t.next(ctx) {
			}
		})
		wg.Go(func() {
			for t.nextLift(ctx) {
			}
		})
	}
	wg.Wait()
}

// Nudges is how many nudges were written.
func (t *Turns) Nudges() uint64 { return t.sent.Load() }

// maxNudgeRetries bounds the retries of a nudge that failed for a reason other than the
// pod being gone.
const maxNudgeRetries = 5

// next nudges one queued pod; false when the queue is shut down.
func (t *Turns) next(ctx context.Context) bool {
	ref, quit := t.queue.Get()
	if quit {
		return false
	}
	defer t.queue.Done(ref)
	t.mu.Lock()
	current := t.current
	_, parkedAgain := t.parked[ref.UID]
	last, nudgedBefore := t.nudged[ref.UID]
	due := t.queued[ref.UID]
	delete(t.queued, ref.UID)
	t.mu.Unlock()
	if !due || parkedAgain || !stillPending(current, ref) {
		// Back in the filter by itself, turned away again since (its next turn will
		// queue it anew), or no longer waiting for a node: nothing to bring back.
		t.queue.Forget(ref)
		t.metrics.TurnNudge(metrics.NudgeSkipped)
		return true
	}
	now := t.clock.Now()
	if wait := last.Add(t.minInterval).Sub(now); nudgedBefore && wait > 0 {
		t.mu.Lock()
		t.queued[ref.UID] = true
		t.mu.Unlock()
		t.queue.AddAfter(ref, wait)
		return true
	}
	err := t.nudger.Nudge(ctx, ref, now)
	switch {
	case err == nil:
		t.queue.Forget(ref)
		t.mu.Lock()
		t.nudged[ref.UID] = now
		t.pruneNudged(now)
		t.mu.Unlock()
		t.sent.Add(1)
		t.metrics.TurnNudge(metrics.NudgeSent)
		t.log.Debug("nudged", zap.Stringer("pod", ref))
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) || errors.Is(err, context.Canceled):
		// Gone, or another pod of that name: nothing to bring back.
		t.queue.Forget(ref)
		t.metrics.TurnNudge(metrics.NudgeSkipped)
	case t.queue.NumRequeues(ref) < maxNudgeRetries:
		t.mu.Lock()
		t.queued[ref.UID] = true
		t.mu.Unlock()
		t.queue.AddRateLimited(ref)
		t.metrics.TurnNudge(metrics.NudgeFailed)
	default:
		t.queue.Forget(ref)
		t.metrics.TurnNudge(metrics.NudgeFailed)
		t.log.Warn("nudging a pod whose turn came failed; it comes back with the next cluster event",
			zap.Stringer("pod", ref), zap.Error(err))
	}
	return true
}

// pruneNudged drops nudge times older than minInterval, past which they decide nothing.
// t.mu is held.
func (t *Turns) pruneNudged(now time.Time) {
	if len(t.nudged) < 1024 {
		return
	}
	for uid, at := range t.nudged {
		if now.Sub(at) >= t.minInterval {
			delete(t.nudged, uid)
		}
	}
}

// stillPending reports whether snap has the pod pending (no node, no held bind) in a job
// that has the turn.
func stillPending(snap *view.Snapshot, ref gang.PodRef) bool {
	key, ok := snap.JobOf(ref.UID, ref.Namespace, ref.Name)
	if !ok || !hasTurn(snap, key) {
		return false
	}
	job, _, _ := snap.Job(key)
	for i := range job.Pods {
		if job.Pods[i].UID == string(ref.UID) {
			return job.Pods[i].State == priority.PodPending
		}
	}
	return false
}

// String names a parked pod in logs.
func (p parkedPod) String() string { return fmt.Sprintf("%s (job %s)", p.ref, p.job) }
