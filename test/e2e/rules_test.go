//go:build e2e

package e2e

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The admission fit keeps the pods' required pod anti-affinity and hard topology spread
// constraints, as kube-scheduler does: a gang they make impossible is reported and holds
// nobody back, one they allow is placed as they ask, whole.

// endedWhole checks at a test's end that jobs were bound whole (checkWhole), that no gang
// watch saw was ever partly bound, and that no gang timed out at bind.
func (e *env) endedWhole(t *testing.T, rec *bindRecorder, watch *partialWatch, jobs ...jobSpec) {
	t.Helper()
	checkWhole(t, rec, jobs...)
	if partial := watch.Stop(); len(partial) > 0 {
		t.Errorf("partly bound: %v", partial)
	}
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts", n)
	}
}

// onePerNode is "one pod of app=<app> a node": required anti-affinity by hostname.
func onePerNode(app string) []corev1.PodAffinityTerm {
	return []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
}

// TestAntiAffinityInTheFit: 6 workers, one a node, on 4 roomy nodes. Before the fit kept
// the rule the gang took the turn, gathered 4 of 6 at bind and timed out again and again.
// Now it is Unschedulable, naming the rule, nothing of it is bound, a small job created
// after it binds at once, and there is no hold timeout; two more nodes end its wait, and
// it binds whole, one pod a node.
func TestAntiAffinityInTheFit(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 4, "8", "32Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	apart := jobSpec{name: "apart", workers: 6, cpu: "1", urgent: true,
		labels: map[string]string{"app": "apart"}, apart: onePerNode("apart")}
	small := jobSpec{name: "small", workers: 2, cpu: "1"}
	watch := e.watchPartial([]jobSpec{apart, small})
	e.createJobs(apart)
	d := e.waitQueued(apart, "Unschedulable", "only 4 of the 6 pods it needs can be placed keeping its required pod anti-affinity by kubernetes.io/hostname (pods app=apart), even with no other job's pods on the nodes")
	t.Logf("apart: %s", d.Reason)
	e.waitFailedScheduling("default", "apart-worker-0", "required pod anti-affinity by kubernetes.io/hostname")

	created := time.Now()
	e.createJobs(small)
	e.boundWithin(rec, small, created, "its creation", 10*time.Second)
	time.Sleep(3 * time.Second) // a gang admitted by mistake would be gathering at bind by now
	if n := e.countBound(apart); n != 0 {
		t.Errorf("apart has %d pods bound on 4 nodes", n)
	}
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts", n)
	}

	adding := time.Now()
	e.cp.AddNodes(t, framework.Nodes("extra", 2, "8", "32Gi")...)
	e.boundWithin(rec, apart, adding, "two nodes were being added", 20*time.Second)
	perNode := map[string]int{}
	for _, p := range apart.pods() {
		perNode[e.bound("default")[p.name]]++
	}
	if len(perNode) != 6 {
		t.Errorf("apart's pods per node: %v, want one on each of 6 nodes", perNode)
	}
	e.endedWhole(t, rec, watch, apart, small)
}

