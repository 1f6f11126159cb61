package extender

import (
	"time"

	"github.com/cps-extender/cps-extender/extender/metrics"
	gocache "github.com/patrickmn/go-cache"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
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

// WaitingEvents gives a pod that waits for its job's turn a Normal WaitingForTurn Event
// whose message is the job's whole reason (its place in the queue, its P, what it waits
// for), at most once per interval per pod: the scheduler
// retries a waiting pod every second or so, and each retry must not become an Event. A pod
// of an unschedulable job gets a Warning GangUnschedulable Event instead.
type WaitingEvents struct {
	recorder EventRecorder
	metrics  *metrics.Metrics
	sent     *gocache.Cache // pod UID (or namespace/name) -> struct{}, for interval
}

// NewWaitingEvents builds the notifier; interval is the least time between two Events on
// the same pod.
func NewWaitingEvents(recorder EventRecorder, interval time.Duration, metrics *metrics.Metrics) *WaitingEvents {
	return &WaitingEvents{recorder: recorder, metrics: metrics, sent: gocache.New(interval, 2*interval)}
}

// NotifyWaiting records the Event unless the pod had one within the interval.
func (w *WaitingEvents) NotifyWaiting(pod *corev1.Pod, adm Admission) {
	key := string(pod.UID)
	if key == "" {
		key = pod.Namespace + "/" + pod.Name
	}
	if adm.Unschedulable { // a change between waiting and unschedulable is news at once
		key += "\x00unschedulable"
	}
	// Add fails while the key is present: the check and the mark are one atomic step.
	if err := w.sent.Add(key, struct{}{}, gocache.DefaultExpiration); err != nil {
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
