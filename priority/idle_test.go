package priority_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

// TestWaitForADomainLeavesNothingIdle: a young job that one rack could hold, and that fits
// now only spread over racks, waits for a rack only while the jobs behind it use the room
// it could spread over; when none does (they fit elsewhere, or do not fit at all), its wait
// would leave that room idle, and it is admitted spread at once. Seen: 2,880 pods pending
// at start on 100 nodes, 2,400 bound in 34 s, then nothing until 300 s while 20 gangs
// waited, each for an empty node, beside 1,600 free CPU that no one else wanted.
func TestWaitForADomainLeavesNothingIdle(t *testing.T) {
	nodes := rackCluster(1, 2, 2, 8000)                         // r0: n00, n02; r1: n01, n03
	nodes[0].Free, nodes[1].Free = res(0, 64*gi), res(0, 64*gi) // n02 and n03 free: 8000m each
	young := t0.Add(-time.Minute)
	big := mkJob("ns/big").gang(1, res(2000, gi), 7, res(2000, gi)).created(young).obj() // 16000m: one rack, were it empty
	type row struct {
		Key, Phase, Blocker, Level string
	}
	tests := []struct {
		name   string
		policy priority.Policy
		jobs   []priority.Job
		want   []row
	}{
		{
			name: "a job behind takes some of the room: big waits for a rack, reserving one",
			jobs: []priority.Job{big, mkJob("ns/small").user("carol").gang(0, nil, 1, res(2000, gi)).created(young).obj()},
			want: []row{
				{"ns/big", "Waiting", "it waits for one example.com/rack domain with room for its 8 pods together, rather than spread over several", rackKey},
				{"ns/small", "Admitted", "", "node"},
			},
		},
		{
			name: "the job behind does not fit anyway: big runs spread, and the job behind does not fit",
			jobs: []priority.Job{big, mkJob("ns/huge").user("carol").gang(0, nil, 2, res(6000, gi)).created(young).obj()},
			want: []row{
				{"ns/big", "Admitted", "", zoneKey},
				{"ns/huge", "Waiting", "worker ns/huge-w-1 needs cpu 6000m on a node; the most free on any node is 2000m", ""},
			},
		},
		{
			name: "nobody behind: big runs spread",
			jobs: []priority.Job{big},
			want: []row{{"ns/big", "Admitted", "", zoneKey}},
		},
		{
			name:   "backfill, before reserveAfter (no reservation): big runs spread",
			policy: priority.PolicyBackfill,
			jobs:   []priority.Job{big},
			want:   []row{{"ns/big", "Admitted", "", zoneKey}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := reserveModel()
			if tt.policy != "" {
				m.Policy = tt.policy
			}
			q := m.Admit(topoState(nodes, tt.jobs...), t0)
			var got []row
			for _, j := range tt.jobs {
				d, _ := q.Lookup(j.Key)
				got = append(got, row{d.Key, string(d.Phase), d.Blocker, d.Placement.Level})
				if d.Phase == priority.PhaseAdmitted {
					checkPlanFits(t, nodes, j.Pods, d.Plan)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}
