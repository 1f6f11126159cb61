package priority_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

// TestNoDomainFromAMissingLabel: a node without a level's label has no domain at that level.
// It is never a domain a job is placed in, waits for or reserves in, and a level that no node
// carries takes no part in the placement (found: on 100 nodes without zone labels, with the
// default affinity.topology [topology.kubernetes.io/zone], every node counted as a zone, and
// 20 gangs that one empty node could hold waited model.spreadAfter for a node to empty while
// the cluster had 1,600 CPU free).
func TestNoDomainFromAMissingLabel(t *testing.T) {
	const young = time.Minute
	// four nodes of 8000m (capacity as given), 3000m free each unless said; zone labels
	// as given ("" for none).
	cluster := func(zones [4]string, capacity [4]int64, free [4]int64) []priority.Node {
		var out []priority.Node
		for i := range 4 {
			f := int64(3000)
			if free[i] != 0 {
				f = free[i]
			}
			n := node("n"+string(rune('0'+i)), res(f, 0))
			n.Capacity = res(capacity[i], 0)
			if zones[i] != "" {
				n.Labels = map[string]string{zoneKey: zones[i]}
			} else {
				n.Labels = map[string]string{}
			}
			out = append(out, n)
		}
		return out
	}
	full := [4]int64{8000, 8000, 8000, 8000}
	gang := func(workers int, cpu int64) *jobB {
		return mkJob("ns/a").gang(0, nil, workers, res(cpu, 0)).created(t0.Add(-young))
	}
	tests := []struct {
		name    string
		nodes   []priority.Node
		job     priority.Job
		phase   priority.JobPhase
		blocker string
		// nodes the plan may use (nil: any); levels as the queue reports them
		on     []string
		levels []priority.TopologyLevel
	}{
		{
			name:  "no node carries the level: a young job one node could hold, spread now, runs at once",
			nodes: cluster([4]string{}, full, [4]int64{}), job: gang(4, 2000).obj(),
			phase: priority.PhaseAdmitted, levels: []priority.TopologyLevel{{Key: zoneKey}},
		},
		{
			name:  "every node carries it: the same job waits for one zone",
			nodes: cluster([4]string{"z0", "z0", "z1", "z1"}, full, [4]int64{}), job: gang(4, 2000).obj(),
			phase:   priority.PhaseWaiting,
			blocker: "it waits for one " + zoneKey + " domain with room for its 4 pods together, rather than spread over several",
			levels:  []priority.TopologyLevel{{Key: zoneKey, Nodes: 4, Domains: 2}},
		},
		{
			name:  "two nodes carry it: a job their zone could hold waits for it",
			nodes: cluster([4]string{"z0", "z0", "", ""}, full, [4]int64{}), job: gang(4, 2500).obj(),
			phase:   priority.PhaseWaiting,
			blocker: "it waits for one " + zoneKey + " domain with room for its 4 pods together, rather than spread over several",
			levels:  []priority.TopologyLevel{{Key: zoneKey, Nodes: 2, Domains: 1}},
		},
		{
			name:  "the one zone could never hold it, the unlabelled nodes are no zones: it runs at once",
			nodes: cluster([4]string{"z0", "", "", ""}, [4]int64{6000, 8000, 8000, 8000}, [4]int64{}), job: gang(4, 2000).obj(),
			phase: priority.PhaseAdmitted, levels: []priority.TopologyLevel{{Key: zoneKey, Nodes: 1, Domains: 1}},
		},
		{
			name:  "required, on no node: it can never fit, saying why",
			nodes: cluster([4]string{}, full, [4]int64{}), job: gang(2, 2000).required(zoneKey).obj(),
			phase:   priority.PhaseUnschedulable,
			blocker: "never fits: it requires one " + zoneKey + " domain, and no node carries the label " + zoneKey,
			levels:  []priority.TopologyLevel{{Key: zoneKey}},
		},
		{
			name:  "required: placed in the zone, not on an unlabelled node that would hold it alone",
			nodes: cluster([4]string{"z0", "z0", "", ""}, full, [4]int64{3000, 3000, 8000, 8000}), job: gang(2, 2000).required(zoneKey).obj(),
			phase: priority.PhaseAdmitted, on: []string{"n0", "n1"},
			levels: []priority.TopologyLevel{{Key: zoneKey, Nodes: 2, Domains: 1}},
		},
		{
			name:  "required: room on the unlabelled nodes only, it waits for the zone",
			nodes: cluster([4]string{"z0", "z0", "", ""}, full, [4]int64{1000, 1000, 8000, 8000}), job: gang(2, 2000).required(zoneKey).obj(),
			phase:   priority.PhaseWaiting,
			blocker: "no one " + zoneKey + " domain has room for its 2 pods together",
			levels:  []priority.TopologyLevel{{Key: zoneKey, Nodes: 2, Domains: 1}},
		},
		{
			name:  "preferred, on no node: placed as without a preference",
			nodes: cluster([4]string{}, full, [4]int64{}), job: gang(2, 2000).preferred(zoneKey).obj(),
			phase: priority.PhaseAdmitted, levels: []priority.TopologyLevel{{Key: zoneKey}},
		},
	}
	m := reserveModel()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A small job behind it takes some of the room it could spread over: a wait
			// for one zone leaves nothing idle then.
			behind := mkJob("ns/small").user("carol").gang(0, nil, 1, res(2500, 0)).obj()
			s := priority.State{Nodes: tt.nodes, Jobs: []priority.Job{tt.job, behind}, Topology: priority.NewNodeIndex(tt.nodes, []string{zoneKey}, nil)}
			q := m.Admit(s, t0)
			d, _ := q.Lookup(tt.job.Key)
			if d.Phase != tt.phase || d.Blocker != tt.blocker {
				t.Errorf("phase %s, blocker %q; want %s, %q", d.Phase, d.Blocker, tt.phase, tt.blocker)
			}
			if d.Phase == priority.PhasePreempting || d.Phase == priority.PhaseWaiting {
				if d.Placement.Level != "" && d.Placement.Level != "cluster" && d.Placement.Level != "node" && d.Placement.Level != zoneKey {
					t.Errorf("reserved in %s", d.Placement)
				}
				for _, dom := range d.Placement.Domains {
					if d.Placement.Level == zoneKey && dom != "z0" && dom != "z1" {
						t.Errorf("reserved in a zone %q that no label makes", dom)
					}
				}
			}
			if tt.on != nil {
				for uid, n := range d.Plan {
					if !slicesContains(tt.on, n) {
						t.Errorf("pod %s planned on %s, want one of %v", uid, n, tt.on)
					}
				}
			}
			if diff := cmp.Diff(tt.levels, q.Levels); diff != "" {
				t.Errorf("levels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.levels, s.Topology.Levels()); diff != "" {
				t.Errorf("NodeIndex.Levels (-want +got):\n%s", diff)
			}
		})
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
