package priority_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

// TestPlanEnqueue: pending jobs in queue order, each needing its demand plus the demands of
// the jobs ahead that can start at all; a job bigger than the capacity holds nobody back.
func TestPlanEnqueue(t *testing.T) {
	now := t0.Add(time.Hour)
	// One user, one size: the older job waited longer and comes first.
	first := priority.EnqueueCandidate{Job: mkJob("ns/first").min(2).obj(), Demand: res(8000, 0)}
	big := priority.EnqueueCandidate{Job: mkJob("ns/big").min(2).created(t0.Add(time.Minute)).obj(), Demand: res(64000, 0)}
	last := priority.EnqueueCandidate{Job: mkJob("ns/last").min(2).created(t0.Add(2 * time.Minute)).obj(), Demand: res(8000, 0)}
	model := priority.DefaultModel()
	type got struct {
		Key, TooBig, Ahead, Short string
		Position                  int
		NeedCPU                   int64
		May                       bool
	}
	tests := []struct {
		name string
		free int64
		want []got
	}{
		{"all that can start fit", 32000, []got{
			{Key: "ns/first", Position: 1, NeedCPU: 8000, May: true},
			{Key: "ns/big", TooBig: "cpu", Ahead: "ns/first", Position: 2, NeedCPU: 72000, Short: "cpu"},
			{Key: "ns/last", Ahead: "ns/big", Position: 3, NeedCPU: 16000, May: true},
		}},
		{"room for the first only", 12000, []got{
			{Key: "ns/first", Position: 1, NeedCPU: 8000, May: true},
			{Key: "ns/big", TooBig: "cpu", Ahead: "ns/first", Position: 2, NeedCPU: 72000, Short: "cpu"},
			{Key: "ns/last", Ahead: "ns/big", Position: 3, NeedCPU: 16000, Short: "cpu"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := model.PlanEnqueue([]priority.EnqueueCandidate{last, big, first},
				res(tt.free, 0), res(32000, 0), []string{"cpu", "memory"}, now)
			var out []got
			for _, j := range plan.Order {
				may, short := plan.MayEnqueue(j)
				out = append(out, got{Key: j.Key, TooBig: j.TooBig, Ahead: j.Ahead, Short: short, Position: j.Position, NeedCPU: j.Need["cpu"], May: may})
				if byKey, ok := plan.Job(j.Key); !ok || byKey != j {
					t.Errorf("Job(%q) does not find the planned job", j.Key)
				}
			}
			if diff := cmp.Diff(tt.want, out); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanEnqueueSaturates: demands near the int64 limit add up to the limit, not around it.
func TestPlanEnqueueSaturates(t *testing.T) {
	huge := int64(1) << 62
	var pending []priority.EnqueueCandidate
	for _, key := range []string{"ns/a", "ns/b", "ns/c"} {
		pending = append(pending, priority.EnqueueCandidate{Job: mkJob(key).min(1).obj(), Demand: res(huge, 0)})
	}
	plan := priority.DefaultModel().PlanEnqueue(pending, res(huge*2, 0), res(huge*2, 0), []string{"cpu"}, t0)
	last := plan.Order[len(plan.Order)-1]
	if last.Need["cpu"] <= 0 {
		t.Fatalf("need overflowed: %d", last.Need["cpu"])
	}
	if may, short := plan.MayEnqueue(last); may || short != "cpu" {
		t.Errorf("the third job may enqueue: %t, short %q; want short of cpu", may, short)
	}
}
