package gate

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/internal/fixture"
	"github.com/cps-extender/cps-extender/priority"
)

// switchView is a fakeJobView whose decision for one job a test can replace, as a newer
// snapshot does.
type switchView struct {
	*fakeJobView
	mu   sync.Mutex
	key  string
	job  *priority.Job
	then *priority.Decision
}

func (v *switchView) Job(key string) (*priority.Job, *priority.Decision, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if key == v.key && v.then != nil {
		return v.job, v.then, true
	}
	return v.fakeJobView.Job(key)
}

// publish makes the view answer for job a with d, the pods named held as held.
func (v *switchView) publish(d priority.Decision, held ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	job := *v.fakeJobView.jobs[v.key]
	job.Pods = append([]priority.Pod(nil), job.Pods...)
	for i := range job.Pods {
		for _, h := range held {
			if job.Pods[i].UID == "uid-"+h {
				job.Pods[i].State, job.Pods[i].Node = priority.PodHeld, "n1"
			}
		}
	}
	v.job, v.then = &job, &d
}

// TestGateGivesHeldBindsBack: when the queue says a gathering job's gang cannot gather
// (Decision.YieldHeld, counting the pods this gathering holds), its held binds are answered
// with an error within a yieldCheck, nothing is bound, and the job does not cool down: the
// wait ends within a backoff, not the hold timeout (seen: a bronze gang held two binds for
// 20 s while the gold gang could not gather in their room). A YieldHeld decision about
// other held pods (an earlier gathering) does not end this one.
func TestGateGivesHeldBindsBack(t *testing.T) {
	view := &switchView{fakeJobView: newFakeJobView(t, []priority.Job{fixture.ThreePodJob()}, fixture.BigNodes()), key: "ns/a"}
	binder := &fakeBinder{}
	g, clk := newClockedGate(view, binder, 20*time.Second)
	answers := startBinds(g, "a-ps-0", "a-w-0")
	waitHeld(t, g, 2)

	yield := priority.Decision{Key: "ns/a", Phase: priority.PhaseWaiting, Held: 2, MinMember: 3, YieldHeld: true,
		Blocker: "its gang cannot gather: worker ns/a-w-1 needs cpu 1000m on a node; the most free on any node is 0m; its 2 held binds are given back"}
	view.publish(yield, "old-pod") // a decision about pods this gathering does not hold
	clk.Step(yieldCheck)
	time.Sleep(50 * time.Millisecond) // the check runs in its own goroutine
	if n := heldCount(g); n != 2 {
		t.Fatalf("%d held after a YieldHeld about other pods, want 2", n)
	}

	view.publish(yield, "a-ps-0", "a-w-0")
	clk.Step(yieldCheck)
	for pod, e := range answers() {
		if !strings.Contains(e, "not bound: job ns/a gives its held binds back: its gang cannot gather") {
			t.Errorf("%s: %q, want the held bind given back", pod, e)
		}
	}
	if len(binder.binds) != 0 {
		t.Errorf("binds %v, want none", binder.binds)
	}
	if _, cooling := g.CoolDowns()["ns/a"]; cooling {
		t.Error("the job cools down; a gang that gives its binds back waits in the queue instead")
	}
	if n := heldCount(g); n != 0 {
		t.Errorf("%d binds still held", n)
	}
}
