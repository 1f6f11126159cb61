//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The life of a gathering at the gate: every held bind is answered, whatever the gathering
// goes through, and a gang is bound only onto nodes it may still use.

// metric reads the value of an unlabelled metric from the extender's /metrics.
func (e *env) metric(name string) (float64, bool) {
	e.t.Helper()
	for _, line := range strings.Split(e.extenderBody("/metrics"), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatalf("%s: %v", line, err)
			}
			return f, true
		}
	}
	return 0, false
}

// waitHeldBinds waits until the extender's queue counts n held binds for job.
func (e *env) waitHeldBinds(job jobSpec, n int) {
	e.t.Helper()
	framework.WaitFor(e.t, 60*time.Second, fmt.Sprintf("%d binds of %s held", n, job.name), func() (bool, error) {
		q, err := e.queue()
		if err != nil {
			return false, err
		}
		d := q["default/"+job.name]
		return d.Held == n, fmt.Errorf("%+v", d)
	})
}

// TestLongGatheringAnswersEveryHold: a gang gathers for longer than
// 2*(holdTimeout+maxHold), the TTL its gathering once had (found: the gathering was replaced
// then, and the binds it held were never answered; kube-scheduler waited out its 60 s
// httpTimeout for each and the extender kept their goroutines for ever). Its PS reaches bind
// at once; each worker only once the pod whose anti-affinity keeps it off every node (which
// the admission fit does not model) is deleted, one every 2 s. Whether the gang gathers on the
// first pass or fails it and gathers after its cool-down, it ends bound whole, and the
// extender ends with no bind request unanswered and its goroutines back at their idle
// level.
func TestLongGatheringAnswersEveryHold(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 4, "8", "32Gi")...)
	// The old TTL: 2*(3s+5s) = 16 s. Idle connections close after 2 s, so that the
	// goroutine count can come back to its level before any request.
	e.startExtender("idleTimeout: 2s\ngate:\n  holdTimeout: 3s\n  maxHold: 5s\n  coolDown: 2s\n")
	// A hold that expires while its gang grows is retried after the pod's backoff: 1 s at
	// most here, so that the members retried and the new ones are held together.
	e.startScheduler(true, func(cfg string) string {
		return strings.Replace(cfg, "podMaxBackoffSeconds: 10", "podMaxBackoffSeconds: 1", 1)
	})
	// The idle level: the most of a few samples once the extender has settled (its
	// recompute and informers move the count by a goroutine or two).
	var idle float64
	for range 5 {
		time.Sleep(500 * time.Millisecond)
		n, ok := e.metric("go_goroutines")
		if !ok {
			t.Fatal("no go_goroutines on /metrics")
		}
		idle = max(idle, n)
	}
	rec := e.recordBindings("default")
	job := jobSpec{name: "long", ps: 1, workers: 9}
	pods := job.pods()
	// Worker i is kept off every node by blocker i (see blockers) until it is deleted.
	sets := make([]map[string]string, job.workers)
	for i := range pods[1:] {
		sets[i] = map[string]string{"cps-e2e/unlock": strconv.Itoa(i)}
		pods[1+i].labels["cps-e2e/unlock"] = strconv.Itoa(i)
	}
	blocker := e.blockers("blocker", sets...)
	e.createPods(pods...)
	e.waitHeldBinds(job, 1) // the PS
	start := time.Now()
	for i := range job.workers {
		time.Sleep(2 * time.Second)
		e.deletePods("default", blocker[i])
	}
	t.Logf("the last worker could be placed %v after the PS was held", time.Since(start).Round(time.Millisecond))
	e.waitJobBound(job, 60*time.Second)
	t.Logf("bound %v after the PS was held; %d hold timeouts", time.Since(start).Round(time.Millisecond), e.holdTimeouts())
	checkWhole(t, rec, job)

	framework.WaitFor(t, 30*time.Second, "every held bind answered", func() (bool, error) {
		n, ok := e.metric("cps_extender_bind_requests_waiting")
		return ok && n == 0, fmt.Errorf("cps_extender_bind_requests_waiting %v (served: %v)", n, ok)
	})
	// Every request answered and every idle connection closed: the goroutines come back to
	// their level (a bind never answered keeps its handler's goroutine for ever).
	var now float64
	framework.WaitFor(t, 30*time.Second, "goroutines back to their idle level", func() (bool, error) {
		now, _ = e.metric("go_goroutines")
		return now <= idle, fmt.Errorf("go_goroutines %v, idle %v", now, idle)
	})
	t.Logf("go_goroutines: %v idle, %v after the gang", idle, now)
}

