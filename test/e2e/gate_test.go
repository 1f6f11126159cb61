//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// interleaved lists the pods of the jobs alternately: A1, B1, A2, B2, ...
func interleaved(jobs ...jobSpec) []podSpec {
	var lists [][]podSpec
	longest := 0
	for _, j := range jobs {
		p := j.pods()
		lists = append(lists, p)
		longest = max(longest, len(p))
	}
	var out []podSpec
	for i := 0; i < longest; i++ {
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
			}
		}
	}
	return out
}

// TestDeadlock: two 6 x 4 CPU gangs on 4 x 8 CPU, pods created interleaved. Plain
// kube-scheduler leaves both half placed (the problem is real); through cps-extender one
// job runs whole and the other has nothing bound, then takes over promptly when the first
// job's pods are deleted.
func TestDeadlock(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 4, "8", "32Gi")...)
	a := jobSpec{name: "job-a", ps: 1, workers: 5, cpu: "4"}
	b := jobSpec{name: "job-b", ps: 1, workers: 5, cpu: "4"}

	t.Run("without the extender both jobs end half placed", func(t *testing.T) {
		defer e.use(t)()
		e.startScheduler(false)
		e.createPods(interleaved(a, b)...)
		framework.WaitFor(t, 60*time.Second, "8 pods bound", func() (bool, error) {
			n := len(e.bound("default"))
			return n == 8, fmt.Errorf("%d bound", n)
		})
		na, nb := e.countBound(a), e.countBound(b)
		t.Logf("without cps-extender: job-a %d/6 bound, job-b %d/6 bound", na, nb)
		if na == 0 || na == 6 || nb == 0 || nb == 6 {
			t.Errorf("want both jobs partially bound (deadlock), got %d/6 and %d/6", na, nb)
		}
		e.stopScheduler()
		e.deleteJob(a)
		e.deleteJob(b)
	})

	t.Run("with the extender one job runs whole, then hands over", func(t *testing.T) {
		defer e.use(t)()
		e.startExtender("")
		e.startScheduler(true)
		rec := e.recordBindings("default")
		e.createPods(interleaved(a, b)...)
		framework.WaitFor(t, 90*time.Second, "one job fully bound", func() (bool, error) {
			na, nb := e.countBound(a), e.countBound(b)
			return na == 6 || nb == 6, fmt.Errorf("job-a %d/6, job-b %d/6", na, nb)
		})
		first, second := a, b
		if e.countBound(b) == 6 {
			first, second = b, a
		}
		// The waiting job is told why, and nothing of it is bound.
		e.waitFailedScheduling("default", second.pods()[0].name, "waits for its turn")
		if n := e.countBound(second); n != 0 {
			t.Fatalf("%s has %d pods bound while %s runs; want 0", second.name, n, first.name)
		}
		t.Logf("with cps-extender: %s 6/6 bound, %s 0/6 bound", first.name, second.name)

		nudged := e.nudges()
		e.deleteJob(first)
		deleted := time.Now()
		e.waitJobBound(second, 90*time.Second)
		// kube-scheduler requeues the waiting pods on the deletions itself.
		t.Logf("nudges for the handover: %d", e.nudges()-nudged)
		var last time.Time
		for _, p := range second.pods() {
			at, _ := rec.BoundAt(p.name)
			if at.After(last) {
				last = at
			}
		}
		t.Logf("handover: last pod of %s deleted -> last pod of %s bound: %v", first.name, second.name, last.Sub(deleted).Round(time.Millisecond))
	})
}

// orderEnv runs jobs that each fill the whole cluster (2 x 4 CPU) one at a time and
// returns the order in which they ran: a blocker holds the cluster while the jobs queue,
// then each job that becomes fully bound is deleted to let the next one in.
// blockerSeq numbers runOneAtATime's blockers.
var blockerSeq atomic.Int32

func runOneAtATime(t *testing.T, e *env, jobs []jobSpec) []string {
	t.Helper()
	// The blocker's PriorityClass is above every job's: kube-scheduler's own preemption
	// must not evict it for them. Each call's blocker has new pod names: in one run a
	// blocker's pod vanished right after creation, leaving its gang incomplete; the likely
	// cause is kwok's deletion of the previous blocker's pod of the same name (by name).
	blocker := jobSpec{name: fmt.Sprintf("blocker-%d", blockerSeq.Add(1)), workers: 2, cpu: "4", priority: "blocker"}
	e.createJobs(blocker)
	e.waitJobBound(blocker, 60*time.Second)
	e.createJobs(jobs...)
	// Every job is complete and queued behind the blocker.
	e.waitWaiting(jobs...)
	e.deleteJob(blocker)
	return e.takeTurns(jobs, 90*time.Second, e.deleteJob)
}

