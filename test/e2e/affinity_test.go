//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

const rackLabel = "topology.cps-extender.io/rack"

// rackedNodes is n nodes of 8 CPU spread evenly over racks.
func rackedNodes(n, racks int) []framework.NodeSpec {
	nodes := framework.Nodes("node", n, "8", "32Gi")
	for i := range nodes {
		if nodes[i].Labels == nil {
			nodes[i].Labels = map[string]string{}
		}
		nodes[i].Labels[rackLabel] = fmt.Sprintf("rack-%d", i%racks)
	}
	return nodes
}

// placementFigures computes, from actual bindings, the share of workers on the node or else
// the rack of one of their job's PS (locality), the share on a PS's node alone, and the
// share of jobs whose PS sit on distinct nodes (PS spread).
func placementFigures(jobs []jobSpec, bound map[string]string, rackOf map[string]string) (locality, sameNode, spread float64) {
	workers, near, onNode, spreadJobs := 0, 0, 0, 0
	for _, j := range jobs {
		psNodes := map[string]bool{}
		psRacks := map[string]bool{}
		distinct := true
		for _, p := range j.pods() {
			if !strings.Contains(p.name, "-ps-") {
				continue
			}
			node := bound[p.name]
			if psNodes[node] {
				distinct = false
			}
			psNodes[node], psRacks[rackOf[node]] = true, true
		}
		if distinct {
			spreadJobs++
		}
		for _, p := range j.pods() {
			if strings.Contains(p.name, "-ps-") {
				continue
			}
			workers++
			node := bound[p.name]
			if psNodes[node] {
				onNode++
			}
			if psNodes[node] || psRacks[rackOf[node]] {
				near++
			}
		}
	}
	return float64(near) / float64(workers), float64(onNode) / float64(workers), float64(spreadJobs) / float64(len(jobs))
}

// TestPSWorkerAffinity: 16 nodes in 4 racks, four 2 PS + 6 worker jobs created together, with
// room for all. Through cps-extender at least 90% of workers sit on the node or rack of one
// of their PS and every job's PS are on distinct nodes; the same workload on the same
// scheduler without the extender is the baseline the extender must beat.
func TestPSWorkerAffinity(t *testing.T) {
	nodes := rackedNodes(16, 4)
	e := newEnv(t, nodes...)
	rackOf := map[string]string{}
	for _, n := range nodes {
		rackOf[n.Name] = n.Labels[rackLabel]
	}
	var jobs []jobSpec
	for i := 0; i < 4; i++ {
		jobs = append(jobs, jobSpec{name: fmt.Sprintf("train-%d", i), ps: 2, workers: 6, cpu: "1"})
	}
	run := func(t *testing.T, withExtender bool) (float64, float64, float64) {
		e.startScheduler(withExtender)
		e.createJobs(jobs...)
		for _, j := range jobs {
			e.waitJobBound(j, 90*time.Second)
		}
		l, n, s := placementFigures(jobs, e.bound("default"), rackOf)
		e.stopScheduler()
		for _, j := range jobs {
			e.deleteJob(j)
		}
		return l, n, s
	}
	var baseLocality, baseNode, baseSpread float64
	t.Run("baseline without the extender", func(t *testing.T) {
		defer e.use(t)()
		baseLocality, baseNode, baseSpread = run(t, false)
		t.Logf("without cps-extender: worker locality (node or rack) %.2f, on a PS node %.2f, PS spread %.2f", baseLocality, baseNode, baseSpread)
	})
	t.Run("with the extender", func(t *testing.T) {
		defer e.use(t)()
		e.startExtender("affinity:\n  topology: [" + rackLabel + "]\n")
		locality, onNode, spread := run(t, true)
		t.Logf("with cps-extender:    worker locality (node or rack) %.2f, on a PS node %.2f, PS spread %.2f", locality, onNode, spread)
		// The placement keeps each gang in one rack, each PS on its own node with the
		// workers it serves (priority/README.md, Placement).
		if locality < 0.9 {
			t.Errorf("worker locality %.2f, want >= 0.9", locality)
		}
		if spread < 1 {
			t.Errorf("PS spread %.2f: a job has two PS on one node", spread)
		}
		if locality <= baseLocality || onNode <= baseNode {
			t.Errorf("worker locality %.2f and on a PS node %.2f do not beat the baseline's %.2f and %.2f", locality, onNode, baseLocality, baseNode)
		}
	})
}
