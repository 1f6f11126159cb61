//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// TestMixedGangsNoHoldTimeout: gangs of 6, 3 and 2 pods of three tiers and plain pods (in
// no job), their pods created interleaved, on 28 CPU. Plain pods go where kube-scheduler
// puts them, which may be room a gang's plan counted on; a gang that then cannot gather
// must give its held binds back within a backoff rather than keep a gang of higher P
// waiting for its hold timeout (seen: a bronze 3-pod gang held two binds for 20 s, and the
// gold 6-pod gang gathered 69 ms after its hold timeout). No hold timeout, the gold gang
// bound within a few backoffs, and no gang ever seen partly bound.
func TestMixedGangsNoHoldTimeout(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 7, "4", "16Gi")...)
	defer e.logQueueOnFailure()
	e.startExtender("model:\n  userTiers: {alice: gold, bob: silver, carol: bronze}\n")
	e.startScheduler(true)
	// 22 CPU of gangs and 6 of plain pods: all of it fits the 28 CPU only if the plain
	// pods pair up; kube-scheduler spreads them, one a node, and then 2-CPU pods fit 8 at
	// most, of the 11 the gangs need.
	jobs := []jobSpec{
		{name: "g6a", user: "alice", ps: 1, workers: 5, cpu: "2"},
		{name: "g3a", user: "carol", ps: 1, workers: 2, cpu: "2"},
		{name: "g2a", user: "bob", workers: 2, cpu: "2"},
	}
	var pods []podSpec
	for i, p := range interleaved(jobs...) {
		if i < 6 {
			pods = append(pods, podSpec{name: fmt.Sprintf("plain-%d", i), cpu: "1"})
		}
		pods = append(pods, p)
	}
	watch := e.watchPartial(jobs)
	rec := e.recordBindings("default")
	created := time.Now()
	e.createPods(pods...)
	e.boundWithin(rec, jobs[0], created, "its creation", 15*time.Second)
	// Past a hold timeout (20 s) from the creation: a gang stuck at bind would have timed
	// out by now.
	time.Sleep(time.Until(created.Add(25 * time.Second)))
	partial := watch.Stop()
	if n := e.holdTimeouts(); n != 0 {
		out, _ := e.ext.Output()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, `"msg":"hold timeout"`) {
				t.Log(line)
			}
		}
		t.Errorf("%d hold timeouts; want none", n)
	}
	if len(partial) > 0 {
		t.Errorf("jobs seen partially bound: %v", partial)
	}
	for _, j := range jobs {
		t.Logf("%s: %d of %d bound", j.name, e.countBound(j), len(j.pods()))
	}
}
