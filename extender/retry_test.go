package extender

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/priority"
)

func TestRetryOf(t *testing.T) {
	snap := &Snapshot{podJob: map[types.UID]string{"u1": "default/a"}, nameJob: map[string]string{"default/p1": "default/a"}}
	seen := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default", UID: "u1"}}
	unseen := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: "default", UID: "u2"}}
	behind := priority.Decision{Phase: priority.PhaseWaiting, Position: 2, Pods: 3, MinMember: 3}
	tests := []struct {
		name string
		pod  *corev1.Pod
		d    func(d priority.Decision) priority.Decision
		want Retry
	}{
		{"behind another job: parked until an event", seen, func(d priority.Decision) priority.Decision { return d }, RetryOnEvent},
		{"the pod is not in the view yet", unseen, func(d priority.Decision) priority.Decision { return d }, RetryAfterBackoff},
		{"cooling down", seen, func(d priority.Decision) priority.Decision { d.CoolingDown = true; return d }, RetryAfterBackoff},
		{"next in the queue", seen, func(d priority.Decision) priority.Decision { d.Position = 1; return d }, RetryBounded},
		{"gang incomplete in the view", seen, func(d priority.Decision) priority.Decision { d.Pods = 2; return d }, RetryBounded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.d(behind)
			if got := retryOf(snap, tt.pod, &d); got != tt.want {
				t.Errorf("retryOf = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestRetryBudget(t *testing.T) {
	b := newRetryBudget()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "default"}}
	for i := range maxBoundedRetries {
		if !b.allow(pod, RetryBounded) {
			t.Fatalf("bounded retry %d refused, want %d allowed", i+1, maxBoundedRetries)
		}
	}
	if b.allow(pod, RetryBounded) {
		t.Errorf("bounded retry %d allowed, want the pod parked", maxBoundedRetries+1)
	}
	if !b.allow(pod, RetryAfterBackoff) {
		t.Error("a retry after backoff was refused once the bounded ones were used up")
	}
	if b.allow(pod, RetryOnEvent) {
		t.Error("a pod parked until an event was answered with a retry")
	}
	if !b.allow(other, RetryBounded) {
		t.Error("another pod (no UID) was refused its first bounded retry")
	}
}
