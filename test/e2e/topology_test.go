//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// fullClusterJobs fill 16 nodes of 8 CPU in 4 racks (128 CPU) exactly: two jobs the size of a
// rack, two of half a rack, and one more the size of a rack with bigger PS.
func fullClusterJobs() []jobSpec {
	return []jobSpec{
		{name: "ja", ps: 2, workers: 6, cpu: "4"},              // 32 CPU
		{name: "jb", ps: 1, workers: 7, cpu: "4"},              // 32
		{name: "jc", ps: 1, workers: 7, cpu: "2"},              // 16
		{name: "jd", ps: 2, workers: 6, cpu: "2"},              // 16
		{name: "je", ps: 2, workers: 12, cpu: "2", psCPU: "4"}, // 32
	}
}

// TestTopologyPlacementOnAFullCluster: 16 nodes in 4 racks filled to 100% by 5 jobs of 1-2 PS
// and 6-12 workers, their pods created interleaved. The topology-aware placement keeps at
// least 90% of the workers on the node or rack of one of their PS and every job's PS on
// distinct nodes; with one rack tainted, which only one job tolerates, it does the same
// within the nodes each job may use.
func TestTopologyPlacementOnAFullCluster(t *testing.T) {
	const dedicated = "example.com/dedicated"
	taint := corev1.Taint{Key: dedicated, Value: "big", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name    string
		tainted string // the rack whose nodes carry taint; "" for none
	}{
		{"every rack open to every job", ""},
		{"rack-1 tainted, tolerated by je alone", "rack-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := rackedNodes(16, 4)
			rackOf := map[string]string{}
			for i, n := range nodes {
				rackOf[n.Name] = n.Labels[rackLabel]
				if tc.tainted != "" && n.Labels[rackLabel] == tc.tainted {
					nodes[i].Taints = []corev1.Taint{taint}
				}
			}
			jobs := fullClusterJobs()
			if tc.tainted != "" {
				jobs[4].tolerations = []corev1.Toleration{{Key: dedicated, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			}
			e := newEnv(t, nodes...)
			e.startExtender("affinity:\n  topology: [" + rackLabel + "]\n")
			e.startScheduler(true)
			defer e.logQueueOnFailure()
			rec := e.recordBindings("default")
			e.createPods(interleaved(jobs...)...) // no job complete long before the others
			for _, j := range jobs {
				e.waitJobBound(j, 120*time.Second)
			}
			bound := e.bound("default")
			locality, onNode, spread := placementFigures(jobs, bound, rackOf)
			t.Logf("worker locality (node or rack) %.2f, on a PS node %.2f, PS spread %.2f", locality, onNode, spread)
			for _, j := range jobs {
				t.Logf("  %s: %s", j.name, racksOf(j, bound, rackOf))
			}
			if locality < 0.9 {
				t.Errorf("worker locality %.2f, want >= 0.9", locality)
			}
			if spread < 1 {
				t.Errorf("PS spread %.2f: a job has two PS on one node", spread)
			}
			if tc.tainted != "" {
				for _, j := range jobs[:4] {
					for _, p := range j.pods() {
						if rackOf[bound[p.name]] == tc.tainted {
							t.Errorf("%s on %s in the tainted %s", p.name, bound[p.name], tc.tainted)
						}
					}
				}
			}
			checkWhole(t, rec, jobs...)
		})
	}
}

// logQueueOnFailure logs the extender's queue table when the test has failed; call it with
// defer, before the waits.
func (e *env) logQueueOnFailure() {
	if !e.t.Failed() {
		return
	}
	resp, err := e.extenderGet("/debug/queue?format=table")
	if err != nil {
		e.t.Logf("queue: %v", err)
		return
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	e.t.Logf("the extender's queue at the failure:\n%s", b.String())
}

// racksOf lists where a job's pods went, by rack: "rack-0: ps x2, worker x6".
func racksOf(j jobSpec, bound, rackOf map[string]string) string {
	count := map[string]map[string]int{}
	var racks []string
	for _, p := range j.pods() {
		r := rackOf[bound[p.name]]
		if count[r] == nil {
			count[r] = map[string]int{}
			racks = append(racks, r)
		}
		role := "worker"
		if strings.Contains(p.name, "-ps-") {
			role = "ps"
		}
		count[r][role]++
	}
	var parts []string
	for _, r := range racks {
		parts = append(parts, fmt.Sprintf("%s: ps x%d, worker x%d", r, count[r]["ps"], count[r]["worker"]))
	}
	return strings.Join(parts, "; ")
}

// TestWorkloadPodGroupTopology: Kubernetes' own Workload API PodGroups are a gang source
// where the API is served. A PodGroup's minCount makes the gang and its topology constraint
// is required: the gang is placed inside one rack, and a gang no rack could hold is
// reported as never fitting, naming the constraint.
func TestWorkloadPodGroupTopology(t *testing.T) {
	e := newEnvWith(t, framework.Options{
		FeatureGates:  framework.NativeGangFeatureGate + ",TopologyAwareWorkloadScheduling=true",
		RuntimeConfig: framework.WorkloadAPIRuntimeConfig,
	}, rackedNodes(8, 2)...)
	e.startExtender("affinity:\n  topology: [" + rackLabel + "]\n")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	rackOf := map[string]string{}
	for _, n := range rackedNodes(8, 2) {
		rackOf[n.Name] = n.Labels[rackLabel]
	}

	// A gang of 1 PS and 5 workers of 4 CPU (24 CPU) fits one rack of 4 x 8 CPU.
	fits := e.createWorkloadGang("fits", 1, 5, "4")
	e.waitJobBound(fits, 90*time.Second)
	bound := e.bound("default")
	if where := racksOf(fits, bound, rackOf); strings.Contains(where, ";") {
		t.Errorf("the PodGroup's pods span racks: %s", where)
	}
	checkWhole(t, rec, fits)

	// 10 x 4 CPU (40 CPU) fits the cluster, but no rack: the constraint makes it wait for ever.
	wide := e.createWorkloadGang("wide", 2, 8, "4")
	d := e.waitQueued(wide, "Unschedulable", "no one "+rackLabel+" domain can hold its 10 pods even with no other job's pods on the nodes")
	if d.Pods != 10 {
		t.Errorf("job default/wide has %d pods in the view, want 10", d.Pods)
	}
	if n := e.countBound(wide); n != 0 {
		t.Errorf("%d pods of the job no rack can hold are bound", n)
	}
}

// createWorkloadGang creates a Workload API PodGroup named name (gang minCount ps+workers,
// topology constraint: the rack) and its pods, which name it in spec.schedulingGroup and
// carry only their role labels. It returns the job as a jobSpec for the helpers.
func (e *env) createWorkloadGang(name string, ps, workers int, cpu string) jobSpec {
	e.t.Helper()
	pg := &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: schedv1beta1.PodGroupSpec{
			SchedulingPolicy:      schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: int32(ps + workers)}},
			SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: rackLabel}}},
		},
	}
	if _, err := e.cp.Client.SchedulingV1beta1().PodGroups("default").Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create PodGroup %s: %v", name, err)
	}
	j := jobSpec{name: name, ps: ps, workers: workers, cpu: cpu}
	for _, p := range j.pods() {
		// Only the role and index: the job is the PodGroup's, not the project's label.
		p.labels = map[string]string{"cps-extender.io/role": p.labels["cps-extender.io/role"], "cps-extender.io/index": p.labels["cps-extender.io/index"]}
		obj := p.pod()
		framework.NativeGang{Namespace: "default", Name: name}.Join(obj)
		if _, err := e.cp.Client.CoreV1().Pods("default").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			e.t.Fatalf("create pod %s: %v", p.name, err)
		}
	}
	return j
}