// debugNodes is the part of the extender's /debug/nodes these tests read.
type debugNodes struct {
	Domains []struct {
		Nodes []struct {
			Name string `json:"name"`
			Pods []struct {
				Pod   string `json:"pod"`
				State string `json:"state"`
			} `json:"pods"`
		} `json:"nodes"`
	} `json:"domains"`
}

// heldOn maps each node of the extender's view to the pods held for it, and lists the nodes.
func (e *env) heldOn() (map[string][]string, []string) {
	e.t.Helper()
	var report debugNodes
	if err := json.Unmarshal([]byte(e.extenderBody("/debug/nodes")), &report); err != nil {
		e.t.Fatal(err)
	}
	held := map[string][]string{}
	var nodes []string
	for _, d := range report.Domains {
		for _, n := range d.Nodes {
			nodes = append(nodes, n.Name)
			for _, p := range n.Pods {
				if p.State == "held" {
					held[n.Name] = append(held[n.Name], p.Pod)
				}
			}
		}
	}
	return held, nodes
}

// TestNodeDeletedWhileGangHeld: a gang's binds are held (its last worker is kept off every
// node by another pod's anti-affinity, which the admission fit does not model) when the node most of them
// are held for, its PS's, is deleted. When the last worker comes, the gang is not bound onto
// the deleted node (found: bound whole 2.3 s later, 2 of its pods on the deleted node): its
// held binds are answered with an error, kube-scheduler places them again, and the gang is
// bound whole on the nodes left, never partly.
func TestNodeDeletedWhileGangHeld(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 4, "8", "32Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	job := jobSpec{name: "held", ps: 1, workers: 5}
	pods := job.pods()
	blocker := e.blockers("blocker", map[string]string{"cps-e2e/blocked": "true"})
	pods[5].labels["cps-e2e/blocked"] = "true"
	watch := e.watchPartial([]jobSpec{job})
	e.createPods(pods...)
	e.waitHeldBinds(job, 5)

	held, _ := e.heldOn()
	var gone string
	for node, ps := range held {
		for _, p := range ps {
			if p == "default/held-ps-0" {
				gone = node
			}
		}
	}
	if gone == "" {
		t.Fatalf("the PS is held for no node of the view: %v", held)
	}
	t.Logf("held: %v; deleting %s", held, gone)
	e.deleteNode(gone)
	framework.WaitFor(t, 10*time.Second, "the extender's view without "+gone, func() (bool, error) {
		_, nodes := e.heldOn()
		for _, n := range nodes {
			if n == gone {
				return false, fmt.Errorf("nodes %v", nodes)
			}
		}
		return true, nil
	})
	e.deletePods("default", blocker...)
	unblocked := time.Now()
	e.waitJobBound(job, 60*time.Second)
	t.Logf("bound whole %v after its last worker could be placed", lastBound(t, rec, job).Sub(unblocked).Round(time.Millisecond))
	for pod, node := range e.bound("default") {
		if node == gone {
			t.Errorf("%s bound to the deleted node %s", pod, gone)
		}
	}
	checkWhole(t, rec, job)
	if partial := watch.Stop(); len(partial) > 0 {
		t.Errorf("partly bound: %v", partial)
	}
	if !e.extenderLogHas("may no longer use") {
		t.Error("the extender's log does not show the gang refused at release for its node")
	}
}
