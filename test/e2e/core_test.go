//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// TestCorePathBothNodeModes: kube-scheduler schedules pods through cps-extender (filter,
// prioritize and bind all reach it, and it creates the Bindings), with node names only
// (nodeCacheCapable: true, as shipped) and with full Node objects.
func TestCorePathBothNodeModes(t *testing.T) {
	for _, mode := range []struct {
		name             string
		nodeCacheCapable bool
	}{{"node names", true}, {"full node objects", false}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, framework.Nodes("node", 3, "4", "8Gi")...)
			e.startExtender("")
			e.startScheduler(true, func(cfg string) string {
				if mode.nodeCacheCapable {
					return cfg
				}
				return strings.Replace(cfg, "nodeCacheCapable: true", "nodeCacheCapable: false", 1)
			})
			var pods []podSpec
			for i := 0; i < 4; i++ {
				pods = append(pods, podSpec{name: fmt.Sprintf("plain-%d", i)})
			}
			// A two-pod job too: it is admitted and bound through the gate.
			job := jobSpec{name: "small", ps: 1, workers: 1}
			e.createPods(pods...)
			e.createJobs(job)
			framework.WaitFor(t, 60*time.Second, "all pods bound", func() (bool, error) {
				n := len(e.bound("default"))
				return n == 6, fmt.Errorf("%d of 6 bound", n)
			})
			// At least one filter and one bind request per pod.
			reqs := e.waitRequestsLogged(map[string]int{"/scheduler/filter": 6, "/scheduler/bind": 6})
			// Prioritize is skipped when only one node is feasible: the plain pods have all
			// three, the job's pods only the node their plan names (the filter passes it alone).
			if n := reqs["/scheduler/prioritize"]; n < 4 || n >= reqs["/scheduler/filter"] {
				t.Errorf("extender saw %d prioritize requests, want one per plain pod (4) and fewer than filter requests (none for the job's planned pods): %v", n, reqs)
			}
		})
	}
}

// TestRejectionReasonReachesTheUser: a pod whose nodes the extender rejects stays Pending
// and the extender's reason appears in its FailedScheduling event.
func TestRejectionReasonReachesTheUser(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	// min-member 3 but only one pod exists: its gang is incomplete, so it waits.
	job := jobSpec{name: "lonely", ps: 1, min: 3}
	e.createJobs(job)
	e.waitFailedScheduling("default", "lonely-ps-0", "job default/lonely waits for its turn")
	e.waitFailedScheduling("default", "lonely-ps-0", "gang incomplete: 1 of 3 pods exist")
	if n := e.countBound(job); n != 0 {
		t.Errorf("%d pods of the incomplete job were bound", n)
	}
}

// TestExtenderOutageKeepsPodsPending: with ignorable: false (as shipped), pods stay Pending
// while the extender is down, and schedule once it is back.
func TestExtenderOutageKeepsPodsPending(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	if err := e.ext.Stop(); err != nil {
		t.Fatalf("stopping the extender: %v", err)
	}
	e.createPods(podSpec{name: "during-outage"})
	// The scheduler tried and failed because the extender is unreachable.
	e.waitFailedScheduling("default", "during-outage", "connection refused")
	if b := e.bound("default"); len(b) != 0 {
		t.Fatalf("pods bound while the extender was down: %v", b)
	}
	e.startExtender("")
	framework.WaitFor(t, 60*time.Second, "the pod bound after the extender came back", func() (bool, error) {
		b := e.bound("default")
		return b["during-outage"] != "", fmt.Errorf("bound: %v", b)
	})
}
