package gate

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/internal/fixture"
	"github.com/cps-extender/cps-extender/priority"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

// lagView is a switchView whose queue has seen the gate's changes up to seen.
type lagView struct {
	*switchView
	seen atomic.Uint64
}

func (v *lagView) HoldsSeen() uint64 { return v.seen.Load() }

// count is how many Bindings were posted.
func (f *fakeBinder) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.binds)
}

// placedNodes is what the gate tells the view it has placed, and how many of those are held.
func placedNodes(g *testGate) (map[types.UID]string, int) {
	nodes, held, _ := g.Placed()
	return nodes, held
}

// stepUntil steps clk by step, letting the gate's goroutines run between steps, until done
// is closed; it fails the test after 5 s.
func stepUntil(t *testing.T, clk *testingclock.FakeClock, step time.Duration, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the gate did not answer")
		}
		clk.Step(step)
	}
}

// TestGateAssumesPodsItBinds: a pod the gate binds counts as placed on its node for the
// view (Placed) from before its Binding is posted until assumeFor after, since the informer
// may not show it bound yet; a failed Binding takes it back (only the assumption on its own
// node). Each change moves seq on.
func TestGateAssumesPodsItBinds(t *testing.T) {
	view := newFakeJobView(t, nil, fixture.BigNodes())
	binder := &fakeBinder{fail: map[string]error{"refused": errors.New("conflict")}}
	g, clk := newClockedGate(view, binder, 20*time.Second)
	_, _, seq0 := g.Placed()
	if err := g.Bind(t.Context(), ref("plain"), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := g.Bind(t.Context(), ref("refused"), "n1"); err == nil {
		t.Fatal("the refused Binding succeeded")
	}
	nodes, held, seq := g.Placed()
	if want := map[types.UID]string{"uid-plain": "n1"}; len(nodes) != 1 || nodes["uid-plain"] != "n1" || held != 0 {
		t.Errorf("placed %v (%d held), want %v (0 held)", nodes, held, want)
	}
	if seq <= seq0 {
		t.Errorf("seq %d after two binds, was %d", seq, seq0)
	}
	// A failed bind of a pod assumed elsewhere by now (a retry) leaves the newer assumption.
	g.mu.Lock()
	g.assume(ref("retry"), "n2")
	g.mu.Unlock()
	g.unassume(&hold{pod: ref("retry"), node: "n1"})
	if nodes, _ := placedNodes(g); nodes["uid-retry"] != "n2" {
		t.Errorf("placed %v after an older bind to n1 failed, want uid-retry still on n2", nodes)
	}
	clk.Step(assumeFor)
	if nodes, _ := placedNodes(g); len(nodes) != 0 {
		t.Errorf("placed %v %v after the binds, want none", nodes, assumeFor)
	}
}

// TestReleaseOnASettledQueue: a gathered gang is released only on a queue computed from
// the gate's state at its gathering (HoldsSeen), its pods assumed on their nodes meanwhile.
// Told there to give its binds back (a gathering job of higher P needs their room), it
// binds nothing, does not cool down, and its pods are no longer placed; admitted, it binds
// whole. A queue that never catches up releases it after settleMax, as the queue last said,
// heeding a yield only when it is about these held pods.
func TestReleaseOnASettledQueue(t *testing.T) {
	yield := priority.Decision{Key: "ns/a", Phase: priority.PhaseWaiting, Held: 3, MinMember: 3, YieldHeld: true,
		Blocker: "it gives the room of its 3 held binds to ns/gold, which goes first and cannot gather without it"}
	for _, tc := range []struct {
		name    string
		publish *priority.Decision // the settled queue's decision (nil: the fake's own, admitted)
		about   []string           // the held pods publish is about (nil: the gang's three)
		catchUp bool               // the queue catches up with the gate
		bound   int
		answer  string // in every answer ("": bound)
	}{
		{name: "told to yield", publish: &yield, catchUp: true, answer: "not bound: job ns/a gives its held binds back: it gives the room of its 3 held binds to ns/gold"},
		{name: "admitted", catchUp: true, bound: 3},
		{name: "the queue never catches up", bound: 3},
		{name: "the queue never catches up, told to yield about these pods", publish: &yield, answer: "not bound: job ns/a gives its held binds back"},
		{name: "the queue never catches up, a yield about an earlier gathering", publish: &yield, about: []string{"old-pod"}, bound: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := &lagView{switchView: &switchView{fakeJobView: newFakeJobView(t, []priority.Job{fixture.ThreePodJob()}, fixture.BigNodes()), key: "ns/a"}}
			binder := &fakeBinder{}
			g, clk := newClockedGate(view, binder, 20*time.Second)
			answered := make(chan map[string]string, 1)
			go func() { answered <- bindConcurrently(t.Context(), g, "a-ps-0", "a-w-0", "a-w-1") }()
			deadline := time.Now().Add(5 * time.Second)
			for nodes, held := placedNodes(g); len(nodes) != 3 || held != 0; nodes, held = placedNodes(g) {
				if time.Now().After(deadline) {
					t.Fatalf("placed %v (%d held), want the 3 pods assumed", nodes, held)
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			if n := binder.count(); n != 0 {
				t.Fatalf("%d bound before the queue saw the gathering", n)
			}
			if tc.publish != nil {
				about := tc.about
				if about == nil {
					about = []string{"a-ps-0", "a-w-0", "a-w-1"}
				}
				view.publish(*tc.publish, about...)
			}
			if tc.catchUp {
				_, _, seq := g.Placed()
				view.seen.Store(seq)
			}
			done := make(chan struct{})
			var answers map[string]string
			go func() { answers = <-answered; close(done) }()
			stepUntil(t, clk, settlePoll, done)
			for pod, e := range answers {
				if !strings.Contains(e, tc.answer) || (tc.answer == "" && e != "") {
					t.Errorf("%s: %q, want %q", pod, e, tc.answer)
				}
			}
			if n := binder.count(); n != tc.bound {
				t.Errorf("%d bound, want %d", n, tc.bound)
			}
			if _, cooling := g.CoolDowns()["ns/a"]; cooling {
				t.Error("the job cools down")
			}
			if nodes, _ := placedNodes(g); tc.bound == 0 && len(nodes) != 0 {
				t.Errorf("placed %v after the binds were given back, want none", nodes)
			}
		})
	}
}
