//go:build load

package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/load/fixture"
)

// TestWaitingPodsCost measures what WAITING_JOBS x 5 waiting pods (2000 x 5 = 10k) cost
// while they wait, and what it costs when the turn moves. Under the strict policy a head job
// of one 32-CPU pod per node (it fits the cluster once a running job ends) keeps every job
// behind it waiting, though the nodes have room. Reported: the extender's filter calls while
// nothing changes (the pods are parked, not polled), the calls when the running job ends
// (an event: kube-scheduler requeues every pod an extender turned away), the nudges the
// turn costs, and how long the head job took to be bound.
func TestWaitingPodsCost(t *testing.T) {
	nodes := envInt(t, "WAITING_NODES", 100)
	jobs := envInt(t, "WAITING_JOBS", 2000)
	cp := framework.Start(t, framework.Options{})
	createNodes(t, cp.Client, fixture.Nodes(fixture.Spec{Nodes: nodes, KwokNodes: true}))
	addr := framework.FreeAddr(t)
	startExtender(t, cp, addr, "model:\n  policy: strict\n")
	sched := cp.StartScheduler(t, schedulerConfig(t, cp, "http://"+addr+"/scheduler"))
	defer func() { _ = sched.Stop() }()

	// A running job on one node, then the head: a 32-CPU pod for every node.
	running := fixture.Pods(fixture.Spec{Jobs: 1, PodsPerJob: 1, PS: 0, JobPrefix: "running", SchedulerName: "cps-scheduler"})
	running[0].Spec.Containers[0].Resources.Requests = cpuRequest("32")
	createPods(t, cp.Client, running)
	waitBound(t, cp, "default", 1, time.Minute)
	head := fixture.Pods(fixture.Spec{Jobs: 1, PodsPerJob: nodes, PS: 0, JobPrefix: "head", SchedulerName: "cps-scheduler"})
	for _, p := range head {
		p.Spec.Containers[0].Resources.Requests = cpuRequest("32")
		p.Labels["cps-extender.io/urgent"] = "true"
	}
	createPods(t, cp.Client, head)
	waiting := fixture.Pods(fixture.Spec{Jobs: jobs, PodsPerJob: 5, JobPrefix: "wait", SchedulerName: "cps-scheduler"})
	createPods(t, cp.Client, waiting)
	total := len(head) + len(waiting)

	// Every pending pod has been turned away once, and kube-scheduler has settled.
	began := time.Now()
	framework.WaitFor(t, 15*time.Minute, "every waiting pod filtered", func() (bool, error) {
		n, err := metric(addr, `cps_extender_gate_decisions_total{outcome="waiting",verb="filter"}`)
		return n >= float64(total), fmt.Errorf("%v of %d turned away (%v)", n, total, err)
	})
	t.Logf("%d waiting pods turned away once each %v after they were created", total, time.Since(began).Round(time.Millisecond))
	time.Sleep(30 * time.Second)

	const idle = 60 * time.Second
	before := mustMetric(t, addr, `cps_extender_requests_total{code="200",verb="filter"}`)
	time.Sleep(idle)
	calls := mustMetric(t, addr, `cps_extender_requests_total{code="200",verb="filter"}`) - before
	t.Logf("while nothing changes: %.0f filter calls in %v for %d waiting pods: %.4f calls/s per waiting pod",
		calls, idle, total, calls/idle.Seconds()/float64(total))

	// The running job ends: the head fits and gets the turn.
	before = mustMetric(t, addr, `cps_extender_requests_total{code="200",verb="filter"}`)
	nudged := mustMetric(t, addr, `cps_extender_turn_nudges_total{result="sent"}`)
	ended := time.Now()
	zero := int64(0)
	if err := cp.Client.CoreV1().Pods("default").Delete(context.Background(), running[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, cp, "default", len(head), 3*time.Minute)
	took := time.Since(ended)
	// kube-scheduler requeues every pod an extender turned away on any cluster event: wait
	// until it has gone through them (no filter call for 10 s).
	last, quiet := mustMetric(t, addr, `cps_extender_requests_total{code="200",verb="filter"}`), time.Now()
	for time.Since(quiet) < 10*time.Second && time.Since(ended) < 10*time.Minute {
		time.Sleep(time.Second)
		if n := mustMetric(t, addr, `cps_extender_requests_total{code="200",verb="filter"}`); n != last {
			last, quiet = n, time.Now()
		}
	}
	t.Logf("the running job ended: the head (%d pods) bound %v later, %.0f nudges; kube-scheduler then filtered the waiting pods again: %.0f filter calls (%.2f per waiting pod) over %v",
		len(head), took.Round(time.Millisecond), mustMetric(t, addr, `cps_extender_turn_nudges_total{result="sent"}`)-nudged,
		last-before, (last-before)/float64(total), quiet.Sub(ended).Round(time.Second))
}

// cpuRequest is a request of cpu cores and 2Gi of memory.
func cpuRequest(cpu string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("2Gi")}
}

// waitBound waits until n pods of the namespace are bound.
func waitBound(t *testing.T, cp *framework.ControlPlane, namespace string, n int, timeout time.Duration) {
	t.Helper()
	framework.WaitFor(t, timeout, fmt.Sprintf("%d pods bound", n), func() (bool, error) {
		bound := 0
		for _, node := range framework.PodPlacements(t, cp.Client, namespace) {
			if node != "" {
				bound++
			}
		}
		return bound >= n, fmt.Errorf("%d bound", bound)
	})
}

// metric reads one sample of the extender's /metrics (0 when it is not there).
func metric(addr, sample string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if v, ok := framework.MetricSample(string(body), sample+" "); ok {
		return strconv.ParseFloat(v, 64)
	}
	return 0, nil
}

func mustMetric(t *testing.T, addr, sample string) float64 {
	t.Helper()
	v, err := metric(addr, sample)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
