package priority

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScorePlanned(t *testing.T) {
	ps := Pod{UID: "ps", Name: "ps-0", Role: RolePS, Request: Resources{"cpu": 1000}}
	w0 := Pod{UID: "w0", Name: "w-0", Role: RoleWorker, Request: Resources{"cpu": 1000}}
	w1 := Pod{UID: "w1", Name: "w-1", Role: RoleWorker, Request: Resources{"cpu": 1000}}
	nodes := []Node{{Name: "n1", Free: Resources{"cpu": 8000}}, {Name: "n2", Free: Resources{"cpu": 8000}}, {Name: "n3", Free: Resources{"cpu": 8000}}}
	scoreOf := func(s []NodeScore) map[string]int64 {
		out := map[string]int64{}
		for _, n := range s {
			out[n.Node] = n.Score
		}
		return out
	}
	tests := []struct {
		name string
		pod  Pod
		plan map[string]string
		want map[string]int64
	}{
		{
			name: "no plan: nothing placed, every node neutral",
			pod:  w0,
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 0},
		},
		{
			name: "a worker follows its PS's planned node before the PS is bound",
			pod:  w1,
			plan: map[string]string{"ps": "n2"},
			want: map[string]int64{"n1": 0, "n2": 10, "n3": 0},
		},
		{
			name: "the pod's own planned node gets the top score",
			pod:  w0,
			plan: map[string]string{"ps": "n2", "w0": "n3"},
			want: map[string]int64{"n1": 0, "n2": 10, "n3": 10},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &Job{Key: "ns/a", Pods: []Pod{ps, w0, w1}}
			got := Affinity{}.ScorePlanned(tt.pod, job, tt.plan, nodes, nil)
			if diff := cmp.Diff(tt.want, scoreOf(got)); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
			for _, p := range job.Pods {
				if p.State != PodPending || p.Node != "" {
					t.Errorf("the job was changed: %+v", p)
				}
			}
		})
	}
}
