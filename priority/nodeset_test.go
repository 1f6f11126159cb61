package priority_test

import (
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

func (b *podB) on(s *priority.NodeSet) *podB { b.p.Nodes = s; return b }

// onNodes limits every pod of the job to s.
func (b *jobB) onNodes(s *priority.NodeSet) *jobB {
	for i := range b.j.Pods {
		b.j.Pods[i].Nodes = s
	}
	return b
}

func TestNodeSet(t *testing.T) {
	s := priority.NewNodeSet("the nodes of pool a", []string{"n1", "n3"})
	var all *priority.NodeSet
	if !s.Has("n1") || s.Has("n2") || s.Len() != 2 || !all.Has("anything") || all.Len() != -1 {
		t.Errorf("Has/Len: %v %v %d %v %d", s.Has("n1"), s.Has("n2"), s.Len(), all.Has("anything"), all.Len())
	}
}

// TestFitOnNodeSets: a pod goes only to a node of its set, and says so when none fits.
func TestFitOnNodeSets(t *testing.T) {
	poolB := priority.NewNodeSet("the 2 nodes of pool b", []string{"n3", "n4"})
	none := priority.NewNodeSet("no node (nothing matches its node selector)", nil)
	nodes := cpuNodes(8000, 8000, 8000, 2000)
	tests := []struct {
		name    string
		pods    []priority.Pod
		want    map[string]string
		blocker string
	}{
		{
			name: "a pod limited to pool b skips the first nodes",
			pods: []priority.Pod{mkPod("w", priority.RoleWorker, 0).req(res(1000, gi)).on(poolB).obj()},
			want: map[string]string{"uid-w": "n3"},
		},
		{
			name: "PS spread inside the set; a worker of a PS on a node it may not use goes elsewhere",
			pods: []priority.Pod{
				mkPod("ps0", priority.RolePS, 0).req(res(1000, gi)).on(poolB).obj(),
				mkPod("ps1", priority.RolePS, 1).req(res(1000, gi)).on(poolB).obj(),
				mkPod("w0", priority.RoleWorker, 0).req(res(1000, gi)).obj(),
			},
			// w0 may use any node: it goes next to the first PS (n3).
			want: map[string]string{"uid-ps0": "n3", "uid-ps1": "n4", "uid-w0": "n3"},
		},
		{
			name: "a worker limited to a set other than its PS's node",
			pods: []priority.Pod{
				mkPod("ps0", priority.RolePS, 0).req(res(1000, gi)).obj(),
				mkPod("w0", priority.RoleWorker, 0).req(res(1000, gi)).on(poolB).obj(),
			},
			want: map[string]string{"uid-ps0": "n1", "uid-w0": "n3"},
		},
		{
			name:    "no room on the set's nodes, though other nodes have it",
			pods:    []priority.Pod{mkPod("big", priority.RoleWorker, 0).req(res(9000, gi)).on(poolB).obj()},
			want:    map[string]string{},
			blocker: "worker big needs cpu 9000m on a node; the most free on the 2 nodes of pool b is 8000m",
		},
		{
			name:    "a set with no node",
			pods:    []priority.Pod{mkPod("lost", priority.RoleWorker, 0).req(res(100, gi)).on(none).obj()},
			want:    map[string]string{},
			blocker: "worker lost cannot be placed: it may use none of the nodes (it may use no node (nothing matches its node selector))",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := priority.Fit(nodes, tt.pods)
			if diff := cmp.Diff(tt.want, got.Placement); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
			if got.Blocker != tt.blocker || got.OK != (tt.blocker == "") {
				t.Errorf("ok %v, blocker %q; want %q", got.OK, got.Blocker, tt.blocker)
			}
		})
	}
}

// TestAdmitOnNodeSets: the cases. A job that may use only untainted nodes, too big
// for them, is unschedulable and holds nothing; a job of a full pool waits while one of an
// empty pool runs.
func TestAdmitOnNodeSets(t *testing.T) {
	untainted := priority.NewNodeSet("the 2 of 4 nodes without a taint it does not tolerate (nvidia.com/gpu=present:NoSchedule)", []string{"n1", "n2"})
	poolA := priority.NewNodeSet("the 2 nodes of pool a", []string{"n1", "n2"})
	poolB := priority.NewNodeSet("the 2 nodes of pool b", []string{"n3", "n4"})
	tests := []struct {
		name  string
		state priority.State
		want  []row
		wait  map[string]string
	}{
		{
			name: "taints: 6 x 4 CPU on the 16 CPU it may use",
			state: priority.State{Nodes: capNodes(8000, 8000, 8000, 8000, 8000), Jobs: []priority.Job{
				mkJob("ns/cpu").prio(1000000).gang(0, nil, 6, res(4000, gi)).onNodes(untainted).obj(),
				mkJob("ns/small").gang(0, nil, 2, res(4000, gi)).onNodes(untainted).obj(),
			}},
			want: []row{
				{Key: "ns/small", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/cpu", Phase: priority.PhaseUnschedulable,
					Blocker: "never fits: only 4 of the 6 pods it needs fit on the 2 of 4 nodes without a taint it does not tolerate (nvidia.com/gpu=present:NoSchedule) even with no other job's pods on them"},
			},
		},
		{
			name: "node pools: B waits for pool a, C runs on pool b",
			// A runs on pool a, which is full now; pool b is empty.
			state: priority.State{Nodes: capNodes(8000, 0, 0, 8000, 8000), Jobs: []priority.Job{
				mkJob("ns/b").prio(1000000).gang(0, nil, 2, res(8000, gi)).onNodes(poolA).obj(),
				mkJob("ns/c").gang(0, nil, 2, res(8000, gi)).onNodes(poolB).obj(),
			}},
			want: []row{
				{Key: "ns/b", Phase: priority.PhaseWaiting, Position: 1,
					Blocker: "worker ns/b-w-0 needs cpu 8000m on a node; the most free on the 2 nodes of pool a is 0m"},
				{Key: "ns/c", Phase: priority.PhaseAdmitted, Position: 2},
			},
			wait: map[string]string{"ns/b": "job ns/b waits for its turn: it does not fit yet: its 2 pods need cpu 16000m, memory 2Gi in all, on the 2 nodes of pool a; what fits of it is set aside meanwhile"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := reserveModel().Admit(tt.state, t0)
			if diff := cmp.Diff(tt.want, rowsOf(q)); diff != "" {
				t.Errorf("Admit() (-want +got):\n%s", diff)
			}
			for key, want := range tt.wait {
				if d, _ := q.Lookup(key); d.Wait != want {
					t.Errorf("%s: Wait %q, want %q", key, d.Wait, want)
				}
			}
			checkQueueInvariants(t, q, tt.state)
		})
	}
}

