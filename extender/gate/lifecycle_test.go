package gate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/internal/fixture"
	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/priority"
)

// The tests of a gathering's life: every held request is answered on every path (a long
// gathering, cancellation, a gang completed by members bound meanwhile, a node that went bad
// before the release).

// answered waits for the answers of startBinds, failing the test when a held request is
// still unanswered after a few seconds (the gate leaked it).
func answered(t *testing.T, answers func() map[string]string) map[string]string {
	t.Helper()
	done := make(chan map[string]string, 1)
	go func() { done <- answers() }()
	select {
	case got := <-done:
		return got
	case <-time.After(5 * time.Second):
		t.Fatal("a held bind request was never answered")
		return nil
	}
}

// TestGateKeepsAGatheringAsLongAsItsTimersSay: a gathering lives as long as its timers say.
// One that gathers for longer than 2*(holdTimeout+maxHold), the TTL of the cache it once
// lived in, is not replaced: the binds it held are answered, and the gang is bound whole
// when its last member comes (found: a gathering replaced after the TTL left its held
// requests waiting for ever). The gate's timers run on the fake clock; the test also sleeps
// past that TTL in real time, which the cache counted in.
func TestGateKeepsAGatheringAsLongAsItsTimersSay(t *testing.T) {
	job := fixture.ThreePodJob()
	job.MinMember = 4
	job.Pods = append(job.Pods, fixture.GangPod("a-w-2", priority.RoleWorker, 2, priority.PodPending, ""))
	view := newFakeJobView(t, []priority.Job{job}, fixture.BigNodes())
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	binder := &fakeBinder{}
	m := metrics.New(prometheus.NewRegistry())
	const hold, maxHold = 20 * time.Millisecond, 30 * time.Millisecond // the old TTL: 100 ms
	g := newGateOn(view, Options{Log: zap.NewNop(), Binder: binder, Clock: clk, Metrics: m, Config: config.GateConfig{
		HoldTimeout: metav1.Duration{Duration: hold}, MaxHold: metav1.Duration{Duration: maxHold},
		CoolDown: metav1.Duration{Duration: time.Minute}, MaxCoolDown: metav1.Duration{Duration: 4 * time.Minute},
	}})

	// A new member every 15 ms: the gang keeps growing; the PS's request expires at 30 ms
	// and comes back, as the scheduler retries it.
	ps := startBinds(g, "a-ps-0")
	waitHeld(t, g, 1)
	clk.Step(15 * time.Millisecond)
	w0 := startBinds(g, "a-w-0")
	waitHeld(t, g, 2)
	clk.Step(15 * time.Millisecond)
	if e := answered(t, ps)["a-ps-0"]; !strings.Contains(e, "still growing") {
		t.Fatalf("a-ps-0: %q, want its hold expired while the gang grows", e)
	}
	ps = startBinds(g, "a-ps-0")
	waitHeld(t, g, 2)
	w1 := startBinds(g, "a-w-1")
	waitHeld(t, g, 3)
	fixture.WantSamples(t, fixture.Scrape(t, m), "cps_extender_bind_requests_waiting 3")

	time.Sleep(150 * time.Millisecond) // past the old TTL in real time
	clk.Step(10 * time.Millisecond)    // 40 ms of gathering
	w2 := startBinds(g, "a-w-2")
	for _, answers := range []func() map[string]string{ps, w0, w1, w2} {
		for pod, e := range answered(t, answers) {
			if e != "" {
				t.Errorf("%s: %s", pod, e)
			}
		}
	}
	if len(binder.binds) != 4 || binder.binds[0] != "ns/a-ps-0->n1" {
		t.Errorf("binds %v: want the whole gang, PS first", binder.binds)
	}
	if n := heldCount(g); n != 0 {
		t.Errorf("%d binds still held", n)
	}
	fixture.WantSamples(t, fixture.Scrape(t, m), "cps_extender_bind_requests_waiting 0")
}

// TestGateAnswersEveryHoldOfAGangThatStopsGrowing: a gathering that ends by its hold
// timeout answers every request it holds, however long it has gathered, and nothing of it is
// left: the next bind of the job starts a gathering of its own.
func TestGateAnswersEveryHoldOfAGangThatStopsGrowing(t *testing.T) {
	g, clk, binder := fourPodGate(t) // holdTimeout 20 s, maxHold 50 s
	var pending []func() map[string]string
	for i, pod := range []string{"a-ps-0", "a-w-0", "a-w-1"} {
		if i > 0 {
			clk.Step(10 * time.Second)
		}
		pending = append(pending, startBinds(g, pod))
		waitHeld(t, g, i+1)
	}
	clk.Step(20 * time.Second) // 20 s since a-w-1, before the PS's maxHold: the gang has failed
	for _, answers := range pending {
		for pod, e := range answered(t, answers) {
			if !strings.Contains(e, "did not gather its gang") {
				t.Errorf("%s: %q, want the gang's failure", pod, e)
			}
		}
	}
	g.mu.Lock()
	left := len(g.gatherings)
	g.mu.Unlock()
	if left != 0 || len(binder.binds) != 0 {
		t.Errorf("%d gatherings left, binds %v: want none", left, binder.binds)
	}
}

