package preempt

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/view"
	"github.com/cps-extender/cps-extender/priority"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// fakeEvictor records evictions and answers them with refuse's error for a pod name.
type fakeEvictor struct {
	mu      sync.Mutex
	dry     []string
	evicted []string
	refuse  map[string]error // pod name -> error of its real eviction
	dryErr  map[string]error // pod name -> error of its dry run
}

func (f *fakeEvictor) Evict(_ context.Context, pod gang.PodRef, dryRun bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if dryRun {
		f.dry = append(f.dry, pod.String())
		return f.dryErr[pod.Name]
	}
	if err := f.refuse[pod.Name]; err != nil {
		return err
	}
	f.evicted = append(f.evicted, pod.String())
	return nil
}

type recordedEvents struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recordedEvents) Eventf(_ runtime.Object, eventtype, reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, eventtype+" "+reason+": "+fmt.Sprintf(format, args...))
}

// preemptingSnapshot is two nodes of 8 cpu, each full with a bronze job of two pods that
// has run an hour, and an urgent gold job of two pods: it preempts one of them.
func preemptingSnapshot(t *testing.T) *view.Snapshot {
	t.Helper()
	return preemptingSnapshotWith(t, nil)
}

// preemptingSnapshotWith is preemptingSnapshot with change applied to the running jobs
// first (nil: none).
func preemptingSnapshotWith(t *testing.T, change func(jobs []priority.Job) []priority.Job) *view.Snapshot {
	t.Helper()
	var nodes []priority.Node
	var jobs []priority.Job
	for i := range 2 {
		n := fmt.Sprintf("n%d", i)
		nodes = append(nodes, priority.Node{Name: n, Free: priority.Resources{}, Capacity: priority.Resources{"cpu": 8000}})
		job := priority.Job{Key: fmt.Sprintf("ns/run-%d", i), User: "bob", Created: t0.Add(-2 * time.Hour), RunningSince: t0.Add(-time.Hour)}
		for k := range 2 {
			name := fmt.Sprintf("run-%d-%d", i, k)
			job.Pods = append(job.Pods, priority.Pod{UID: "uid-" + name, Name: "ns/" + name, Role: priority.RoleWorker, Index: k,
				Request: priority.Resources{"cpu": 4000}, State: priority.PodBound, Node: n})
		}
		jobs = append(jobs, job)
	}
	urgent := priority.Job{Key: "ns/urgent", User: "alice", Urgent: true, Created: t0}
	for k := range 2 {
		name := fmt.Sprintf("urgent-%d", k)
		urgent.Pods = append(urgent.Pods, priority.Pod{UID: "uid-" + name, Name: "ns/" + name, Role: priority.RoleWorker, Index: k,
			Request: priority.Resources{"cpu": 4000}})
	}
	if change != nil {
		jobs = change(jobs)
	}
	m := priority.DefaultModel()
	m.UserTiers = map[string]string{"alice": "gold"}
	m.UrgentMinRunTime = time.Minute // a job that has just started is no victim
	snap := view.SnapshotOf(append(jobs, urgent), nodes, m, t0)
	d, ok := snap.Queue.Lookup("ns/urgent")
	if !ok || d.Phase != priority.PhasePreempting || len(d.Victims) != 1 {
		t.Fatalf("urgent: %+v", d)
	}
	return snap
}

