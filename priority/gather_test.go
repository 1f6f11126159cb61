package priority_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

// gatherNodes are seven nodes of 4 CPU with a plain pod (in no job) of 1 CPU on each of
// n0..n5 (Capacity 3 CPU, n6 4), and free what the held pods, running jobs and plain pods
// of each case leave.
func gatherNodes(free ...int64) []priority.Node {
	out := make([]priority.Node, len(free))
	for i, f := range free {
		name := "n" + string(rune('0'+i))
		out[i] = priority.Node{Name: name, Free: res(f, 0), Capacity: res(3000, 0)}
		if i == 6 {
			out[i].Capacity = res(4000, 0)
		}
	}
	return out
}

// TestGatheringGangThatCannotGather: a gang whose binds the gate holds keeps its turn while
// its remaining pods can still be placed. When they cannot (plain pods, which the model does
// not see until they are bound, took the room its plan counted on), its held binds must be
// given back at once, not kept for the gate's hold timeout: first to a gathering gang of
// higher P that cannot gather without their room, and when even that does not make its own
// pods fit, for the room to serve whoever can use it (seen: a bronze gang held two binds
// for 20 s while the gold gang, the highest P, could not gather in their room).
func TestGatheringGangThatCannotGather(t *testing.T) {
	m := priority.DefaultModel()
	m.UserTiers = map[string]string{"alice": "gold", "bob": "silver", "carol": "bronze"}
	g6a := func() *jobB {
		return mkJob("ns/g6a").user("alice").pods(
			mkPod("g6a-ps-0", priority.RolePS, 0).req(res(2000, 0)).held("n0"),
			mkPod("g6a-w-0", priority.RoleWorker, 0).req(res(2000, 0)).held("n0"),
			mkPod("g6a-w-1", priority.RoleWorker, 1).req(res(2000, 0)).held("n1"),
			mkPod("g6a-w-2", priority.RoleWorker, 2).req(res(2000, 0)),
			mkPod("g6a-w-3", priority.RoleWorker, 3).req(res(2000, 0)),
			mkPod("g6a-w-4", priority.RoleWorker, 4).req(res(2000, 0)))
	}
	g3a := func() *jobB {
		return mkJob("ns/g3a").user("carol").pods(
			mkPod("g3a-ps-0", priority.RolePS, 0).req(res(2000, 0)).held("n2"),
			mkPod("g3a-w-0", priority.RoleWorker, 0).req(res(2000, 0)).held("n3"),
			mkPod("g3a-w-1", priority.RoleWorker, 1).req(res(2000, 0)))
	}
	running := mkJob("ns/run").pods(mkPod("run-0", priority.RoleWorker, 0).req(res(2000, 0)).bound("n6"))
	type row struct {
		Key, Phase string
		YieldHeld  bool
		Blocker    string
	}
	tests := []struct {
		name  string
		jobs  []priority.Job
		nodes []priority.Node
		want  []row
	}{
		{
			// n0: g6a's PS and w-0 (0 free); n1: g6a's w-1 (1); n2, n3: g3a's held pods (1
			// each); n4, n5: 3; n6: a running job and a plain pod (1). g6a's three pods of 2
			// CPU fit only with g3a's room: g3a gives it back.
			name:  "a lower gathering gang gives its held room to a higher one that cannot gather without it",
			jobs:  []priority.Job{g6a().obj(), g3a().obj(), running.obj()},
			nodes: gatherNodes(0, 1000, 1000, 1000, 3000, 3000, 1000),
			want: []row{
				{Key: "ns/g6a", Phase: "Admitted"},
				{Key: "ns/g3a", Phase: "Waiting", YieldHeld: true,
					Blocker: "it gives the room of its 2 held binds to ns/g6a, which goes first and cannot gather without it"},
				{Key: "ns/run", Phase: "Running"},
			},
		},
		{
			name:  "a gathering gang whose remaining pods fit keeps its held binds",
			jobs:  []priority.Job{g3a().obj(), running.obj()},
			nodes: gatherNodes(4000, 1000, 1000, 1000, 3000, 3000, 2000),
			want: []row{
				{Key: "ns/g3a", Phase: "Admitted"},
				{Key: "ns/run", Phase: "Running"},
			},
		},
		{
			// Only 1 CPU free a node: g3a's last pod fits nowhere, and nobody behind holds
			// its room.
			name:  "a gathering gang that cannot gather gives its held room back",
			jobs:  []priority.Job{g3a().obj(), running.obj()},
			nodes: gatherNodes(1000, 1000, 1000, 1000, 1000, 1000, 0),
			want: []row{
				{Key: "ns/g3a", Phase: "Waiting", YieldHeld: true,
					Blocker: "its gang cannot gather: worker ns/g3a-w-1 needs cpu 2000m on a node; the most free on any node is 1000m; its 2 held binds are given back"},
				{Key: "ns/run", Phase: "Running"},
			},
		},
		{
			// g6a does not fit even with g3a's room (n4..n6 have 1 CPU free): g3a keeps it,
			// and g6a, which cannot gather, gives its own back, where g3a's last pod fits.
			name:  "a higher gang that cannot gather even with a lower one's room gives its own back",
			jobs:  []priority.Job{g6a().obj(), g3a().obj(), running.obj()},
			nodes: gatherNodes(0, 1000, 1000, 1000, 1000, 1000, 1000),
			want: []row{
				{Key: "ns/g6a", Phase: "Waiting", YieldHeld: true,
					Blocker: "its gang cannot gather: worker ns/g6a-w-2 needs cpu 2000m on a node; the most free on any node is 1000m; its 3 held binds are given back"},
				{Key: "ns/g3a", Phase: "Admitted"},
				{Key: "ns/run", Phase: "Running"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := m.Admit(priority.State{Jobs: tt.jobs, Nodes: tt.nodes}, t0)
			var got []row
			for _, j := range tt.jobs {
				d, ok := q.Lookup(j.Key)
				if !ok {
					t.Fatalf("%s not in the queue", j.Key)
				}
				got = append(got, row{Key: d.Key, Phase: string(d.Phase), YieldHeld: d.YieldHeld, Blocker: d.Blocker})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGatheringGangWaitSentences: what the filter tells the pods of a gang that gives its
// held binds back names no free amounts.
func TestGatheringGangWaitSentences(t *testing.T) {
	m := priority.DefaultModel()
	m.UserTiers = map[string]string{"alice": "gold"}
	hi := mkJob("ns/hi").user("alice").pods(
		mkPod("hi-w-0", priority.RoleWorker, 0).req(res(2000, 0)).held("n0"),
		mkPod("hi-w-1", priority.RoleWorker, 1).req(res(2000, 0)),
		mkPod("hi-w-2", priority.RoleWorker, 2).req(res(2000, 0))).obj()
	lo := mkJob("ns/lo").pods(
		mkPod("lo-w-0", priority.RoleWorker, 0).req(res(2000, 0)).held("n1"),
		mkPod("lo-w-1", priority.RoleWorker, 1).req(res(2000, 0))).obj()
	nodes := []priority.Node{node("n0", res(1000, 0)), node("n1", res(0, 0)), node("n2", res(1000, 0))}
	q := m.Admit(priority.State{Jobs: []priority.Job{hi, lo}, Nodes: nodes}, t0)
	want := map[string]string{
		"ns/hi": "job ns/hi waits for its turn: its gang cannot gather now: its 2 pods need cpu 4000m in all",
		"ns/lo": "",
	}
	got := map[string]string{}
	for _, k := range []string{"ns/hi", "ns/lo"} {
		d, _ := q.Lookup(k)
		got[k] = d.Wait
	}
	// hi cannot gather even with lo's room (n1 would hold one of its two pods): it gives
	// its own back, and lo, which fits in it (n0), has the turn.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Wait (-want +got):\n%s", diff)
	}

	nodes[2].Free = res(2000, 0) // now hi fits with lo's room: n1 and n2
	q = m.Admit(priority.State{Jobs: []priority.Job{hi, lo}, Nodes: nodes}, t0)
	want = map[string]string{"ns/hi": "", "ns/lo": "job ns/lo waits for its turn: it gives its held room to ns/hi, which goes first"}
	for _, k := range []string{"ns/hi", "ns/lo"} {
		d, _ := q.Lookup(k)
		got[k] = d.Wait
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Wait (-want +got):\n%s", diff)
	}
}
