package turns

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/internal/fixture"

	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cps-extender/cps-extender/priority"
)

// fakeNudger records the pods it nudges, and those whose gate it lifts, and fails those
// named in fail.
type fakeNudger struct {
	mu             sync.Mutex
	nudged, lifted []string
	fail           map[string]error
}

func (f *fakeNudger) Nudge(_ context.Context, pod gang.PodRef, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[pod.Name]; err != nil {
		return err
	}
	f.nudged = append(f.nudged, pod.Name)
	return nil
}

func (f *fakeNudger) Ungate(_ context.Context, pod gang.PodRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[pod.Name]; err != nil {
		return err
	}
	f.lifted = append(f.lifted, pod.Name)
	return nil
}

func (f *fakeNudger) calls() []string { return f.sorted(&f.nudged) }

func (f *fakeNudger) liftCalls() []string { return f.sorted(&f.lifted) }

func (f *fakeNudger) sorted(list *[]string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(*list)
	slices.Sort(out)
	return out
}

// turnsSnapshots are two snapshots of job ns/a (3 pods): one where it waits (its minimum is
// 4 pods, one not created yet) and one where it has the turn, with a-w-1 held already.
func turnsSnapshots(t *testing.T) (waiting, turn *view.Snapshot) {
	t.Helper()
	incomplete := fixture.ThreePodJob()
	incomplete.MinMember = 4
	admitted := fixture.ThreePodJob()
	admitted.Pods[0].State, admitted.Pods[0].Node = priority.PodHeld, "n1" // a-w-1
	waiting = view.SnapshotOf([]priority.Job{incomplete}, fixture.BigNodes(), priority.DefaultModel(), time.Unix(1_700_000_000, 0))
	turn = view.SnapshotOf([]priority.Job{admitted}, fixture.BigNodes(), priority.DefaultModel(), time.Unix(1_700_000_000, 0))
	if d, _ := waiting.Queue.Lookup("ns/a"); d.Phase != priority.PhaseWaiting {
		t.Fatalf("waiting snapshot: ns/a is %s", d.Phase)
	}
	if d, _ := turn.Queue.Lookup("ns/a"); d.Phase != priority.PhaseAdmitted {
		t.Fatalf("turn snapshot: ns/a is %s", d.Phase)
	}
	return waiting, turn
}

func turnsPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

// drain runs the worker until the queue is empty, waiting up to a minute for items added
// after a delay (AddAfter) to arrive.
func drain(t *testing.T, tu *Turns, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for done := 0; done < want; done++ {
		for tu.queue.Len() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d queued items processed; the queue stays empty", done, want)
			}
			time.Sleep(time.Millisecond)
		}
		tu.next(context.Background())
	}
}

func newTestTurns(n PodNudger, clk *testingclock.FakeClock) *Turns {
	return New(Options{Log: zap.NewNop(), Nudger: n, Clock: clk})
}

// TestTurnsBringBackParkedPods: pods turned away while their job waited are nudged once a
// snapshot gives the job the turn, and only the pods that still wait for a node.
func TestTurnsBringBackParkedPods(t *testing.T) {
	waiting, turn := turnsSnapshots(t)
	n := &fakeNudger{}
	tu := newTestTurns(n, testingclock.NewFakeClock(time.Unix(1_700_000_000, 0)))
	tu.Published(waiting)
	for _, name := range []string{"a-ps-0", "a-w-0", "a-w-1"} {
		if tu.Parked(turnsPod(name), "ns/a") {
			t.Fatalf("%s: Parked said the turn came, on a snapshot where the job waits", name)
		}
	}
	tu.Published(waiting) // still waiting: nothing to do
	if tu.queue.Len() != 0 {
		t.Fatalf("%d pods queued while the job waits", tu.queue.Len())
	}
	tu.Published(turn)
	drain(t, tu, 3)
	// a-w-1 is held for n1 in the turn snapshot: it needs no nudge.
	if diff := cmp.Diff([]string{"a-ps-0", "a-w-0"}, n.calls()); diff != "" {
		t.Errorf("nudged (-want +got):\n%s", diff)
	}
	if len(tu.parked) != 0 || len(tu.byJob) != 0 {
		t.Errorf("records left: %v %v", tu.parked, tu.byJob)
	}
}

// TestTurnsParkedOnAnOldSnapshot: a pod turned away on a snapshot older than the newest
// one, which gives its job the turn, is not recorded: the filter answers with a retry.
func TestTurnsParkedOnAnOldSnapshot(t *testing.T) {
	_, turn := turnsSnapshots(t)
	tu := newTestTurns(&fakeNudger{}, testingclock.NewFakeClock(time.Now()))
	tu.Published(turn)
	if !tu.Parked(turnsPod("a-ps-0"), "ns/a") {
		t.Error("Parked did not say that the turn came")
	}
	if len(tu.parked) != 0 {
		t.Errorf("recorded %v", tu.parked)
	}
}

