//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// spreadBacklog is 30 gangs of a PS and 23 workers of 1 CPU each (24 CPU) on 24 nodes of
// 32 CPU: 24 of them fit a node each, the other 6 only spread over what those leave (8 CPU
// a node), 720 of the 768 CPU in all. Every pod asks the same CPU so that plain
// kube-scheduler, the reference, cannot strand one on fragments: with a 2-CPU PS (750 of
// 768) its run once stopped binding for 5 minutes in CI, a PS left where no node had 2 CPU
// free being the likely cause, kept unschedulable until the scheduler's 5-minute flush.
func spreadBacklog(prefix string) []jobSpec {
	var jobs []jobSpec
	for i := range 30 {
		jobs = append(jobs, jobSpec{name: fmt.Sprintf("%s-%02d", prefix, i), ps: 1, workers: 23, cpu: "1", psCPU: "1"})
	}
	return jobs
}

// runBacklog creates the jobs, starts kube-scheduler (through the extender, which must be
// running, or plain), and returns how long after its start the last pod was bound; it
// fails the test when a gang was partly bound longer than its Bindings take. While it runs
// it samples the extender's queue and returns every job it saw waiting for a domain.
func (e *env) runBacklog(jobs []jobSpec, extender bool) (time.Duration, []string) {
	e.t.Helper()
	e.createJobs(jobs...)
	rec := e.recordBindings("default")
	var mu sync.Mutex
	waited := map[string]string{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for extender {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			q, err := e.queue()
			if err != nil {
				continue
			}
			mu.Lock()
			for key, d := range q {
				if strings.Contains(d.Blocker, "it waits for one") {
					waited[key] = d.Blocker
				}
			}
			mu.Unlock()
		}
	}()
	e.startScheduler(extender)
	started := time.Now()
	for _, j := range jobs {
		e.waitJobBound(j, 5*time.Minute)
	}
	var last time.Time
	for _, j := range jobs {
		if at := lastBound(e.t, rec, j); at.After(last) {
			last = at
		}
	}
	close(stop)
	<-done
	e.stopScheduler()
	if extender {
		checkWhole(e.t, rec, jobs...)
	}
	var out []string
	for key, why := range waited {
		out = append(out, key+": "+why)
	}
	return last.Sub(started), out
}

// TestBacklogThatFitsOnlySpread: a backlog pending before kube-scheduler starts, on 24 nodes
// with the shipped configs, where 6 of the 30 gangs fit only spread over nodes. Without zone
// labels (kubeadm, kind, most on-premises clusters) the default affinity.topology has no
// domain to wait for: every gang is bound within twice plain kube-scheduler's time for the
// same backlog, and no job ever waits for a domain (before: each node counted as a zone, and
// the 6 waited model.spreadAfter, 5 minutes, for a node to empty). On nodes labelled in 3
// zones of 8, each zone holds 10 of the gangs: every gang is kept in one zone, in about
// the same time.
func TestBacklogThatFitsOnlySpread(t *testing.T) {
	var plain time.Duration
	t.Run("no zone labels", func(t *testing.T) {
		e := newEnv(t, framework.Nodes("node", 24, "32", "128Gi")...)
		plain, _ = e.runBacklog(spreadBacklog("plain"), false)
		for _, j := range spreadBacklog("plain") {
			e.deleteJob(j)
		}
		e.startExtender("")
		took, waited := e.runBacklog(spreadBacklog("cps"), true)
		t.Logf("720 pods of 30 gangs: plain kube-scheduler %v, through cps-extender %v (%.2fx)", plain.Round(time.Millisecond), took.Round(time.Millisecond), took.Seconds()/plain.Seconds())
		if took > 2*plain {
			t.Errorf("through cps-extender %v, want at most twice plain kube-scheduler's %v", took.Round(time.Millisecond), plain.Round(time.Millisecond))
		}
		if len(waited) > 0 {
			t.Errorf("jobs waited for a domain the labels do not make: %v", waited)
		}
		if n := e.holdTimeouts(); n != 0 {
			t.Errorf("%d hold timeouts", n)
		}
	})
	t.Run("3 zones", func(t *testing.T) {
		if plain == 0 {
			t.Skip("no plain kube-scheduler time to compare with")
		}
		nodes := framework.Nodes("node", 24, "32", "128Gi")
		zoneOf := map[string]string{}
		for i := range nodes {
			zoneOf[nodes[i].Name] = fmt.Sprintf("zone-%d", i/8)
			nodes[i].Labels = map[string]string{"topology.kubernetes.io/zone": zoneOf[nodes[i].Name]}
		}
		e := newEnv(t, nodes...)
		e.startExtender("")
		jobs := spreadBacklog("zoned")
		took, waited := e.runBacklog(jobs, true)
		t.Logf("in 3 zones: through cps-extender %v (%.2fx plain kube-scheduler's %v); waited for a zone: %d", took.Round(time.Millisecond), took.Seconds()/plain.Seconds(), plain.Round(time.Millisecond), len(waited))
		if took > 2*plain {
			t.Errorf("through cps-extender %v, want at most twice plain kube-scheduler's %v", took.Round(time.Millisecond), plain.Round(time.Millisecond))
		}
		bound := e.bound("default")
		for _, j := range jobs {
			zones := map[string]bool{}
			for _, p := range j.pods() {
				zones[zoneOf[bound[p.name]]] = true
			}
			if len(zones) != 1 {
				t.Errorf("%s spread over zones %v; one zone could hold it", j.name, zones)
			}
		}
	})
}
