package extender

import (
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/priority"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

func TestRetryOf(t *testing.T) {
	snap := &Snapshot{podJob: map[types.UID]string{"u1": "default/a"}, nameJob: map[string]string{"default/p1": "default/a"}}
	seen := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default", UID: "u1"}}
	unseen := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: "default", UID: "u2"}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		d    priority.Decision
		want Retry
	}{
		{"behind another job", seen, priority.Decision{Position: 2}, RetryIfViewLags},
		{"next in the queue", seen, priority.Decision{Position: 1}, RetryIfViewLags},
		{"the pod is not in the view yet", unseen, priority.Decision{Position: 2}, RetryAfterBackoff},
		{"cooling down", seen, priority.Decision{Position: 1, CoolingDown: true}, RetryAfterBackoff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryOf(snap, tt.pod, &tt.d); got != tt.want {
				t.Errorf("retryOf = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestParkedPods walks one pod through the visits kube-scheduler makes: parked, woken with
// no event received meanwhile (one retry), back again with none (parked), then after an
// event (parked), and on a stale view (a retry).
func TestParkedPods(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}}
	noUID := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "default"}}
	lags := func(events uint64) Admission { return Admission{Retry: RetryIfViewLags, Events: events} }
	p := newParkedPods()
	steps := []struct {
		name  string
		pod   *corev1.Pod
		adm   Admission
		retry bool
	}{
		{"first visit: parked", pod, lags(7), false},
		{"woken with no event received: the view lags, one retry", pod, lags(7), true},
		{"back with still none after the retry: parked", pod, lags(7), false},
		{"and again: stays parked", pod, lags(7), false},
		{"woken after an event the view received: parked", pod, lags(9), false},
		{"woken with none received since: one retry again", pod, lags(9), true},
		{"a change the decision was not made on: a retry", pod, Admission{Retry: RetryIfViewLags, Events: 10, Stale: true}, true},
		{"a cool-down: always a retry", pod, Admission{Retry: RetryAfterBackoff, Events: 10}, true},
		{"a pod without a UID: parked on its first visit", noUID, lags(9), false},
		{"and woken on the same view: a retry", noUID, lags(9), true},
	}
	for _, s := range steps {
		if got := p.retry(s.pod, s.adm); got != s.retry {
			t.Fatalf("%s: retry = %t, want %t", s.name, got, s.retry)
		}
	}
}

// TestAdmitSaysWhenTheViewLags: a waiting pod's admission reports the events the view has
// received and whether a change it took in is not in the snapshot yet.
func TestAdmitSaysWhenTheViewLags(t *testing.T) {
	pods := loadfixture.Pods(loadfixture.Spec{Jobs: 1, PodsPerJob: 3})
	for _, p := range pods {
		p.Labels[loadfixture.MinMemberLabel] = "4" // one pod short: the job waits
	}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: DefaultConfig()})
	fillStores(t, c, loadfixture.Nodes(loadfixture.Spec{Nodes: 2}), pods[:2])
	c.recompute(time.Now()) // the first recompute reads the informer stores
	adm := c.Admit(pods[0])
	if adm.OK || !adm.Queued || adm.Stale {
		t.Fatalf("after a recompute: %+v, want waiting, not stale", adm)
	}
	c.onPod(pods[2], false) // taken into the index; the snapshot is not recomputed yet
	if lag := c.Admit(pods[0]); !lag.Stale || lag.Events != adm.Events+1 {
		t.Errorf("before the recompute: %+v, want stale with one more event than %d", lag, adm.Events)
	}
	c.recompute(time.Now())
	if adm := c.Admit(pods[0]); adm.Stale {
		t.Errorf("after the recompute: %+v, want not stale", adm)
	}
}