// TestTurnsSkip: no nudge for a pod the filter saw again before the worker came to it, for
// one turned away again since, nor for one whose job is gone.
func TestTurnsSkip(t *testing.T) {
	waiting, turn := turnsSnapshots(t)
	n := &fakeNudger{}
	tu := newTestTurns(n, testingclock.NewFakeClock(time.Now()))
	tu.Published(waiting)
	tu.Parked(turnsPod("a-ps-0"), "ns/a")
	tu.Parked(turnsPod("a-w-0"), "ns/a")
	tu.Parked(turnsPod("gone-0"), "ns/gone")
	tu.Published(turn)
	tu.Passed(turnsPod("a-ps-0"))        // kube-scheduler came back by itself
	tu.Published(waiting)                // the job lost the turn again,
	tu.Parked(turnsPod("a-w-0"), "ns/a") // and a-w-0 was turned away once more
	drain(t, tu, 2)
	if got := n.calls(); len(got) != 0 {
		t.Errorf("nudged %v, want none", got)
	}
	if _, ok := tu.byJob["ns/gone"]; ok {
		t.Error("the record of a job that is gone was kept")
	}
	if _, ok := tu.parked["uid-a-w-0"]; !ok {
		t.Error("a-w-0, turned away again, is no longer recorded")
	}
}

// TestTurnsFailures: a pod that is gone is not retried; another failure is, after a
// backoff, a few times.
func TestTurnsFailures(t *testing.T) {
	waiting, turn := turnsSnapshots(t)
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a-ps-0")
	n := &fakeNudger{fail: map[string]error{"a-ps-0": gone, "a-w-0": errors.New("connection refused")}}
	tu := newTestTurns(n, clk)
	tu.Published(waiting)
	tu.Parked(turnsPod("a-ps-0"), "ns/a")
	tu.Parked(turnsPod("a-w-0"), "ns/a")
	tu.Published(turn)
	drain(t, tu, 2)
	if got := tu.queue.NumRequeues(gang.PodRef{Namespace: "ns", Name: "a-w-0", UID: "uid-a-w-0"}); got != 1 {
		t.Fatalf("a-w-0 requeued %d times, want 1", got)
	}
	n.mu.Lock()
	delete(n.fail, "a-w-0") // the API server is back
	n.mu.Unlock()
	for tu.queue.Len() == 0 {
		clk.Step(time.Second)
		time.Sleep(time.Millisecond)
	}
	drain(t, tu, 1)
	if diff := cmp.Diff([]string{"a-w-0"}, n.calls()); diff != "" {
		t.Errorf("nudged (-want +got):\n%s", diff)
	}
}

// TestTurnsMinInterval: a pod whose turn comes twice within the minimum interval is nudged
// the second time only once the interval has passed.
func TestTurnsMinInterval(t *testing.T) {
	waiting, turn := turnsSnapshots(t)
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	n := &fakeNudger{}
	tu := newTestTurns(n, clk)
	for round := range 2 {
		tu.Published(waiting)
		tu.Parked(turnsPod("a-ps-0"), "ns/a")
		tu.Published(turn)
		tu.next(context.Background())
		if got := len(n.calls()); got != 1 {
			t.Fatalf("round %d: %d nudges, want 1 (the second waits for the interval)", round, got)
		}
	}
	if tu.queue.Len() != 0 {
		t.Fatal("the second nudge is queued before the interval passed")
	}
	clk.Step(time.Second)
	drain(t, tu, 1)
	if got := len(n.calls()); got != 2 {
		t.Errorf("%d nudges after the interval, want 2", got)
	}
}

// TestTurnsSeed: pods kube-scheduler turned away before the process started count as
// parked; those whose job has the turn already are nudged at once.
func TestTurnsSeed(t *testing.T) {
	_, turn := turnsSnapshots(t)
	n := &fakeNudger{}
	tu := newTestTurns(n, testingclock.NewFakeClock(time.Now()))
	tu.Published(turn)
	tu.Seed([]view.TurnedAway{
		{Pod: gang.PodRef{Namespace: "ns", Name: "a-ps-0", UID: "uid-a-ps-0"}, Job: "ns/a"},
		{Pod: gang.PodRef{Namespace: "ns", Name: "b-0", UID: "uid-b-0"}, Job: "ns/b"}, // not in the view
	})
	drain(t, tu, 1)
	if diff := cmp.Diff([]string{"a-ps-0"}, n.calls()); diff != "" {
		t.Errorf("nudged (-want +got):\n%s", diff)
	}
}

// TestNilTurns: the filter may run without Turns.
func TestNilTurns(t *testing.T) {
	var tu *Turns
	if tu.Parked(turnsPod("x"), "ns/x") {
		t.Error("a nil Turns said the turn came")
	}
	tu.Passed(turnsPod("x"))
	tu.Published(nil)
	tu.Seed(nil)
}

// TestTurnsDelay: with a delay, a pod the filter lets through before it passes (kube-scheduler
// requeued it by itself) is not nudged; one still parked is, once the delay has passed.
func TestTurnsDelay(t *testing.T) {
	waiting, turn := turnsSnapshots(t)
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	n := &fakeNudger{}
	tu := New(Options{Log: zap.NewNop(), Nudger: n, Clock: clk, Delay: 200 * time.Millisecond})
	tu.Published(waiting)
	tu.Parked(turnsPod("a-ps-0"), "ns/a")
	tu.Parked(turnsPod("a-w-0"), "ns/a")
	tu.Published(turn)
	if tu.queue.Len() != 0 {
		t.Fatal("queued before the delay")
	}
	tu.Passed(turnsPod("a-w-0"))
	clk.Step(200 * time.Millisecond)
	drain(t, tu, 2)
	if diff := cmp.Diff([]string{"a-ps-0"}, n.calls()); diff != "" {
		t.Errorf("nudged (-want +got):\n%s", diff)
	}
}
