//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// preemptionConfig: alice is gold, everyone else bronze; a job may be a victim after a
// second of running, under the given mode.
func preemptionConfig(mode, minRunTime string) string {
	return fmt.Sprintf("model:\n  userTiers: {alice: gold}\n  preemption: %s\n  minRunTime: %s\naffinity:\n  topology: [%s]\n", mode, minRunTime, rackLabel)
}

// bronzeGangs are n jobs of 4 pods of 4 cpu: on 8 nodes of 8 cpu, four fill the cluster.
func bronzeGangs(n int) []jobSpec {
	var out []jobSpec
	for i := range n {
		out = append(out, jobSpec{name: fmt.Sprintf("bronze-%d", i), user: "carol", workers: 4, cpu: "4"})
	}
	return out
}

// partialWatch samples the namespace's pods every 200 ms and records every job seen with
// some but not all of its pods bound (pods being deleted do not count as bound) in two
// samples in a row: a gang's Bindings, and a victim's evictions, go out in parallel within
// milliseconds, which one sample can catch; a gang left that way cannot hide from two.
type partialWatch struct {
	mu      sync.Mutex
	partial map[string]string // job -> "2/4 bound at ..."
	stop    chan struct{}
	done    chan struct{}
}

func (e *env) watchPartial(jobs []jobSpec) *partialWatch {
	w := &partialWatch{partial: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	size := map[string]int{}
	for _, j := range jobs {
		size[j.name] = len(j.pods())
	}
	go func() {
		defer close(w.done)
		last := map[string]int{}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			list, err := e.cp.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				continue
			}
			bound := map[string]int{}
			for _, p := range list.Items {
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
					bound[p.Labels["cps-extender.io/job"]]++
				}
			}
			for job, n := range size {
				b := bound[job]
				if b > 0 && b < n && last[job] == b {
					w.mu.Lock()
					w.partial[job] = fmt.Sprintf("%d/%d bound in two samples at %s", b, n, time.Now().Format(time.RFC3339Nano))
					w.mu.Unlock()
				}
				last[job] = b
			}
		}
	}()
	return w
}

func (w *partialWatch) Stop() map[string]string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.partial
}

// fullOfBronze starts a control plane of 8 nodes of 8 cpu, the extender under the
// preemption mode (a minimum run time of 1 s) and kube-scheduler, and fills the cluster
// with four bronze gangs that have run past their minimum run time.
func fullOfBronze(t *testing.T, mode string) (*env, []jobSpec) {
	e := newEnv(t, rackedNodes(8, 2)...)
	e.startExtender(preemptionConfig(mode, "1s"))
	e.startScheduler(true)
	bronze := bronzeGangs(4)
	e.createJobs(bronze...)
	for _, j := range bronze {
		e.waitJobBound(j, 60*time.Second)
	}
	time.Sleep(1500 * time.Millisecond)
	return e, bronze
}