// TestPlansStayOnUsableNodesAndFreeCapacity is a property test on random clusters: a plan
// (admitted jobs' Decision.Plan, and Fit's Placement) never puts a pod on a node it may not
// use, and never puts more on a node than it has free.
func TestPlansStayOnUsableNodesAndFreeCapacity(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	placed, limited := 0, 0
	for round := 0; round < 300; round++ {
		var nodes []priority.Node
		var names []string
		for i := range 2 + r.IntN(8) {
			name := "n" + strconv.Itoa(i)
			free := res(1000*int64(r.IntN(9)), gi*int64(r.IntN(17)), "nvidia.com/gpu", r.IntN(3), "pods", r.IntN(4))
			nodes = append(nodes, priority.Node{Name: name, Free: free, Capacity: free})
			names = append(names, name)
		}
		var sets []*priority.NodeSet
		for range 3 {
			var in []string
			for _, n := range names {
				if r.IntN(2) == 0 {
					in = append(in, n)
				}
			}
			sets = append(sets, priority.NewNodeSet("set", in))
		}
		sets = append(sets, nil)
		byUID := map[string]priority.Pod{}
		var jobs []priority.Job
		for j := range 1 + r.IntN(6) {
			b := mkJob("ns/j" + strconv.Itoa(j)).prio(int32(r.IntN(1000000)))
			for k := range 1 + r.IntN(5) {
				role := priority.RoleWorker
				if k == 0 && r.IntN(2) == 0 {
					role = priority.RolePS
				}
				p := mkPod("j"+strconv.Itoa(j)+"-"+strconv.Itoa(k), role, k).
					req(res(500*int64(1+r.IntN(6)), gi*int64(r.IntN(4)), "nvidia.com/gpu", r.IntN(2))).
					on(sets[r.IntN(len(sets))]).obj()
				byUID[p.UID] = p
				b.pods(&podB{p})
			}
			jobs = append(jobs, b.obj())
		}
		free := map[string]priority.Resources{}
		for _, n := range nodes {
			free[n.Name] = maps.Clone(n.Free)
		}
		take := func(what string, placement map[string]string) {
			for uid, node := range placement {
				p := byUID[uid]
				if !p.Nodes.Has(node) {
					t.Fatalf("round %d, %s: %s placed on %s, which it may not use", round, what, uid, node)
				}
				placed++
				if p.Nodes != nil {
					limited++
				}
				for k, v := range p.Request {
					if v > 0 {
						free[node][k] -= v
					}
				}
				if _, ok := free[node]["pods"]; ok {
					free[node]["pods"]--
				}
			}
			for node, f := range free {
				for k, v := range f {
					if v < 0 {
						t.Fatalf("round %d, %s: node %s has %s %d left", round, what, node, k, v)
					}
				}
			}
		}
		for _, policy := range []priority.Policy{priority.PolicyStrict, priority.PolicyReserve, priority.PolicyBestEffort, priority.PolicyBackfill} {
			m := priority.DefaultModel()
			m.Policy = policy
			q := m.Admit(priority.State{Nodes: nodes, Jobs: jobs}, t0.Add(time.Duration(round)*time.Second))
			for _, n := range nodes {
				free[n.Name] = maps.Clone(n.Free)
			}
			for _, d := range q.Order {
				take(string(policy)+" plan of "+d.Key, d.Plan)
			}
		}
		for _, job := range jobs {
			for _, n := range nodes {
				free[n.Name] = maps.Clone(n.Free)
			}
			take("Fit of "+job.Key, priority.Fit(nodes, job.Pods).Placement)
		}
	}
	if placed < 1000 || limited < 500 {
		t.Errorf("only %d pods placed, %d of them limited to a set: the property was hardly tested", placed, limited)
	}
	t.Logf("%d placements checked, %d of pods limited to a set", placed, limited)
}
