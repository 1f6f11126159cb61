package scheduler

import (
	"sync"
	"time"

	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/metrics"
	gocache "github.com/patrickmn/go-cache"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// The reasons of the Events a pod gets while its job is in the queue: it waits for its
// turn, or it cannot fit even with no other job's pods on the nodes.
const (
	ReasonWaitingForTurn = "WaitingForTurn"
	ReasonUnschedulable  = "GangUnschedulable"
)

// EventRecorder is the part of client-go's record.EventRecorder the extender uses.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// NewAPIEventRecorder returns a recorder that posts core/v1 Events through client, named
// after component, and a function that stops it. Recording is asynchronous: a full queue
// drops events rather than block the caller.
func NewAPIEventRecorder(client kubernetes.Interface, component string) (EventRecorder, func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), b.Shutdown
}

// WaitingEvents gives a job that waits for its turn a Normal WaitingForTurn Event, on one of
// its pods, whose message is the job's whole reason (its place in the queue, its P, what it
// waits for), at most once per interval per job: the scheduler retries a waiting pod every
// second or so, and a gang has many pods, and none of that must become an Event each. A job
// that is unschedulable gets a Warning GangUnschedulable Event instead.
type WaitingEvents struct {
	recorder EventRecorder
	metrics  *metrics.Metrics
	interval time.Duration
	clock    clock.PassiveClock

	mu   sync.Mutex     // makes the check and the mark of NotifyWaiting one step
	sent *gocache.Cache // pod UID (or namespace/name) -> time.Time of its last Event
}

// NewWaitingEvents builds the notifier; interval is the least time between two Events on
// the same pod, measured on clk (nil means the real clock).
func NewWaitingEvents(recorder EventRecorder, interval time.Duration, metrics *metrics.Metrics, clk clock.PassiveClock) *WaitingEvents {
	if clk == nil {
		clk = clock.RealClock{}
	}
	// The clock decides; go-cache's own expiry only frees the memory of pods long gone.
	return &WaitingEvents{recorder: recorder, metrics: metrics, interval: interval, clock: clk,
		sent: gocache.New(2*interval, 2*interval)}
}

// warningInterval is how long after a Warning (view.Warning) its key gets no other.
const warningInterval = time.Hour

// Warn gives pod a Warning Event for something its user most likely did not mean (a
// workload's label in no gang, a label the extender ignores), once per warning key an hour:
// once per job, not per pod or retry.
func (w *WaitingEvents) Warn(pod *corev1.Pod, warning view.Warning) {
	key := "\x00warning\x00" + warning.Reason + "\x00" + warning.Key
	w.mu.Lock()
	now := w.clock.Now()
	last, seen := w.sent.Get(key)
	fresh := !seen || now.Sub(last.(time.Time)) >= warningInterval
	if fresh {
		w.sent.Set(key, now, warningInterval)
	}
	w.mu.Unlock()
	if fresh {
		w.recorder.Eventf(pod, corev1.EventTypeWarning, warning.Reason, "%s", warning.Message)
	}
}

// NotifyWaiting records the Event unless the pod's job had one within the interval: one
// Event per job, on the pod it is first told of, so that a waiting gang of thousands of
// pods writes one Event an interval, not thousands. A pod of no known job is limited on its
// own.
func (w *WaitingEvents) NotifyWaiting(pod *corev1.Pod, adm view.Admission) {
	key := "job\x00" + adm.Job
	switch {
	case adm.Job != "":
	case pod.UID != "":
		key = string(pod.UID)
	default:
		key = pod.Namespace + "/" + pod.Name
	}
	if adm.Unschedulable { // a change between waiting and unschedulable is news at once
		key += "\x00unschedulable"
	}
	if !w.mark(key) {
		w.metrics.WaitingEvent(false)
		return
	}
	w.metrics.WaitingEvent(true)
	msg := adm.Explain
	if msg == "" {
		msg = adm.Reason
	}
	if adm.Unschedulable {
		w.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonUnschedulable, "%s", msg)
		return
	}
	w.recorder.Eventf(pod, corev1.EventTypeNormal, ReasonWaitingForTurn, "%s", msg)
}

// mark notes an Event for key now and reports true, unless key had one within the interval.
func (w *WaitingEvents) mark(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	if last, ok := w.sent.Get(key); ok && now.Sub(last.(time.Time)) < w.interval {
		return false
	}
	w.sent.SetDefault(key, now)
	return true
}
