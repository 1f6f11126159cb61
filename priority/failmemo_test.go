package priority

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// TestFailedFitMemoMatchesPlacement holds place's memo of gangs that did not fit to the
// placement it skips: random backlogs of jobs cut from a few patterns (so that many are
// alike and wait), with node sets, required and preferred levels, bound and held pods,
// admitted under each policy with the memo and without it, must give the same queue.
func TestFailedFitMemoMatchesPlacement(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 77))
	now := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	hits := failMemoHits.Load()
	for round := range 400 {
		s := memoState(r, now)
		for _, policy := range []Policy{PolicyStrict, PolicyReserve, PolicyBestEffort, PolicyBackfill} {
			m := DefaultModel()
			m.Policy = policy
			failMemoOff.Store(true)
			want := m.Admit(s, now)
			failMemoOff.Store(false)
			got := m.Admit(s, now)
			if !reflect.DeepEqual(got, want) {
				for i := range want.Order {
					if i < len(got.Order) && !reflect.DeepEqual(got.Order[i], want.Order[i]) {
						t.Fatalf("round %d, %s: position %d with the memo %+v, without %+v", round, policy, i+1, *got.Order[i], *want.Order[i])
					}
				}
				t.Fatalf("round %d, %s: the queues differ with the memo and without", round, policy)
			}
		}
	}
	t.Logf("memo hits: %d", failMemoHits.Load()-hits)
	if failMemoHits.Load() == hits {
		t.Fatal("the memo answered no gang: the test compares nothing")
	}
}

// memoState is a random backlog for TestFailedFitMemoMatchesPlacement.
func memoState(r *rand.Rand, now time.Time) State {
	var s State
	for i := range 4 + r.IntN(30) {
		free := Resources{"cpu": int64(r.IntN(5)) * 1000, "memory": int64(r.IntN(8)), "pods": 110}
		labels := map[string]string{"rack": "r" + strconv.Itoa(r.IntN(4))}
		s.Nodes = append(s.Nodes, Node{Name: "n" + strconv.Itoa(i), Free: free, Labels: labels})
	}
	if r.IntN(4) > 0 {
		s.Topology = NewNodeIndex(s.Nodes, []string{"rack"}, nil)
	}
	var subset []string
	for _, n := range s.Nodes {
		if r.IntN(2) == 0 {
			subset = append(subset, n.Name)
		}
	}
	set := NewNodeSet("a node selector", subset)
	type pattern struct {
		ps, workers int
		psReq, wReq Resources
		set         *NodeSet
		topo        TopologyRequest
		apart       bool
	}
	var patterns []pattern
	for range 1 + r.IntN(3) {
		p := pattern{ps: r.IntN(3), workers: 1 + r.IntN(4), apart: r.IntN(3) == 0,
			psReq: Resources{"cpu": int64(1+r.IntN(3)) * 1000, "memory": int64(r.IntN(3))},
			wReq:  Resources{"cpu": int64(1+r.IntN(3)) * 500, "memory": int64(r.IntN(2))}}
		if r.IntN(3) == 0 {
			p.set = set
		}
		switch r.IntN(4) {
		case 0:
			p.topo.Required = "rack"
		case 1:
			p.topo.Preferred = "rack"
		}
		patterns = append(patterns, p)
	}
	// Two alike but for what they ask of the topology, or for PS apart.
	p := patterns[0]
	if r.IntN(2) == 0 {
		p.topo.Required = map[bool]string{true: "rack"}[p.topo.Required == ""]
	} else {
		p.ps, p.apart = 2, !p.apart
		patterns[0].ps = 2
	}
	patterns = append(patterns, p)
	for i := range 3 + r.IntN(25) {
		p := patterns[r.IntN(len(patterns))]
		j := Job{Key: "ns/job-" + strconv.Itoa(i), Priority: int32(r.IntN(3)) * 100000, Urgent: r.IntN(15) == 0,
			Created: now.Add(-time.Duration(r.IntN(120)) * time.Minute), Topology: p.topo, PSApart: p.apart}
		for k := range p.ps + p.workers {
			pod := Pod{UID: j.Key + "-" + strconv.Itoa(k), Name: "job-" + strconv.Itoa(i) + "-" + strconv.Itoa(k),
				Role: RoleWorker, Index: k, Request: p.wReq, Nodes: p.set}
			if k < p.ps {
				pod.Role, pod.Request = RolePS, p.psReq
			}
			switch r.IntN(20) {
			case 0:
				pod.State, pod.Node = PodBound, s.Nodes[r.IntN(len(s.Nodes))].Name
			case 1:
				pod.State, pod.Node = PodHeld, s.Nodes[r.IntN(len(s.Nodes))].Name
			}
			j.Pods = append(j.Pods, pod)
		}
		s.Jobs = append(s.Jobs, j)
	}
	return s
}
