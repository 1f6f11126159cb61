package turns

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/view"
)

func gatedRefs(names ...string) []gang.PodRef {
	var out []gang.PodRef
	for _, n := range names {
		out = append(out, gang.PodRef{Namespace: "ns", Name: n, UID: types.UID("uid-" + n)})
	}
	return out
}

// drainLifts runs the lift worker over want queued items.
func drainLifts(t *testing.T, tu *Turns, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for done := 0; done < want; done++ {
		for tu.lifts.Len() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d queued lifts processed; the queue stays empty", done, want)
			}
			time.Sleep(time.Millisecond)
		}
		tu.nextLift(context.Background())
	}
}

// TestTurnsLiftGates: the turn gate is lifted from the pods of a job once a snapshot gives
// it the turn, not before; from a pod in no job at once; once per pod however many
// snapshots repeat the turn before the view sees the gate gone; and not when the turn has
// passed by the time the worker gets to the pod.
func TestTurnsLiftGates(t *testing.T) {
	waiting, turn := turnsSnapshots(t)
	gated := map[string][]gang.PodRef{"ns/a": gatedRefs("a-ps-0", "a-w-0"), "": gatedRefs("loose")}
	tests := []struct {
		name      string
		publish   []*view.Snapshot
		process   int // lifts the worker processes after the last publish
		wantQueue int // lifts queued before processing
		want      []string
	}{
		{name: "job waits: only the pod in no job", publish: []*view.Snapshot{waiting.WithTurnGated(gated)}, process: 1, wantQueue: 1, want: []string{"loose"}},
		{name: "job has the turn", publish: []*view.Snapshot{turn.WithTurnGated(gated)}, process: 3, wantQueue: 3, want: []string{"a-ps-0", "a-w-0", "loose"}},
		{name: "the turn repeated: queued once", publish: []*view.Snapshot{turn.WithTurnGated(gated), turn.WithTurnGated(gated), turn.WithTurnGated(gated)}, process: 3, wantQueue: 3, want: []string{"a-ps-0", "a-w-0", "loose"}},
		{name: "the turn passed before the write", publish: []*view.Snapshot{turn.WithTurnGated(gated), waiting.WithTurnGated(gated)}, process: 3, wantQueue: 3, want: []string{"loose"}},
		{name: "gate gone in the view: nothing to lift", publish: []*view.Snapshot{turn}, wantQueue: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &fakeNudger{}
			tu := New(Options{Log: zap.NewNop(), Nudger: u, Ungater: u, Clock: testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))})
			for _, s := range tt.publish {
				tu.Published(s)
			}
			if got := tu.lifts.Len(); got != tt.wantQueue {
				t.Fatalf("%d lifts queued, want %d", got, tt.wantQueue)
			}
			drainLifts(t, tu, tt.process)
			if diff := cmp.Diff(tt.want, u.liftCalls()); diff != "" {
				t.Errorf("lifted (-want +got):\n%s", diff)
			}
			if got := tu.Lifts(); got != uint64(len(tt.want)) {
				t.Errorf("Lifts() = %d, want %d", got, len(tt.want))
			}
		})
	}
}

// TestTurnsLiftFailures: a lift that fails for a passing reason is retried; one refused
// because the pod is another by now is dropped; one that keeps failing is given up; either is
// queued again by the next snapshot that still has it gated with its job's turn.
func TestTurnsLiftFailures(t *testing.T) {
	_, turn := turnsSnapshots(t)
	snap := turn.WithTurnGated(map[string][]gang.PodRef{"ns/a": gatedRefs("a-ps-0", "a-w-0")})
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a-w-0", errors.New("uid precondition"))
	u := &fakeNudger{fail: map[string]error{"a-ps-0": errors.New("connection refused"), "a-w-0": conflict}}
	tu := New(Options{Log: zap.NewNop(), Nudger: u, Ungater: u, Clock: testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))})
	tu.Published(snap)
	drainLifts(t, tu, 2) // a-w-0 dropped; a-ps-0 queued for a retry
	if got := tu.lifts.NumRequeues(gatedRefs("a-ps-0")[0]); got != 1 {
		t.Fatalf("a-ps-0 requeued %d times after one failure, want 1", got)
	}
	// The retries come after the rate limiter's delay, on the real clock of the delaying
	// queue's fake: step it past each one.
	for range maxNudgeRetries {
		tu.clock.(*testingclock.FakeClock).Step(time.Minute)
		drainLifts(t, tu, 1)
	}
	if _, queued := tu.lifting[types.UID("uid-a-ps-0")]; queued {
		t.Fatal("a-ps-0 still counted as queued after the retries were used up")
	}
	u.mu.Lock()
	u.fail = nil
	u.mu.Unlock()
	// Both are queued again while the snapshot still has them gated in a job with the turn
	// (a-w-0's conflict might not have been another pod): nothing stays gated for good.
	tu.Published(snap)
	drainLifts(t, tu, 2)
	if diff := cmp.Diff([]string{"a-ps-0", "a-w-0"}, u.liftCalls()); diff != "" {
		t.Errorf("lifted after the next turn (-want +got):\n%s", diff)
	}
}