// takeTurns waits, once per job, up to timeout for a job that has not run yet to be fully
// bound, fails the test if another such job has a pod bound meanwhile, and ends the running
// job with finish; it returns the jobs' names in the order they ran.
func (e *env) takeTurns(jobs []jobSpec, timeout time.Duration, finish func(jobSpec)) []string {
	e.t.Helper()
	var order []string
	for range jobs {
		var running jobSpec
		framework.WaitFor(e.t, timeout, "a job fully bound", func() (bool, error) {
			for _, j := range jobs {
				if !slices.Contains(order, j.name) && e.countBound(j) == len(j.pods()) {
					running = j
					return true, nil
				}
			}
			return false, fmt.Errorf("none yet; order so far %v", order)
		})
		for _, j := range jobs {
			if j.name != running.name && !slices.Contains(order, j.name) {
				if n := e.countBound(j); n != 0 {
					e.t.Fatalf("%s has %d pods bound while %s runs", j.name, n, running.name)
				}
			}
		}
		order = append(order, running.name)
		finish(running)
	}
	return order
}

func createPriorityClasses(t *testing.T, e *env, classes map[string]int32) {
	t.Helper()
	for name, v := range classes {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}
		if _, err := e.cp.Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCombinedPriorityOrder: jobs bind in combined-priority order, not creation order.
func TestCombinedPriorityOrder(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	createPriorityClasses(t, e, map[string]int32{"high": 1000000, "low": 1000, "blocker": 1000000000})
	// The order, not preemption: an urgent job would evict a blocker at once
	// (model.urgentMinRunTime 0s).
	e.startExtender("model:\n  userTiers: {alice: gold, bob: silver, carol: bronze}\n  urgentMinRunTime: 1h\n")
	e.startScheduler(true)
	tests := []struct {
		name string
		jobs []jobSpec // created in this order
		want []string
	}{
		{
			name: "user tiers: gold, silver, bronze",
			jobs: []jobSpec{
				{name: "bronze", user: "carol", workers: 2, cpu: "4"},
				{name: "silver", user: "bob", workers: 2, cpu: "4"},
				{name: "gold", user: "alice", workers: 2, cpu: "4"},
			},
			want: []string{"gold", "silver", "bronze"},
		},
		{
			name: "a higher PriorityClass overtakes a lower one of the same user",
			jobs: []jobSpec{
				{name: "low-pc", user: "bob", priority: "low", workers: 2, cpu: "4"},
				{name: "high-pc", user: "bob", priority: "high", workers: 2, cpu: "4"},
			},
			want: []string{"high-pc", "low-pc"},
		},
		{
			name: "an urgent job goes first",
			jobs: []jobSpec{
				{name: "normal", user: "bob", workers: 2, cpu: "4"},
				{name: "urgent", user: "bob", urgent: true, workers: 2, cpu: "4"},
			},
			want: []string{"urgent", "normal"},
		},
		{
			name: "all else equal, the larger gang goes first",
			jobs: []jobSpec{
				{name: "small-gang", user: "bob", workers: 2, cpu: "4"},
				{name: "large-gang", user: "bob", ps: 2, workers: 6, cpu: "1"},
			},
			want: []string{"large-gang", "small-gang"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer e.use(t)()
			got := runOneAtATime(t, e, tt.jobs)
			if !slices.Equal(got, tt.want) {
				t.Errorf("jobs ran in order %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAgingBeatsPriority: a low-priority job that waited past the starvation bound is
// admitted before a newer high-priority job (one that is not urgent: urgency is a class
// ahead of starved jobs).
func TestAgingBeatsPriority(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	createPriorityClasses(t, e, map[string]int32{"high": 1000000, "blocker": 1000000000})
	e.startExtender("model:\n  starvationBound: 3s\n  userTiers: {alice: gold}\n")
	e.startScheduler(true)
	blocker := jobSpec{name: "blocker", workers: 2, cpu: "4", priority: "blocker"}
	old := jobSpec{name: "old-low", user: "carol", workers: 2, cpu: "4"}
	fresh := jobSpec{name: "new-high", user: "alice", priority: "high", workers: 2, cpu: "4"}
	e.createJobs(blocker)
	e.waitJobBound(blocker, 60*time.Second)
	e.createJobs(old)
	e.waitWaiting(old)
	framework.WaitFor(t, 30*time.Second, "the old job starved", func() (bool, error) {
		q, err := e.queue()
		return err == nil && q["default/old-low"].Starved, fmt.Errorf("old-low: %+v (%v)", q["default/old-low"], err)
	})
	e.createJobs(fresh)
	e.waitWaiting(fresh)
	q, err := e.queue()
	if err != nil {
		t.Fatal(err)
	}
	if q["default/old-low"].Position != 1 || q["default/new-high"].Position != 2 {
		t.Fatalf("queue: old-low %+v, new-high %+v; want the starved job first", q["default/old-low"], q["default/new-high"])
	}
	e.deleteJob(blocker)
	e.waitJobBound(old, 60*time.Second)
	if n := e.countBound(fresh); n != 0 {
		t.Errorf("the new high-priority job has %d pods bound before the starved one finished", n)
	}
}

// TestPSBoundBeforeWorkers: a gang is bound parameter servers first.
func TestPSBoundBeforeWorkers(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 4, "8", "16Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	job := jobSpec{name: "tf", ps: 2, workers: 4}
	// Workers created first, so creation order would put them first.
	pods := job.pods()
	slices.Reverse(pods)
	e.createPods(pods...)
	e.waitJobBound(job, 60*time.Second)
	framework.WaitFor(t, 30*time.Second, "the watch saw all 6 bindings", func() (bool, error) {
		n := len(rec.Order())
		return n == 6, fmt.Errorf("%d seen", n)
	})
	order := rec.Order()
	if len(order) != 6 || !strings.Contains(order[0], "-ps-") || !strings.Contains(order[1], "-ps-") {
		t.Errorf("binding order %v: want both PS first", order)
	}
}

// TestBystandersAreNotGated: plain pods and kube-system pods schedule at once while a job
// waits for its turn.
func TestBystandersAreNotGated(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	waiting := jobSpec{name: "waiting", ps: 1, min: 4}
	e.createJobs(waiting)
	e.waitFailedScheduling("default", "waiting-ps-0", "gang incomplete")
	system := jobSpec{name: "sys", namespace: "kube-system", ps: 1, min: 4}
	e.createJobs(system)
	e.createPods(podSpec{name: "plain"})
	framework.WaitFor(t, 30*time.Second, "bystanders bound", func() (bool, error) {
		plain, sys := e.bound("default")["plain"], e.bound("kube-system")["sys-ps-0"]
		return plain != "" && sys != "", fmt.Errorf("plain on %q, kube-system pod on %q", plain, sys)
	})
	if n := e.countBound(waiting); n != 0 {
		t.Errorf("the waiting job has %d pods bound", n)
	}
}

// TestHoldTimeoutLeavesNothingBound: a job whose gang cannot gather (one member cannot be
// placed by the scheduler, for a reason the admission fit does not model) is never
// partially bound; after the hold timeout it loses the turn and the next job runs.
func TestHoldTimeoutLeavesNothingBound(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	e.startExtender("gate:\n  holdTimeout: 3s\n  coolDown: 60s\nmodel:\n  userTiers: {alice: gold}\n")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	stuck := jobSpec{name: "stuck", user: "alice", workers: 3, cpu: "2"}
	next := jobSpec{name: "next", user: "carol", workers: 2, cpu: "4"}
	pods := stuck.pods()
	// A blocker's anti-affinity keeps pods[2] off every node: the scheduler never places
	// it, and the fit, which does not model other pods' anti-affinity, admits the job.
	e.blockers("blocker", map[string]string{"cps-e2e/blocked": "true"})
	pods[2].labels["cps-e2e/blocked"] = "true"
	e.createPods(pods...)
	e.createJobs(next)
	e.waitJobBound(next, 90*time.Second)
	for _, p := range stuck.pods() {
		if _, ok := rec.BoundAt(p.name); ok {
			t.Errorf("%s of the stuck job was bound (order %v)", p.name, rec.Order())
		}
	}
	e.waitFailedScheduling("default", "stuck-worker-0", "did not gather its gang within 3s")
}

// TestCoolDownEndsWithoutAnEvent: a gang that times out at bind cools down. A change that
// makes it placeable arrives during the cool-down, so kube-scheduler retries the job's
// pods at once and the extender turns them away (cooling down); the cool-down then ends
// with no cluster event to wake them. Turns must bring them back when the job's turn comes
// again, not kube-scheduler's flush of parked pods minutes later.
func TestCoolDownEndsWithoutAnEvent(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	e.startExtender("gate:\n  holdTimeout: 3s\n  coolDown: 8s\n")
	e.startScheduler(true)
	job := jobSpec{name: "late", workers: 3, cpu: "1"}
	pods := job.pods()
	// A blocker's anti-affinity keeps pods[2] off every node (which the admission fit does
	// not model): kube-scheduler cannot place it.
	blocker := e.blockers("blocker", map[string]string{"cps-e2e/blocked": "true"})
	pods[2].labels["cps-e2e/blocked"] = "true"
	e.createPods(pods...)
	e.waitFailedScheduling("default", pods[0].name, "did not gather its gang within 3s")

	e.deletePods("default", blocker...)
	// The blocker's deletion requeued the pod while the job still cooled down: the case under
	// test.
	e.waitFailedScheduling("default", pods[2].name, "cooling down")
	e.waitJobBound(job, 60*time.Second)
}
