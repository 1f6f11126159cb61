//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// Every wait ends when its cause ends: these tests take the waits that a pod or node event
// does not end on its own and check that the job runs within a backoff or two of its turn.

// holdTimeouts counts the gate's hold timeouts in the extender's log.
func (e *env) holdTimeouts() int {
	e.t.Helper()
	out, err := e.ext.Output()
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Count(string(out), `"msg":"hold timeout"`)
}

// nudges is how many turn nudges the extender has written (cps_extender_turn_nudges_total
// with result sent).
func (e *env) nudges() int {
	e.t.Helper()
	const prefix = `cps_extender_turn_nudges_total{result="sent"} `
	for _, line := range strings.Split(e.extenderBody("/metrics"), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatalf("%s: %v", line, err)
			}
			return int(n)
		}
	}
	return 0
}

// lastBound is when the last pod of j was bound, as rec saw it.
func lastBound(t *testing.T, rec *bindRecorder, j jobSpec) time.Time {
	t.Helper()
	var last time.Time
	for _, p := range j.pods() {
		// The caller saw the pod bound in a list; the watch event may still be on its way
		// (seen late on a loaded machine, after waitJobBound had returned).
		var at time.Time
		framework.WaitFor(t, 10*time.Second, p.name+" of "+j.name+" seen bound by the watch", func() (bool, error) {
			var ok bool
			at, ok = rec.BoundAt(p.name)
			return ok, errors.New("no bound event yet")
		})
		if at.After(last) {
			last = at
		}
	}
	return last
}

// checkWhole fails t if a job's pods were bound further apart than the time their Bindings
// take to post: a gang is bound all at once or not at all.
func checkWhole(t *testing.T, rec *bindRecorder, jobs ...jobSpec) {
	t.Helper()
	const posting = 5 * time.Second // generous: a gang's Bindings go out in parallel
	for _, j := range jobs {
		var first, last time.Time
		for _, p := range j.pods() {
			at, ok := rec.BoundAt(p.name)
			if !ok {
				continue
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		if spread := last.Sub(first); spread > posting {
			t.Errorf("%s was partially bound for %v", j.name, spread.Round(time.Millisecond))
		}
	}
}

// TestNeverFitsDoesNotBlock: a job bigger than the cluster is reported as never fitting and
// holds nobody back, under every policy: a small job created after it runs at once. A node
// added later that makes room for it ends its wait.
func TestNeverFitsDoesNotBlock(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 4, "8", "32Gi")...)
	huge := jobSpec{name: "huge", ps: 1, workers: 9, cpu: "4", urgent: true}
	small := jobSpec{name: "small", ps: 1, workers: 1, cpu: "4"}
	for _, policy := range []string{"strict", "reserve", "besteffort", "backfill"} {
		t.Run(policy, func(t *testing.T) {
			defer e.use(t)()
			e.startExtender("model:\n  policy: " + policy + "\n  starvationBound: 5s\n")
			e.startScheduler(true)
			rec := e.recordBindings("default")
			e.createJobs(huge)
			framework.WaitFor(t, 30*time.Second, "huge reported as never fitting", func() (bool, error) {
				q, err := e.queue()
				d := q["default/huge"]
				return err == nil && d.Phase == "Unschedulable", fmt.Errorf("huge: %+v (%v)", d, err)
			})
			created := time.Now()
			e.createJobs(small)
			e.waitJobBound(small, 10*time.Second)
			t.Logf("%s: small bound %v after its creation, while huge never fits", policy, lastBound(t, rec, small).Sub(created).Round(time.Millisecond))

			// Long past the starvation bound, huge still takes no turn and nothing of it is bound.
			time.Sleep(6 * time.Second)
			q, err := e.queue()
			if err != nil {
				t.Fatal(err)
			}
			d := q["default/huge"]
			if d.Phase != "Unschedulable" || !strings.Contains(d.Reason, "can never fit as the cluster is: only 8 of the 10 pods it needs fit") {
				t.Errorf("huge: phase %s, reason %q", d.Phase, d.Reason)
			}
			if n := e.countBound(huge); n != 0 {
				t.Errorf("huge has %d pods bound", n)
			}
			e.waitFailedScheduling("default", "huge-worker-0", "can never fit")
			e.waitJobEvent(huge, "GangUnschedulable", "can never fit")

			if policy == "reserve" {
				// A fifth node makes room for all 40 CPU once small is gone.
				e.deleteJob(small)
				e.cp.AddNodes(t, framework.Nodes("extra", 1, "8", "32Gi")...)
				added := time.Now()
				e.waitJobBound(huge, 30*time.Second)
				t.Logf("huge bound %v after a node was added that makes it fit", lastBound(t, rec, huge).Sub(added).Round(time.Millisecond))
				checkWhole(t, rec, huge)
				e.deleteJob(huge)
				e.deleteNode("extra-0")
			} else {
				e.deleteJob(small)
				e.deleteJob(huge)
			}
			checkWhole(t, rec, small)
			if n := e.holdTimeouts(); n != 0 {
				t.Errorf("%d hold timeouts", n)
			}
			e.stopScheduler()
			if err := e.ext.Stop(); err != nil {
				t.Logf("stopping cps-extender: %v", err)
			}
		})
	}
}

