package extender

import (
	"time"

	gocache "github.com/patrickmn/go-cache"
	corev1 "k8s.io/api/core/v1"

	"github.com/cps-extender/cps-extender/priority"
)

// Retry is how kube-scheduler should come back to a pod the filter turns away.
//
// A pod every node rejects is parked by kube-scheduler until the next cluster event it
// watches (a pod or node added, changed, deleted), which then wakes it at once. That suits
// a job that waits behind another: the other's binds and deletions are such events. It
// does not suit a wait that ends on a timer, nor a wake-up by an event that the extender's
// informers have not delivered yet while kube-scheduler's already have: the pod is turned
// away on the old view, parked again, and nothing wakes it when the view catches up. For
// those the filter answers with an error instead, which kube-scheduler retries after its
// backoff (1 s in the shipped configs).
type Retry int

const (
	// RetryIfViewLags parks the pod until the next cluster event unless the view lags:
	// it has taken in a change the decision was not made on, or it has received no event
	// at all since it last parked the pod, so kube-scheduler woke the pod for an event the
	// view has not seen yet (then one retry per such wake-up).
	RetryIfViewLags Retry = iota
	// RetryAfterBackoff asks for a retry after the backoff, every time: the wait ends on a
	// timer (a cool-down) or when the view sees the pod or its job.
	RetryAfterBackoff
)

// retryOf classifies the wait of a pod of a waiting job.
func retryOf(snap *Snapshot, pod *corev1.Pod, d *priority.Decision) Retry {
	if _, seen := snap.JobOf(pod.UID, pod.Namespace, pod.Name); !seen || d.CoolingDown {
		return RetryAfterBackoff
	}
	return RetryIfViewLags
}

// parkedFor is how long the filter remembers where it parked a pod.
const parkedFor = 10 * time.Minute

// parkedPods remembers, per pod, how many events the view had received when the filter
// last turned the pod away, and whether a retry was given at that count already.
type parkedPods struct {
	at *gocache.Cache // pod UID (or namespace/name) -> parkedAt
}

type parkedAt struct {
	events  uint64
	retried bool
}

func newParkedPods() *parkedPods {
	return &parkedPods{at: gocache.New(parkedFor, parkedFor)}
}

// retry reports whether the filter should answer pod, turned away with adm, with a retry
// rather than park it, and remembers the answer. kube-scheduler sends one pod's filter
// calls one at a time, so the read and the write need no lock of their own.
func (p *parkedPods) retry(pod *corev1.Pod, adm Admission) bool {
	if adm.Retry == RetryAfterBackoff || adm.Stale {
		return true
	}
	key := string(pod.UID)
	if key == "" {
		key = pod.Namespace + "/" + pod.Name
	}
	next := parkedAt{events: adm.Events}
	if v, found := p.at.Get(key); found {
		if last := v.(parkedAt); last.events == adm.Events {
			// Back with no event received since it was parked: woken by an event the view
			// lacks, unless the retry for this count was given already.
			next.retried = true
			p.at.SetDefault(key, next)
			return !last.retried
		}
	}
	p.at.SetDefault(key, next)
	return false
}