// fakeWaiting records the pods told why they wait, and the Warnings sent.
type fakeWaiting struct {
	told   []string
	adm    []view.Admission
	warned []string
}

func (f *fakeWaiting) Warn(pod *corev1.Pod, w view.Warning) {
	f.warned = append(f.warned, pod.Namespace+"/"+pod.Name+" "+w.Reason+": "+w.Message)
}

// TestTurnsSendWarnings: the snapshot's Warnings (labels the extender ignores, which the
// filter never tells a pod that fits on no node) go out as Events from the leader only.
func TestTurnsSendWarnings(t *testing.T) {
	waiting, _ := turnsSnapshots(t)
	warned := waiting.WithWarnings([]view.PodWarning{{Pod: gang.PodRef{Namespace: "ns", Name: "a-w-0", UID: "uid-a-w-0"},
		Warning: view.Warning{Reason: view.ReasonLabelIgnored, Key: "ns/a\x00urgent", Message: "ignored"}}})
	for _, leading := range []bool{true, false} {
		w := &fakeWaiting{}
		tu := New(Options{Log: zap.NewNop(), Nudger: &fakeNudger{}, Waiting: w, Leading: func() bool { return leading }})
		tu.Published(warned)
		want := []string{"ns/a-w-0 LabelIgnored: ignored"}
		if !leading {
			want = nil
		}
		if diff := cmp.Diff(want, w.warned); diff != "" {
			t.Errorf("leading %v: warned (-want +got):\n%s", leading, diff)
		}
	}
}

func (f *fakeWaiting) NotifyWaiting(pod *corev1.Pod, adm view.Admission) {
	f.told = append(f.told, pod.Name)
	f.adm = append(f.adm, adm)
}

// TestTurnsExplainGated: the gated pods of a job that waits are told why, as the filter
// tells the pods it turns away, at most once a second; not those of a job with the turn.
func TestTurnsExplainGated(t *testing.T) {
	waiting, turn := turnsSnapshots(t)
	gated := map[string][]gang.PodRef{"ns/a": gatedRefs("a-ps-0", "a-w-0"), "": gatedRefs("loose")}
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	w := &fakeWaiting{}
	tu := New(Options{Log: zap.NewNop(), Nudger: &fakeNudger{}, Ungater: &fakeNudger{}, Waiting: w, Clock: clk})
	tu.Published(waiting.WithTurnGated(gated))
	told := slices.Clone(w.told)
	slices.Sort(told)
	if diff := cmp.Diff([]string{"a-ps-0", "a-w-0"}, told); diff != "" {
		t.Fatalf("told (-want +got):\n%s", diff)
	}
	_, d, _ := waiting.Job("ns/a")
	if a := w.adm[0]; !a.Queued || a.Job != "ns/a" || a.Reason != d.Wait || a.Explain != d.Reason || a.Unschedulable {
		t.Errorf("admission %+v: want the job's wait %q and reason %q, queued", a, d.Wait, d.Reason)
	}
	tu.Published(waiting.WithTurnGated(gated))
	if len(w.told) != 2 {
		t.Errorf("told %d times within a second, want 2", len(w.told))
	}
	clk.Step(time.Second)
	tu.Published(waiting.WithTurnGated(gated))
	if len(w.told) != 4 {
		t.Errorf("told %d times after a second, want 4", len(w.told))
	}
	clk.Step(time.Second)
	tu.Published(turn.WithTurnGated(gated))
	if len(w.told) != 4 {
		t.Errorf("told %d times once the job has the turn, want 4", len(w.told))
	}
}
