//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// evictedWhole waits until every job has all its pods bound or none, and returns those with
// none. The evicted pods are deleted within seconds (kwok ends them at once); until then
// they still show on their nodes.
func (e *env) evictedWhole(jobs []jobSpec) []string {
	e.t.Helper()
	var evicted []string
	framework.WaitFor(e.t, 30*time.Second, "the victims gone", func() (bool, error) {
		evicted = evicted[:0]
		for _, j := range jobs {
			switch n, all := e.countBound(j), len(j.pods()); n {
			case 0:
				evicted = append(evicted, j.name)
			case all:
			default:
				return false, fmt.Errorf("%s has %d of %d pods", j.name, n, all)
			}
		}
		return true, nil
	})
	return evicted
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

	evicted := e.evictedWhole(bronze)
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

// TestUrgentByClassEvictsWholeGangs: urgency is granted by the admin and preempts as a class.
// The cluster is full of gold gangs of another user that started seconds ago (well inside
// minRunTime, 10m). A bronze gang labelled urgent in a namespace the admin did not allow is
// not urgent: it evicts nobody, waits, and its pods get a LabelIgnored Warning. The same
// gang of PriorityClass cps-urgent (gang.urgentPriorityClasses) evicts the fewest whole
// gangs, one, and is bound whole within 10 s, no gang ever seen partly bound.
func TestUrgentByClassEvictsWholeGangs(t *testing.T) {
	e := newEnv(t, rackedNodes(8, 2)...)
	defer e.logQueueOnFailure()
	createPriorityClasses(t, e, map[string]int32{"cps-urgent": 1000})
	e.startExtender(preemptionConfig("urgent", "10m"))
	e.startScheduler(true)
	var gold []jobSpec
	for i := range 4 {
		gold = append(gold, jobSpec{name: fmt.Sprintf("gold-%d", i), user: "alice", workers: 4, cpu: "4"})
	}
	e.createJobs(gold...)
	for _, j := range gold {
		e.waitJobBound(j, 60*time.Second)
	}

	claimed := jobSpec{name: "claimed", namespace: "team-x", urgent: true, workers: 4, cpu: "4"}
	if _, err := e.cp.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: claimed.namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createJobs(claimed)
	framework.WaitFor(t, 30*time.Second, "team-x/claimed waiting, not urgent", func() (bool, error) {
		q, err := e.queue()
		d := q["team-x/claimed"]
		return err == nil && d.Phase == "Waiting" && !d.Urgent && d.Pods == 4, fmt.Errorf("%+v (%v)", d, err)
	})
	e.waitEvent("team-x", "claimed-worker-0", "LabelIgnored", "cps-extender.io/urgent=true is ignored: namespace team-x may not mark its jobs urgent")
	time.Sleep(2 * time.Second)
	for _, j := range gold {
		if n := e.countBound(j); n != 4 {
			t.Fatalf("the label where it does not count evicted %s: %d of 4 pods bound", j.name, n)
		}
	}
	e.deleteJob(claimed)

	urgent := jobSpec{name: "urgent", user: "carol", priority: "cps-urgent", workers: 4, cpu: "4"}
	watch := e.watchPartial(append(gold, urgent))
	rec := e.recordBindings("default")
	created := time.Now()
	e.createJobs(urgent)
	e.boundWithin(rec, urgent, created, "its creation", 10*time.Second)
	partial := watch.Stop()
	evicted := e.evictedWhole(gold)
	if len(evicted) != 1 {
		t.Fatalf("evicted gangs %v, want exactly one (the fewest that make room)", evicted)
	}
	if len(partial) > 0 {
		t.Errorf("jobs seen partially bound: %v", partial)
	}
	e.waitEvent("default", evicted[0]+"-worker-0", "Preempted", "to make room for job default/urgent")
	q, err := e.queue()
	if d := q["default/urgent"]; err != nil || !d.Urgent || d.UrgentFrom != "PriorityClass cps-urgent (gang.urgentPriorityClasses)" {
		t.Errorf("queue entry %+v (%v), want urgent from PriorityClass cps-urgent", d, err)
	}
}

// TestPreemptionRules: who is never a victim. A job of about the same P evicts nobody, even
// where it may preempt; a job inside model.urgentMinRunTime is no victim of an urgent job; a gang a
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
			"it may not preempt: no running job may be evicted for it (jobs not urgent, P at least 0.10 lower")
	})
	t.Run("inside the minimum run time", func(t *testing.T) {
		defer e.use(t)()
		e.reloadExtenderConfig(strings.Replace(preemptionConfig("urgent", "1h"), "model:\n", "model:\n  urgentMinRunTime: 1h\n", 1))
		waitsEvictingNobody(jobSpec{name: "urgent-a", user: "alice", urgent: true, workers: 4, cpu: "4"},
			"jobs not urgent running 1h0m0s or more")
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
