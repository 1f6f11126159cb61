//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The admission fit sees what kube-scheduler sees: taints, node selectors and real pod
// requests. A job that cannot fit because of them is reported and holds nothing; the jobs
// that can fit run at once.

var gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// waitQueued waits until /debug/queue shows the job in phase with a reason that contains
// substr (its whole gang in the view), and returns its entry.
func (e *env) waitQueued(j jobSpec, phase, substr string) queueJob {
	e.t.Helper()
	var d queueJob
	framework.WaitFor(e.t, 30*time.Second, j.name+" "+phase+": "+substr, func() (bool, error) {
		q, err := e.queue()
		d = q["default/"+j.name]
		return err == nil && d.Phase == phase && strings.Contains(d.Reason, substr), fmt.Errorf("%s: %+v (%v)", j.name, d, err)
	})
	return d
}

// boundWithin waits until j is fully bound and fails t unless it was bound within limit
// of since, when what happened.
func (e *env) boundWithin(rec *bindRecorder, j jobSpec, since time.Time, what string, limit time.Duration) {
	e.t.Helper()
	e.waitJobBound(j, 60*time.Second)
	took := lastBound(e.t, rec, j).Sub(since)
	e.t.Logf("%s bound %v after %s", j.name, took.Round(time.Millisecond), what)
	if took > limit {
		e.t.Errorf("%s bound %v after %s, want within %v", j.name, took.Round(time.Millisecond), what, limit)
	}
}

// TestTaintsLimitTheFit: two of four 8-CPU nodes carry a GPU taint. A 6 x 4 CPU job that
// does not tolerate it has 16 CPU to use: it can never fit, says so, and holds nothing; a
// job that fills those 16 CPU and one that tolerates the taint run at once.
func TestTaintsLimitTheFit(t *testing.T) {
	nodes := framework.Nodes("node", 4, "8", "32Gi")
	nodes[2].Taints, nodes[3].Taints = []corev1.Taint{gpuTaint}, []corev1.Taint{gpuTaint}
	e := newEnv(t, nodes...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")

	cpu := jobSpec{name: "cpu", workers: 6, cpu: "4", urgent: true}
	e.createJobs(cpu)
	// The reason names the taint and how far the job gets.
	e.waitQueued(cpu, "Unschedulable", "only 4 of the 6 pods it needs fit on the 2 of 4 nodes without a taint it does not tolerate (nvidia.com/gpu=present:NoSchedule)")
	e.waitJobEvent(cpu, "GangUnschedulable", "nvidia.com/gpu")

	small := jobSpec{name: "small", workers: 4, cpu: "4"}
	created := time.Now()
	e.createJobs(small)
	e.boundWithin(rec, small, created, "its creation", 10*time.Second)
	tolerant := jobSpec{name: "gpu-job", workers: 3, cpu: "4",
		tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	created = time.Now()
	e.createJobs(tolerant)
	e.boundWithin(rec, tolerant, created, "its creation", 10*time.Second)
	for _, p := range tolerant.pods() {
		if node := e.bound("default")[p.name]; node != "node-2" && node != "node-3" {
			t.Errorf("%s on %s: only the tainted nodes had room", p.name, node)
		}
	}
	if n := e.countBound(cpu); n != 0 {
		t.Errorf("the job that can never fit has %d pods bound", n)
	}
	checkWhole(t, rec, small, tolerant)
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts", n)
	}
}

// TestNodePoolsLimitTheFit: nodes 0-1 are pool a, 2-3 pool b. Job A fills pool a; job B
// (pool a) waits for it and says so; job C (pool b) runs at once beside them. When A ends,
// B runs.
func TestNodePoolsLimitTheFit(t *testing.T) {
	nodes := framework.Nodes("node", 4, "8", "32Gi")
	for i := range nodes {
		nodes[i].Labels = map[string]string{"pool": map[bool]string{true: "a", false: "b"}[i < 2]}
	}
	e := newEnv(t, nodes...)
	// An urgent job would evict a at once (model.urgentMinRunTime 0s): here it may not.
	e.startExtender("model:\n  urgentMinRunTime: 1h\n")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	poolA, poolB := map[string]string{"pool": "a"}, map[string]string{"pool": "b"}

	a := jobSpec{name: "a", workers: 2, cpu: "8", selector: poolA}
	e.createJobs(a)
	e.waitJobBound(a, 60*time.Second)
	b := jobSpec{name: "b", workers: 2, cpu: "8", selector: poolA, urgent: true}
	e.createJobs(b)
	// What it waits for counts only pool a.
	e.waitQueued(b, "Waiting", "the most free on the 2 of 4 nodes matching its node selector (pool=a) is 0m")
	c := jobSpec{name: "c", workers: 2, cpu: "8", selector: poolB}
	created := time.Now()
	e.createJobs(c)
	e.boundWithin(rec, c, created, "its creation", 10*time.Second)
	if n := e.countBound(b); n != 0 {
		t.Errorf("b has %d pods bound while pool a is full", n)
	}

	e.deleteJob(a)
	ended := time.Now()
	e.boundWithin(rec, b, ended, "a's pods were deleted", 10*time.Second)
	checkWhole(t, rec, b, c)
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts", n)
	}
}

// TestSidecarsCount: each pod of these jobs asks for 2 CPU in its container and 2 CPU in a
// sidecar, 4 CPU as kube-scheduler counts it. On 2 x 4 CPU one such job fits at a time:
// created together, one runs and the other waits for it, with no hold timeout; it runs
// when the first ends.
func TestSidecarsCount(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "16Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	first := jobSpec{name: "first", workers: 2, cpu: "2", sidecarCPU: "2", urgent: true}
	second := jobSpec{name: "second", workers: 2, cpu: "2", sidecarCPU: "2"}
	e.createPods(interleaved(first, second)...)
	e.waitJobBound(first, 60*time.Second)
	// The sidecars count: 8 CPU for 2 pods.
	if d := e.waitQueued(second, "Waiting", "it does not fit"); !strings.Contains(d.Wait, "its 2 pods need cpu 8000m in all") {
		t.Errorf("second: wait %q, want the sidecars counted (8 CPU for 2 pods)", d.Wait)
	}
	time.Sleep(5 * time.Second) // a second admitted on half the room would hold binds meanwhile
	if n := e.countBound(second); n != 0 {
		t.Errorf("second has %d pods bound", n)
	}
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts while both jobs were there", n)
	}
	e.deleteJob(first)
	ended := time.Now()
	e.boundWithin(rec, second, ended, "first's pods were deleted", 10*time.Second)
	checkWhole(t, rec, first, second)
}
