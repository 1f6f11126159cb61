package scheduler

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/internal/fixture"

	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeRecorder records the Events it is asked to send, as "pod type reason: message".
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (f *fakeRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pod := obj.(*corev1.Pod)
	f.events = append(f.events, fmt.Sprintf("%s %s %s: %s", podKey(pod), eventtype, reason, fmt.Sprintf(messageFmt, args...)))
}

func waitingPod(name, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(uid)}}
}

func TestWaitingEventsAreRateLimitedPerJob(t *testing.T) {
	const reason = "job ml/b waits for its turn: 2nd of 2, behind ml/a (P=0.55); it does not fit: ..."
	type note struct {
		pod *corev1.Pod
		job string
	}
	tests := []struct {
		name       string
		notify     []note
		want       []string
		suppressed int
	}{
		{
			name:   "one pod retried many times gets one event",
			notify: []note{{waitingPod("b-0", "u0"), "ml/b"}, {waitingPod("b-0", "u0"), "ml/b"}, {waitingPod("b-0", "u0"), "ml/b"}, {waitingPod("b-0", "u0"), "ml/b"}},
			want:   []string{"ml/b-0 Normal WaitingForTurn: " + reason},
			// The recorder's own spam filter would allow these; ours does not.
			suppressed: 3,
		},
		{
			name:       "a job's pods share one event",
			notify:     []note{{waitingPod("b-0", "u0"), "ml/b"}, {waitingPod("b-1", "u1"), "ml/b"}, {waitingPod("b-0", "u0"), "ml/b"}},
			want:       []string{"ml/b-0 Normal WaitingForTurn: " + reason},
			suppressed: 2,
		},
		{
			name:   "two jobs get one each",
			notify: []note{{waitingPod("b-0", "u0"), "ml/b"}, {waitingPod("c-0", "u2"), "ml/c"}},
			want:   []string{"ml/b-0 Normal WaitingForTurn: " + reason, "ml/c-0 Normal WaitingForTurn: " + reason},
		},
		{
			name:       "a pod of no known job is limited by its UID, else its name",
			notify:     []note{{waitingPod("b-0", ""), ""}, {waitingPod("b-0", ""), ""}, {waitingPod("d-0", "u3"), ""}},
			want:       []string{"ml/b-0 Normal WaitingForTurn: " + reason, "ml/d-0 Normal WaitingForTurn: " + reason},
			suppressed: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &fakeRecorder{}
			m := metrics.New(prometheus.NewRegistry())
			w := NewWaitingEvents(rec, time.Hour, m, testingclock.NewFakeClock(time.Unix(1_700_000_000, 0)))
			for _, n := range tt.notify {
				w.NotifyWaiting(n.pod, view.Admission{Reason: reason, Queued: true, Job: n.job})
			}
			if diff := cmp.Diff(tt.want, rec.events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			fixture.WantSamples(t, fixture.Scrape(t, m), fmt.Sprintf(`cps_extender_waiting_events_total{result="sent"} %d`, len(tt.want)))
			if tt.suppressed > 0 {
				fixture.WantSamples(t, fixture.Scrape(t, m), fmt.Sprintf(`cps_extender_waiting_events_total{result="suppressed"} %d`, tt.suppressed))
			}
		})
	}
}

// TestUnschedulableEvents: a pod of a job that cannot fit gets a Warning GangUnschedulable
// Event, at once when its job was waiting a moment before, and as rarely as any other.
func TestUnschedulableEvents(t *testing.T) {
	rec := &fakeRecorder{}
	w := NewWaitingEvents(rec, time.Hour, nil, testingclock.NewFakeClock(time.Unix(1_700_000_000, 0)))
	waiting := view.Admission{Reason: "job ml/b waits for its turn", Queued: true}
	never := view.Admission{Reason: "job ml/b can never fit as the cluster is: ...", Queued: true, Unschedulable: true}
	for _, adm := range []view.Admission{waiting, never, never, waiting} {
		w.NotifyWaiting(waitingPod("b-0", "u0"), adm)
	}
	want := []string{"ml/b-0 Normal WaitingForTurn: " + waiting.Reason, "ml/b-0 Warning GangUnschedulable: " + never.Reason}
	if diff := cmp.Diff(want, rec.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestWaitingEventsAfterTheInterval: within the interval a pod's further events are
// suppressed; once the interval has passed the pod gets its next event (with the sentence
// of that moment); a flip to unschedulable is sent at once.
func TestWaitingEventsAfterTheInterval(t *testing.T) {
	rec := &fakeRecorder{}
	const interval = time.Minute
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	w := NewWaitingEvents(rec, interval, nil, clk)
	pod := waitingPod("b-0", "u0")
	w.NotifyWaiting(pod, view.Admission{Reason: "first"})
	clk.Step(interval - time.Second)
	w.NotifyWaiting(pod, view.Admission{Reason: "suppressed"})
	clk.Step(time.Second)
	w.NotifyWaiting(pod, view.Admission{Reason: "second"})
	w.NotifyWaiting(pod, view.Admission{Reason: "suppressed again"})
	w.NotifyWaiting(pod, view.Admission{Reason: "unschedulable", Unschedulable: true})
	want := []string{"ml/b-0 Normal WaitingForTurn: first", "ml/b-0 Normal WaitingForTurn: second", "ml/b-0 Warning GangUnschedulable: unschedulable"}
	if diff := cmp.Diff(want, rec.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestWarnings: a Warning goes out once per key an hour, not once per pod or retry.
func TestWarnings(t *testing.T) {
	rec := &fakeRecorder{}
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	w := NewWaitingEvents(rec, time.Minute, nil, clk)
	warn := func(pod, job string) {
		w.Warn(waitingPod(pod, pod), view.Warning{Reason: view.ReasonNotInGang, Key: "ml/" + job, Message: "job " + job + " is no gang"})
	}
	warn("a-0", "a")
	warn("a-1", "a")
	warn("b-0", "b")
	clk.Step(59 * time.Minute)
	warn("a-0", "a")
	clk.Step(time.Minute)
	warn("a-2", "a")
	want := []string{
		"ml/a-0 Warning NotInGang: job a is no gang",
		"ml/b-0 Warning NotInGang: job b is no gang",
		"ml/a-2 Warning NotInGang: job a is no gang",
	}
	if diff := cmp.Diff(want, rec.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