// TestGateCancellation: the scheduler dropping a request drops its hold; only a Binding under
// way is not cut short (a gang already released, a pod that needs no gathering).
func TestGateCancellation(t *testing.T) {
	t.Run("a held request is dropped", func(t *testing.T) {
		view := newFakeJobView(t, []priority.Job{fixture.ThreePodJob()}, fixture.BigNodes())
		g := newTestGate(view, &fakeBinder{}, time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		answers := make(chan error, 1)
		go func() { answers <- g.Bind(ctx, ref("a-ps-0"), "n1") }()
		waitHeld(t, g, 1)
		cancel()
		select {
		case err := <-answers:
			if err == nil || !strings.Contains(err.Error(), "cancelled while its gang gathered") {
				t.Errorf("answer %v, want the hold dropped", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a cancelled hold was not answered")
		}
		if n := heldCount(g); n != 0 {
			t.Errorf("%d held after the cancellation", n)
		}
	})
	t.Run("a released gang's Binding is finished", func(t *testing.T) {
		view := newFakeJobView(t, []priority.Job{fixture.ThreePodJob()}, fixture.BigNodes())
		binder := &ctxBinder{started: make(chan struct{}, 3), release: make(chan struct{})}
		g := newTestGate(view, binder, time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		answers := make(chan error, 1)
		go func() { answers <- g.Bind(ctx, ref("a-ps-0"), "n1") }()
		waitHeld(t, g, 1)
		rest := startBinds(g, "a-w-0", "a-w-1")
		<-binder.started // released: the PS's Binding is under way
		cancel()
		close(binder.release)
		if err := <-answers; err != nil {
			t.Errorf("a-ps-0: %v, want bound with its gang", err)
		}
		for pod, e := range answered(t, rest) {
			if e != "" {
				t.Errorf("%s: %s", pod, e)
			}
		}
	})
	t.Run("a pod in no job is bound", func(t *testing.T) {
		view := newFakeJobView(t, nil, fixture.BigNodes())
		binder := &fakeBinder{}
		g := newTestGate(view, binder, time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := g.Bind(ctx, ref("plain"), "n1"); err != nil || len(binder.binds) != 1 {
			t.Errorf("answer %v, binds %v: want it bound", err, binder.binds)
		}
	})
}

// TestGateCompletesAGangWhoseMembersWereBoundMeanwhile: a held pod whose other members the
// bind's snapshot did not show bound yet is bound once the view shows them, within a
// yieldCheck, not after a hold timeout (found: a real TFJob's 5 workers bound at 0.5 s, its
// PS held until 26.5 s, after a hold timeout and a cool-down).
func TestGateCompletesAGangWhoseMembersWereBoundMeanwhile(t *testing.T) {
	job := fixture.ThreePodJob()
	view := newFakeJobView(t, []priority.Job{job}, fixture.BigNodes())
	binder := &fakeBinder{}
	g, clk := newClockedGate(view, binder, 20*time.Second)
	ps := startBinds(g, "a-ps-0")
	waitHeld(t, g, 1)

	bound := fixture.ThreePodJob()
	for i := range bound.Pods {
		if bound.Pods[i].Role == priority.RoleWorker {
			bound.Pods[i].State, bound.Pods[i].Node = priority.PodBound, "n2"
		}
	}
	view.update([]priority.Job{bound}, fixture.BigNodes())
	clk.Step(yieldCheck)
	if e := answered(t, ps)["a-ps-0"]; e != "" {
		t.Fatalf("a-ps-0: %q, want it bound with its gang", e)
	}
	if len(binder.binds) != 1 || binder.binds[0] != "ns/a-ps-0->n1" {
		t.Errorf("binds %v, want the PS", binder.binds)
	}
	if _, cooling := g.CoolDowns()["ns/a"]; cooling {
		t.Error("the job cools down")
	}
}

// TestGateChecksTheNodesAtRelease: a gathered gang one of whose held pods may no longer use
// its node (deleted, cordoned, tainted) is not bound at all: every held bind answers an error
// the scheduler retries, placing the pods again, and the job does not cool down (found: a
// gang bound whole 2.3 s after one of its planned nodes was deleted, 2 pods on that node).
func TestGateChecksTheNodesAtRelease(t *testing.T) {
	view := newFakeJobView(t, []priority.Job{fixture.ThreePodJob()}, fixture.BigNodes())
	binder := &fakeBinder{}
	g := newTestGate(view, binder, time.Minute)
	first := startBinds(g, "a-w-0", "a-w-1")
	waitHeld(t, g, 2)
	view.refuseNode("n1", "node n1 is cordoned")
	for pod, e := range answered(t, startBinds(g, "a-ps-0")) {
		if !strings.Contains(e, "not bound: job ns/a was gathered for nodes it may no longer use (") || !strings.Contains(e, "pod ns/a-ps-0 may not run on node n1: node n1 is cordoned") {
			t.Errorf("%s: %q, want the gang refused for its node", pod, e)
		}
	}
	for pod, e := range answered(t, first) {
		if !strings.Contains(e, "node n1 is cordoned") {
			t.Errorf("%s: %q, want the gang refused for its node", pod, e)
		}
	}
	if len(binder.binds) != 0 {
		t.Fatalf("binds %v, want none", binder.binds)
	}
	if _, cooling := g.CoolDowns()["ns/a"]; cooling {
		t.Error("the job cools down; its pods are placed again instead")
	}
	// The scheduler places them again, on a node they may use: bound whole.
	view.refuseNode("n1", "")
	for pod, e := range bindConcurrently(context.Background(), g, "a-ps-0", "a-w-0", "a-w-1") {
		if e != "" {
			t.Errorf("%s: %s", pod, e)
		}
	}
	if len(binder.binds) != 3 {
		t.Errorf("binds %v, want the gang", binder.binds)
	}
}

// ctxBinder blocks every Binding until release is closed, then fails those whose context
// ended meanwhile: a Binding cut short by a cancelled request fails.
type ctxBinder struct {
	started chan struct{} // one signal per Binding begun
	release chan struct{}
}

func (b *ctxBinder) Bind(ctx context.Context, _ gang.PodRef, _ string) error {
	b.started <- struct{}{}
	<-b.release
	if ctx.Err() != nil {
		return errors.New("Binding cut short: " + ctx.Err().Error())
	}
	return nil
}