// TestPreemptionWholeGangs: a cluster full of bronze gangs; an urgent gold gang arrives. The
// fewest whole gangs are evicted (one: the urgent gang is the size of one), their pods get an
// Event naming the urgent job, the urgent gang is bound whole within 10 s, and no job is
// ever seen partially bound.
func TestPreemptionWholeGangs(t *testing.T) {
	e, bronze := fullOfBronze(t, "urgent")
	defer e.logQueueOnFailure()
	urgent := jobSpec{name: "urgent", user: "alice", urgent: true, workers: 4, cpu: "4"}
	watch := e.watchPartial(append(bronze, urgent))
	rec := e.recordBindings("default")
	created := time.Now()
	e.createJobs(urgent)
	e.boundWithin(rec, urgent, created, "its creation", 10*time.Second)
	partial := watch.Stop()

	// The evicted pods are deleted within seconds (kwok ends them at once); until then
	// they still show on their nodes.
	var evicted []string
	framework.WaitFor(t, 30*time.Second, "the victims gone", func() (bool, error) {
		evicted = evicted[:0]
		for _, j := range bronze {
			switch n := e.countBound(j); n {
			case 0:
				evicted = append(evicted, j.name)
			case 4:
			default:
				return false, fmt.Errorf("%s has %d of 4 pods", j.name, n)
			}
		}
		return true, nil
	})
	if len(evicted) != 1 {
		t.Fatalf("evicted gangs %v, want exactly one (the fewest that make room)", evicted)
	}
	e.waitEvent("default", evicted[0]+"-worker-0", "Preempted", "to make room for job default/urgent")
	if len(partial) > 0 {
		t.Errorf("jobs seen partially bound: %v", partial)
	}
	metrics := e.extenderBody("/metrics")
	for _, want := range []string{`cps_extender_preemptions_total{result="evicted"} 1`, `cps_extender_evicted_pods_total{reason="preempted"} 4`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestPreemptionRules: who is never a victim. A job of about the same P evicts nobody, even
// where it may preempt; a job inside its minimum run time is no victim; a gang a
// PodDisruptionBudget protects keeps running, and the urgent job waits with a sentence
// that says why.
func TestPreemptionRules(t *testing.T) {
	e, bronze := fullOfBronze(t, "priority")
	defer e.logQueueOnFailure()
	still := func(what string) {
		for _, j := range bronze {
			if n := e.countBound(j); n != 4 {
				t.Fatalf("%s: %s has %d of 4 pods bound", what, j.name, n)
			}
		}
	}

	// waitsEvictingNobody: j waits with the sentence, and two seconds later every bronze
	// gang still runs whole.
	waitsEvictingNobody := func(j jobSpec, sentence string) {
		e.createJobs(j)
		e.waitQueued(j, "Waiting", sentence)
		time.Sleep(2 * time.Second)
		still(j.name + " waits")
		e.deleteJob(j)
	}
	t.Run("about the same P", func(t *testing.T) {
		defer e.use(t)()
		waitsEvictingNobody(jobSpec{name: "peer", user: "carol", workers: 4, cpu: "4"},
			"it may not preempt: no running job may be evicted for it (P at least 0.10 lower")
	})
	t.Run("inside the minimum run time", func(t *testing.T) {
		defer e.use(t)()
		e.reloadExtenderConfig(preemptionConfig("urgent", "1h"))
		waitsEvictingNobody(jobSpec{name: "urgent-a", user: "alice", urgent: true, workers: 4, cpu: "4"},
			"running 1h0m0s or more")
	})
	// No kube-controller-manager runs here, so no budget's status is ever observed and the
	// API server refuses every eviction a budget covers: the same 429 a budget with no
	// disruption left gives.
	t.Run("a PodDisruptionBudget", func(t *testing.T) {
		defer e.use(t)()
		e.reloadExtenderConfig(preemptionConfig("urgent", "1s"))
		for _, j := range bronze {
			e.createPDB(j.name, 4)
		}
		urgent := jobSpec{name: "urgent-b", user: "alice", urgent: true, workers: 4, cpu: "4"}
		e.createJobs(urgent)
		e.waitQueued(urgent, "Waiting", "may not be evicted: an eviction of its pods was refused (a PodDisruptionBudget)")
		still("every gang is protected by a budget")
		if n := e.countBound(urgent); n != 0 {
			t.Errorf("urgent job has %d pods bound", n)
		}
		if m := e.extenderBody("/metrics"); !strings.Contains(m, `cps_extender_preemptions_total{result="refused"}`) {
			t.Errorf("no refused preemption counted")
		}
	})
}

// createPDB creates a PodDisruptionBudget that keeps minAvailable of a job's pods.
func (e *env) createPDB(job string, minAvailable int) {
	e.t.Helper()
	min := intstr.FromInt32(int32(minAvailable))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: job, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &min,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"cps-extender.io/job": job}},
		},
	}
	if _, err := e.cp.Client.PolicyV1().PodDisruptionBudgets("default").Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create PDB %s: %v", job, err)
	}
}

// reloadExtenderConfig rewrites the extender's config and waits until the extender has
// applied it (cps_extender_config_reloads_total{result="applied"} went up).
func (e *env) reloadExtenderConfig(extraConfig string) {
	e.t.Helper()
	applied := func() string {
		for _, line := range strings.Split(e.extenderBody("/metrics"), "\n") {
			if strings.HasPrefix(line, `cps_extender_config_reloads_total{result="applied"}`) {
				return line
			}
		}
		return ""
	}
	before := applied()
	e.writeExtenderConfig(extraConfig)
	framework.WaitFor(e.t, 30*time.Second, "config reloaded", func() (bool, error) {
		now := applied()
		return now != before, fmt.Errorf("applied reloads still %q", now)
	})
}