// TestSpreadInTheFit: 6 nodes in 3 zones, zc's two of 2 CPU. A gang of 6 x 1 CPU that
// must spread over the zones with maxSkew 1, which one node could hold, where the placement
// would put it without the constraint: it binds whole, two pods a zone. A gang of 6 x 4 CPU
// with the same constraint fits no pod in zc, so with maxSkew 1 only one a zone in the
// others: it is Unschedulable, naming the constraint, and nothing of it is bound.
func TestSpreadInTheFit(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	nodes := append(framework.Nodes("node", 4, "8", "32Gi"), framework.Nodes("small", 2, "2", "8Gi")...)
	zoneOf := map[string]string{}
	for i := range nodes {
		zoneOf[nodes[i].Name] = []string{"za", "za", "zb", "zb", "zc", "zc"}[i]
		nodes[i].Labels = map[string]string{zone: zoneOf[nodes[i].Name]}
	}
	e := newEnv(t, nodes...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	spreadOver := func(app string) []corev1.TopologySpreadConstraint {
		return []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
	spread := jobSpec{name: "spread", workers: 6, cpu: "1", labels: map[string]string{"app": "spread"}, spread: spreadOver("spread")}
	wide := jobSpec{name: "wide", workers: 6, cpu: "4", labels: map[string]string{"app": "wide"}, spread: spreadOver("wide")}
	watch := e.watchPartial([]jobSpec{spread, wide})
	created := time.Now()
	e.createJobs(spread)
	e.boundWithin(rec, spread, created, "its creation", 20*time.Second)
	perZone := map[string]int{}
	for _, p := range spread.pods() {
		perZone[zoneOf[e.bound("default")[p.name]]]++
	}
	if want := map[string]int{"za": 2, "zb": 2, "zc": 2}; !maps.Equal(perZone, want) {
		t.Errorf("spread's pods per zone: %v, want %v", perZone, want)
	}

	e.createJobs(wide)
	e.waitQueued(wide, "Unschedulable", "only 2 of the 6 pods it needs can be placed keeping its topology spread constraint by topology.kubernetes.io/zone (maxSkew 1, pods app=wide)")
	time.Sleep(3 * time.Second) // a gang admitted by mistake would be gathering at bind by now
	if n := e.countBound(wide); n != 0 {
		t.Errorf("wide has %d pods bound", n)
	}
	e.endedWhole(t, rec, watch, spread)
}

// preferApartFrom is "rather not on a node with another pod of job's workers": preferred
// anti-affinity by hostname, weight 100.
func preferApartFrom(job string) []corev1.WeightedPodAffinityTerm {
	return []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cps-extender.io/job": job, "cps-extender.io/role": "worker"}}}}}
}

// TestPreferredApartSteersThePlan: preferred anti-affinity among a gang's workers steers the
// plan, which kube-scheduler follows. On 4 nodes of 8 CPU a PS and 4 workers of 1 CPU, which
// one node holds and the gang placement would put on one, bind whole with the workers on 4
// nodes. 6 workers of 1 CPU preferring the same on the 4 nodes cannot all be apart: they
// bind whole all the same, at most two a node. No gang is partly bound, no hold timeout.
func TestPreferredApartSteersThePlan(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 4, "8", "32Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	spread := jobSpec{name: "spread", ps: 1, workers: 4, cpu: "1", preferApart: preferApartFrom("spread"), workersPrefer: true}
	packed := jobSpec{name: "packed", workers: 6, cpu: "1", preferApart: preferApartFrom("packed")}
	watch := e.watchPartial([]jobSpec{spread, packed})
	workersPerNode := func(j jobSpec) map[string]int {
		out := map[string]int{}
		for _, p := range j.pods() {
			if p.labels["cps-extender.io/role"] == "worker" {
				out[e.bound("default")[p.name]]++
			}
		}
		return out
	}

	created := time.Now()
	e.createJobs(spread)
	e.boundWithin(rec, spread, created, "its creation", 20*time.Second)
	if got := workersPerNode(spread); len(got) != 4 {
		t.Errorf("spread's workers per node: %v, want one on each of the 4 nodes", got)
	} else {
		t.Logf("spread's workers per node: %v", got)
	}

	created = time.Now()
	e.createJobs(packed)
	e.boundWithin(rec, packed, created, "its creation", 20*time.Second)
	got := workersPerNode(packed)
	most := 0
	for _, n := range got {
		most = max(most, n)
	}
	if len(got) != 4 || most > 2 {
		t.Errorf("packed's workers per node: %v, want the 6 over the 4 nodes, at most 2 a node", got)
	} else {
		t.Logf("packed's workers per node: %v", got)
	}
	e.endedWhole(t, rec, watch, spread, packed)
}