// TestLateGangMembers: the pods of a gang arrive one at a time. The early ones are turned
// away (gang incomplete) and parked by kube-scheduler, which the creation of their siblings
// does not wake; the last one's arrival gives the job its turn, and the early ones must come
// back with it, not after a hold timeout.
func TestLateGangMembers(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 4, "8", "32Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	for _, gap := range []time.Duration{200 * time.Millisecond, time.Second} {
		t.Run(gap.String(), func(t *testing.T) {
			defer e.use(t)()
			job := jobSpec{name: fmt.Sprintf("late-%dms", gap.Milliseconds()), ps: 1, workers: 5, cpu: "2"}
			var lastCreated time.Time
			for i, p := range job.pods() {
				if i > 0 {
					time.Sleep(gap)
				}
				e.createPods(p)
				lastCreated = time.Now()
			}
			nudged := e.nudges()
			e.waitJobBound(job, 30*time.Second)
			took := lastBound(t, rec, job).Sub(lastCreated)
			t.Logf("nudges for this gang's turn: %d (its early pods, parked while it was incomplete)", e.nudges()-nudged)
			t.Logf("pods %v apart: bound %v after the last pod was created", gap, took.Round(time.Millisecond))
			if took > 5*time.Second {
				t.Errorf("bound %v after the last pod; want within 5s", took.Round(time.Millisecond))
			}
			checkWhole(t, rec, job)
			e.deleteJob(job)
		})
	}
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts", n)
	}
}

