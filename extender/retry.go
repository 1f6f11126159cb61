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
// watches (a pod or node added, changed, deleted). That suits a job that waits behind
// another: the other's binds and deletions are such events. It does not suit a wait that
// ends on a timer, or with a change the extender's informers have not delivered yet while
// kube-scheduler's already have: nothing wakes the parked pod, and a gang whose other
// members reached bind then times out. For those waits the filter answers with an error
// instead, which kube-scheduler retries after its backoff (1 s in the shipped configs).
type Retry int

const (
	// RetryOnEvent parks the pod until the next cluster event: the wait ends with one.
	RetryOnEvent Retry = iota
	// RetryAfterBackoff asks for a retry after the backoff, every time: the wait ends on a
	// timer (a cool-down) or when the view catches up (a pod or job it has not seen).
	RetryAfterBackoff
	// RetryBounded asks for a retry after the backoff a bounded number of times, then
	// parks: the wait may end with a change the view has not seen yet (the job is next in
	// the queue, or its gang is not complete in the view).
	RetryBounded
)

// retryOf classifies the wait of a pod of a waiting job.
func retryOf(snap *Snapshot, pod *corev1.Pod, d *priority.Decision) Retry {
	if _, seen := snap.JobOf(pod.UID, pod.Namespace, pod.Name); !seen || d.CoolingDown {
		return RetryAfterBackoff
	}
	if d.Position == 1 || d.Pods < d.MinMember {
		return RetryBounded
	}
	return RetryOnEvent
}

// Bounded retries per pod within retryWindow: at a 1 s backoff, about 20 s of retries,
// enough for a lagging informer, few enough that a job that really waits is parked (and
// seen as Unschedulable, not as a scheduler error) soon.
const (
	maxBoundedRetries = 20
	retryWindow       = 10 * time.Minute
)

// retryBudget counts the bounded retries of each pod.
type retryBudget struct {
	used *gocache.Cache // pod UID (or namespace/name) -> int
}

func newRetryBudget() *retryBudget {
	return &retryBudget{used: gocache.New(retryWindow, retryWindow)}
}

// allow reports whether pod may be answered with a retry of kind r, and counts it.
func (b *retryBudget) allow(pod *corev1.Pod, r Retry) bool {
	switch r {
	case RetryAfterBackoff:
		return true
	case RetryBounded:
	default:
		return false
	}
	key := string(pod.UID)
	if key == "" {
		key = pod.Namespace + "/" + pod.Name
	}
	// Add fails while the key is present; then the count goes up by one.
	if b.used.Add(key, 1, gocache.DefaultExpiration) == nil {
		return true
	}
	n, err := b.used.IncrementInt(key, 1)
	return err == nil && n <= maxBoundedRetries
}