func newPreemptor(t *testing.T, ev Evictor, events EventRecorder) (*Preemptor, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	p, err := New(context.Background(), Options{Log: zap.NewNop(), Evictor: ev, Events: events, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

func TestPreemptorEvictsTheWholeGangOnce(t *testing.T) {
	ev := &fakeEvictor{}
	events := &recordedEvents{}
	p, clk := newPreemptor(t, ev, events)
	snap := preemptingSnapshot(t)
	p.Published(snap)
	p.Published(snap) // a second snapshot naming the same victim evicts nothing more
	p.Wait()
	victim, _ := snap.Queue.Lookup("ns/urgent")
	key := victim.Victims[0].Key
	var want []string
	for k := range 2 {
		want = append(want, fmt.Sprintf("%s-%d", key, k))
	}
	slices.Sort(ev.evicted)
	if diff := cmp.Diff(want, ev.evicted); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if len(ev.dry) != 2 {
		t.Errorf("dry runs %v, want one a pod before any eviction", ev.dry)
	}
	if len(events.msgs) != 2 || !strings.Contains(events.msgs[0], "Warning Preempted: evicted with its whole gang "+key) ||
		!strings.Contains(events.msgs[0], "to make room for job ns/urgent") {
		t.Errorf("events %q", events.msgs)
	}
	if n := p.Evicted(t0.Add(-time.Minute)); n != 1 {
		t.Errorf("Evicted = %d, want 1", n)
	}
	clk.Step(11 * time.Minute)
	if n := p.Evicted(clk.Now().Add(-10 * time.Minute)); n != 0 {
		t.Errorf("Evicted within the last 10m, 11m later = %d, want 0", n)
	}
}

func TestPreemptorRespectsDisruptionBudgets(t *testing.T) {
	snap := preemptingSnapshot(t)
	d, _ := snap.Queue.Lookup("ns/urgent")
	victim := strings.TrimPrefix(d.Victims[0].Key, "ns/")
	refused := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	tests := []struct {
		name      string
		ev        *fakeEvictor
		evicted   int
		protected bool
		events    []string // a part of each Event, in order
	}{
		{"a dry run refused: nothing evicted, the job protected",
			&fakeEvictor{dryErr: map[string]error{victim + "-1": refused}}, 0, true, nil},
		{"refused after the dry run passed: half evicted, reported, protected",
			&fakeEvictor{refuse: map[string]error{victim + "-1": refused}}, 1, true,
			[]string{"Warning Preempted: evicted with its whole gang",
				"Warning PreemptionIncomplete: 1 of 2 pods of job ns/" + victim + " were evicted to make room for job ns/urgent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := &recordedEvents{}
			p, clk := newPreemptor(t, tt.ev, events)
			p.Published(snap)
			p.Wait()
			if len(tt.ev.evicted) != tt.evicted {
				t.Errorf("evicted %v, want %d pods", tt.ev.evicted, tt.evicted)
			}
			if len(events.msgs) != len(tt.events) {
				t.Fatalf("events %q, want %d", events.msgs, len(tt.events))
			}
			for i, want := range tt.events {
				if !strings.Contains(events.msgs[i], want) {
					t.Errorf("event %d: %q, want %q in it", i, events.msgs[i], want)
				}
			}
			if _, ok := p.Protected()[d.Victims[0].Key]; ok != tt.protected {
				t.Errorf("protected %v, want %v", p.Protected(), tt.protected)
			}
			// A victim refused before any pod went does not count against the eviction
			// budget; one left half evicted does: its pods are gone.
			if n, want := p.Evicted(t0.Add(-time.Minute)), min(tt.evicted, 1); n != want {
				t.Errorf("victims counted as evicted: %d, want %d", n, want)
			}
			p.Published(snap) // protected: not tried again
			p.Wait()
			if len(tt.ev.evicted) != tt.evicted {
				t.Errorf("evicted again: %v", tt.ev.evicted)
			}
			clk.Step(6 * time.Minute)
			if len(p.Protected()) != 0 {
				t.Errorf("still protected after ProtectFor: %v", p.Protected())
			}
		})
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	if _, err := New(context.Background(), Options{}); err == nil || !strings.Contains(err.Error(), "log is required") || !strings.Contains(err.Error(), "evictor is required") {
		t.Errorf("err = %v, want both missing dependencies named", err)
	}
}

// TestPreemptorWaitsForItsVictimsToGo: a preemptor gets no new victim while one of its last
// round is still on its nodes; once that one is gone, or after roundWait, it does.
func TestPreemptorWaitsForItsVictimsToGo(t *testing.T) {
	ev := &fakeEvictor{}
	p, clk := newPreemptor(t, ev, nil)
	first := preemptingSnapshot(t)
	p.Published(first)
	p.Wait()
	d, _ := first.Queue.Lookup("ns/urgent")
	firstVictim := d.Victims[0].Key
	// The view still shows the first victim bound (it has just started to run, so it is no
	// victim now) and the model names the other job.
	still := preemptingSnapshotWith(t, func(jobs []priority.Job) []priority.Job {
		for i := range jobs {
			if jobs[i].Key == firstVictim {
				jobs[i].RunningSince = t0
			}
		}
		return jobs
	})
	d, _ = still.Queue.Lookup("ns/urgent")
	if len(d.Victims) != 1 || d.Victims[0].Key == firstVictim {
		t.Fatalf("second snapshot's victims %+v, want the other job", d.Victims)
	}
	p.Published(still)
	p.Wait()
	if len(ev.evicted) != 2 {
		t.Fatalf("evicted %v while the first victim is still on its nodes, want its 2 pods only", ev.evicted)
	}
	// Gone from the view: the round is over.
	if p.underWay("ns/urgent", preemptingSnapshotWith(t, func(jobs []priority.Job) []priority.Job {
		return slices.DeleteFunc(jobs, func(j priority.Job) bool { return j.Key == firstVictim })
	})) {
		t.Error("round under way with its victim gone")
	}
	// Still there after roundWait: stuck pods hold it back no longer.
	p.started("ns/urgent", firstVictim)
	clk.Step(roundWait)
	p.Published(still)
	p.Wait()
	if len(ev.evicted) != 4 {
		t.Errorf("evicted %v after roundWait, want the second victim's pods too", ev.evicted)
	}

	// A round nobody asks about again (its preemptor got its turn) goes when a later one
	// starts past roundWait.
	p.started("ns/done", "ns/v")
	clk.Step(roundWait)
	p.started("ns/other", "ns/w")
	p.mu.Lock()
	_, kept := p.rounds["ns/done"]
	p.mu.Unlock()
	if kept {
		t.Error("a round past roundWait is kept")
	}
}

// blockingEvictor holds every real eviction until release is closed.
type blockingEvictor struct {
	fakeEvictor
	release chan struct{}
}

func (b *blockingEvictor) Evict(ctx context.Context, pod gang.PodRef, dryRun bool) error {
	if !dryRun {
		<-b.release
	}
	return b.fakeEvictor.Evict(ctx, pod, dryRun)
}

// TestPreemptorEvictingUntilItsVictimSettles: a victim counts as being evicted from its claim
// until evictSettle after its evictions returned (the gate binds none of its pods meanwhile);
// a job never chosen never does.
func TestPreemptorEvictingUntilItsVictimSettles(t *testing.T) {
	ev := &blockingEvictor{release: make(chan struct{})}
	p, clk := newPreemptor(t, ev, nil)
	snap := preemptingSnapshot(t)
	d, _ := snap.Queue.Lookup("ns/urgent")
	victim := d.Victims[0].Key
	p.Published(snap)
	if !p.Evicting(victim) {
		t.Error("not evicting while its evictions are under way")
	}
	clk.Step(time.Minute) // however long they take
	if !p.Evicting(victim) {
		t.Error("not evicting while its evictions are still under way a minute later")
	}
	close(ev.release)
	p.Wait()
	if !p.Evicting(victim) {
		t.Error("not evicting right after its evictions returned")
	}
	clk.Step(evictSettle)
	if p.Evicting(victim) {
		t.Errorf("still evicting %v after its evictions returned", evictSettle)
	}
	if p.Evicting("ns/urgent") {
		t.Error("the preempting job counts as evicted")
	}
}

// TestPreemptorNotEvictingARefusedVictim: a victim whose eviction a budget refused keeps
// running, so its binds are not held back.
func TestPreemptorNotEvictingARefusedVictim(t *testing.T) {
	snap := preemptingSnapshot(t)
	d, _ := snap.Queue.Lookup("ns/urgent")
	victim := d.Victims[0].Key
	refused := apierrors.NewTooManyRequests("a disruption budget refuses it", 0)
	ev := &fakeEvictor{dryErr: map[string]error{}}
	job, _, _ := snap.Job(victim)
	for _, pod := range boundPods(job) {
		ev.dryErr[pod.Name] = refused
	}
	p, _ := newPreemptor(t, ev, nil)
	p.Published(snap)
	p.Wait()
	if len(ev.evicted) != 0 {
		t.Fatalf("evicted %v, want none", ev.evicted)
	}
	if p.Evicting(victim) {
		t.Error("a victim whose eviction was refused counts as being evicted")
	}
}