// TestStarvedTurnWithoutEvent: under strict order a head job waits for a running job to
// end, and an older, small job that fits waits behind it. Nothing in the cluster changes;
// the old job's turn comes only when it passes the starvation bound, and it must run then,
// not when kube-scheduler next flushes its parked pods (minutes later).
func TestStarvedTurnWithoutEvent(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	createPriorityClasses(t, e, map[string]int32{"high": 1000000})
	const bound = 20 * time.Second
	e.startExtender(fmt.Sprintf("model:\n  policy: strict\n  starvationBound: %s\n  userTiers: {alice: gold}\n", bound))
	e.startScheduler(true)
	rec := e.recordBindings("default")
	// Two running jobs fill the cluster, one per node.
	running := []jobSpec{{name: "run-a", workers: 1, cpu: "4"}, {name: "run-b", workers: 1, cpu: "4"}}
	e.createJobs(running...)
	for _, j := range running {
		e.waitJobBound(j, 60*time.Second)
	}
	old := jobSpec{name: "old", workers: 1, cpu: "4"}
	e.createJobs(old)
	e.waitWaiting(old)
	// The extender counts the wait from the creation time the API server recorded (whole
	// seconds).
	created, err := e.cp.Client.CoreV1().Pods("default").Get(t.Context(), old.pods()[0].name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldCreated := created.CreationTimestamp.Time
	// Creation times have whole seconds: head must be clearly younger, so that it is not
	// starved yet when old is.
	time.Sleep(5 * time.Second)
	head := jobSpec{name: "head", user: "alice", priority: "high", workers: 2, cpu: "4"}
	e.createJobs(head)
	e.waitWaiting(head)
	// One node frees up: old would fit there, but head goes first and needs both.
	e.deleteJob(running[1])
	framework.WaitFor(t, 30*time.Second, "old behind the strict head", func() (bool, error) {
		q, err := e.queue()
		return err == nil && q["default/head"].Position == 1 && strings.Contains(q["default/old"].Blocker, "strict order"),
			fmt.Errorf("head %+v, old %+v (%v)", q["default/head"], q["default/old"], err)
	})
	nudged := e.nudges()
	e.waitJobBound(old, bound+60*time.Second)
	t.Logf("nudges for the starved job's turn: %d", e.nudges()-nudged)
	turn := oldCreated.Add(bound)
	took := lastBound(t, rec, old).Sub(turn)
	t.Logf("the starved job was bound %v after its turn came (starvation bound %v)", took.Round(time.Millisecond), bound)
	if took > 5*time.Second {
		t.Errorf("bound %v after its turn; want within 5s", took.Round(time.Millisecond))
	}
	if n := e.countBound(head); n != 0 {
		t.Errorf("the head job has %d pods bound", n)
	}
}

// waitEvent waits for an Event of reason on a pod whose message contains substr.
func (e *env) waitEvent(namespace, pod, reason, substr string) {
	e.t.Helper()
	e.waitEventOn(namespace, []string{pod}, reason, substr)
}

// waitJobEvent waits for an Event of reason on one of a job's pods whose message contains
// substr: the extender's waiting Events go out once per job, on the pod it was first told
// of.
func (e *env) waitJobEvent(j jobSpec, reason, substr string) {
	e.t.Helper()
	var pods []string
	for _, p := range j.pods() {
		pods = append(pods, p.name)
	}
	ns := j.namespace
	if ns == "" {
		ns = "default"
	}
	e.waitEventOn(ns, pods, reason, substr)
}

// waitEventOn waits for an Event of reason, whose message contains substr, on one of pods.
func (e *env) waitEventOn(namespace string, pods []string, reason, substr string) {
	e.t.Helper()
	framework.WaitFor(e.t, 60*time.Second, reason+" event of "+strings.Join(pods, " or "), func() (bool, error) {
		var seen []string
		for _, pod := range pods {
			list, err := e.cp.Client.CoreV1().Events(namespace).List(e.t.Context(), metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String(),
			})
			if err != nil {
				return false, err
			}
			for _, ev := range list.Items {
				if ev.Reason == reason && strings.Contains(ev.Message, substr) {
					return true, nil
				}
				seen = append(seen, pod+" "+ev.Reason+": "+ev.Message)
			}
		}
		return false, fmt.Errorf("events so far: %q", seen)
	})
}

// deleteNode deletes a node and waits until it is gone.
func (e *env) deleteNode(name string) {
	e.t.Helper()
	if err := e.cp.Client.CoreV1().Nodes().Delete(e.t.Context(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("delete node %s: %v", name, err)
	}
	framework.WaitFor(e.t, 30*time.Second, "node "+name+" deleted", func() (bool, error) {
		_, err := e.cp.Client.CoreV1().Nodes().Get(e.t.Context(), name, metav1.GetOptions{})
		return err != nil, nil
	})
}

// TestBacklogAtStart: gangs already pending when kube-scheduler starts reach it in its
// informer's order, each gang's pods spread over the whole backlog. All are bound whole,
// with no hold timeout. (make load's TestBacklogAtStart runs 2880+ pods against plain
// kube-scheduler; this is the same with fewer pods, on the race-built extender.)
func TestBacklogAtStart(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 30, "32", "128Gi")...)
	var jobs []jobSpec
	for i := range 50 {
		jobs = append(jobs, jobSpec{name: fmt.Sprintf("backlog-%02d", i), ps: 1, workers: 15, cpu: "1"})
	}
	e.createJobs(jobs...)
	rec := e.recordBindings("default")
	e.startExtender("")
	e.startScheduler(true)
	started := time.Now()
	for _, j := range jobs {
		e.waitJobBound(j, 5*time.Minute)
	}
	var last time.Time
	for _, j := range jobs {
		if at := lastBound(t, rec, j); at.After(last) {
			last = at
		}
	}
	t.Logf("%d gangs of 16 bound %v after kube-scheduler started", len(jobs), last.Sub(started).Round(time.Millisecond))
	checkWhole(t, rec, jobs...)
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts", n)
	}
}
