package priority_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

// gpuClass is the resource a DRA DeviceClass's devices are counted under (extender/devices).
const gpuClass = priority.DeviceClassPrefix + "gpu.example.com"

// capNodes are nodes with the given free cpu and, as their Capacity, the given cpu each
// would offer with no job's pods on it; both with 64Gi of memory.
func capNodes(capacity int64, free ...int64) []priority.Node {
	out := make([]priority.Node, len(free))
	for i, f := range free {
		out[i] = priority.Node{Name: "n" + strconv.Itoa(i+1), Free: res(f, 64*gi), Capacity: res(capacity, 64*gi)}
	}
	return out
}

// TestAdmitNeverFits: a job that cannot be placed even on the nodes' Capacity is
// Unschedulable under every policy: it takes no turn, sets nothing aside, stops nobody, and
// a starvation bound does not give it the turn. A job that fits the Capacity but not what is
// free now waits as before.
func TestAdmitNeverFits(t *testing.T) {
	const hugeBlocker = "never fits: only 8 of the 10 pods it needs fit even with no other job's pods on the nodes"
	// The issue's cluster: 4 x 8 CPU, empty. huge is 1 PS + 9 workers x 4 CPU = 40 CPU,
	// older than the starvation bound and urgent; small is 1 + 1 x 4 CPU.
	issueJobs := func() []priority.Job {
		return []priority.Job{
			mkJob("ns/huge").urgent().created(t0.Add(-40*time.Minute)).gang(1, res(4000, gi), 9, res(4000, gi)).obj(),
			mkJob("ns/small").gang(1, res(4000, gi), 1, res(4000, gi)).obj(),
		}
	}
	tests := []struct {
		name     string
		policies []priority.Policy
		state    priority.State
		want     []row
	}{
		{
			name:     "a job bigger than the cluster takes no turn and holds nothing back",
			policies: []priority.Policy{priority.PolicyStrict, priority.PolicyReserve, priority.PolicyBestEffort},
			state:    priority.State{Nodes: capNodes(8000, 8000, 8000, 8000, 8000), Jobs: issueJobs()},
			want: []row{
				{Key: "ns/small", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/huge", Phase: priority.PhaseUnschedulable, Blocker: hugeBlocker, Starved: true},
			},
		},
		{
			name:     "a pod bigger than any node's capacity, pods in no job taking the rest",
			policies: []priority.Policy{priority.PolicyStrict, priority.PolicyReserve},
			// Each node has 8 CPU, half taken by pods in no job: 4000m is all a job can get.
			state: priority.State{Nodes: capNodes(4000, 4000, 4000), Jobs: []priority.Job{
				workerJob("ns/big", 1000000, 6000).obj(),
				workerJob("ns/l", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/big", Phase: priority.PhaseUnschedulable,
					Blocker: "never fits: worker ns/big-w-0 needs cpu 6000m on a node; the most free on any node is 4000m even with no other job's pods on the nodes"},
			},
		},
		{
			name:     "jobs of the same shape each name their own pod",
			policies: []priority.Policy{priority.PolicyStrict, priority.PolicyBestEffort},
			state: priority.State{Nodes: capNodes(4000, 4000), Jobs: []priority.Job{
				workerJob("ns/a", 1000000, 6000).obj(),
				workerJob("ns/b", 0, 6000).obj(),
			}},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseUnschedulable,
					Blocker: "never fits: worker ns/a-w-0 needs cpu 6000m on a node; the most free on any node is 4000m even with no other job's pods on the nodes"},
				{Key: "ns/b", Phase: priority.PhaseUnschedulable,
					Blocker: "never fits: worker ns/b-w-0 needs cpu 6000m on a node; the most free on any node is 4000m even with no other job's pods on the nodes"},
			},
		},
		{
			name:     "strict: a job that fits the capacity but not the free room blocks those behind it",
			policies: []priority.Policy{priority.PolicyStrict},
			// Running jobs use every node now; they will end.
			state: priority.State{Nodes: capNodes(8000, 0, 0), Jobs: []priority.Job{
				mkJob("ns/a").prio(1000000).gang(0, nil, 2, res(8000, gi)).obj(),
				workerJob("ns/l", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseWaiting, Position: 1, Blocker: "worker ns/a-w-0 needs cpu 8000m on a node; the most free on any node is 0m"},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/a", Blocker: "strict order: behind ns/a"},
			},
		},
		{
			name:     "reserve: only a job that can fit some day reserves",
			policies: []priority.Policy{priority.PolicyReserve},
			state: priority.State{Nodes: capNodes(4000, 4000, 0), Jobs: []priority.Job{
				mkJob("ns/never").prio(1000000).gang(0, nil, 3, res(4000, gi)).obj(), // 3 x 4 CPU on 2 x 4 CPU
				mkJob("ns/some-day").prio(900000).gang(0, nil, 2, res(4000, gi)).obj(),
				workerJob("ns/l", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/some-day", Phase: priority.PhaseWaiting, Position: 1,
					Blocker: "worker ns/some-day-w-1 needs cpu 4000m on a node; the most free on any node is 0m"},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/some-day",
					Blocker: "does not fit beside the reservation of ns/some-day: worker ns/l-w-0 needs cpu 1000m on a node; the most free on any node is 0m"},
				{Key: "ns/never", Phase: priority.PhaseUnschedulable, Blocker: "never fits: only 2 of the 3 pods it needs fit even with no other job's pods on the nodes"},
			},
		},
		{
			name:     "a partly bound job whose own pods leave no room for the rest is reported, not repaired",
			policies: []priority.Policy{priority.PolicyStrict, priority.PolicyReserve, priority.PolicyBestEffort},
			// r's PS holds n1; its two workers would need n2 and a third node.
			state: priority.State{Nodes: capNodes(4000, 0, 4000), Jobs: []priority.Job{
				mkJob("ns/r").pods(
					mkPod("r-ps-0", priority.RolePS, 0).req(res(4000, gi)).bound("n1"),
					mkPod("r-w-0", priority.RoleWorker, 0).req(res(4000, gi)),
					mkPod("r-w-1", priority.RoleWorker, 1).req(res(4000, gi)),
				).obj(),
				workerJob("ns/l", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/r", Phase: priority.PhaseUnschedulable, Repair: true, Blocker: "never fits: only 1 of the 2 pods it needs fit even with no other job's pods on the nodes"},
			},
		},
		{
			name:     "DRA devices: a gang needing more of a class than the nodes have names the class",
			policies: []priority.Policy{priority.PolicyStrict, priority.PolicyReserve},
			state: priority.State{Nodes: []priority.Node{
				{Name: "n1", Free: res(8000, 64*gi, gpuClass, 4), Capacity: res(8000, 64*gi, gpuClass, 4)},
				{Name: "n2", Free: res(8000, 64*gi, gpuClass, 4), Capacity: res(8000, 64*gi, gpuClass, 4)},
			}, Jobs: []priority.Job{
				mkJob("ns/big").gang(0, nil, 10, res(100, gi, gpuClass, 1)).obj(),
				mkJob("ns/one").gang(0, nil, 1, res(100, gi, gpuClass, 5)).obj(),
				mkJob("ns/fits").gang(0, nil, 8, res(100, gi, gpuClass, 1)).obj(),
			}},
			want: []row{
				{Key: "ns/fits", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/big", Phase: priority.PhaseUnschedulable,
					Blocker: "never fits: only 8 of the 10 pods it needs fit (they need 10 gpu.example.com devices; the nodes have 8) even with no other job's pods on the nodes"},
				{Key: "ns/one", Phase: priority.PhaseUnschedulable,
					Blocker: "never fits: worker ns/one-w-0 needs 5 gpu.example.com devices on a node; the most free on any node is 4 even with no other job's pods on the nodes"},
			},
		},
		{
			name:     "a node of unknown capacity counts as unlimited: the job waits",
			policies: []priority.Policy{priority.PolicyReserve},
			state: priority.State{Nodes: []priority.Node{node("n1", res(1000, gi))}, Jobs: []priority.Job{
				workerJob("ns/a", 0, 2000).obj(),
			}},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseWaiting, Position: 1, Blocker: "worker ns/a-w-0 needs cpu 2000m on a node; the most free on any node is 1000m"},
			},
		},
		{
			name:     "no nodes at all",
			policies: []priority.Policy{priority.PolicyReserve},
			state:    priority.State{Jobs: []priority.Job{workerJob("ns/a", 0, 1000).obj()}},
			want:     []row{{Key: "ns/a", Phase: priority.PhaseUnschedulable, Blocker: "never fits: there are no nodes"}},
		},
	}
	for _, tt := range tests {
		for _, policy := range tt.policies {
			t.Run(tt.name+"/"+string(policy), func(t *testing.T) {
				m := priority.DefaultModel()
				m.Policy = policy
				q := m.Admit(tt.state, t0)
				if diff := cmp.Diff(tt.want, rowsOf(q)); diff != "" {
					t.Errorf("Admit() (-want +got):\n%s", diff)
				}
				checkQueueInvariants(t, q, tt.state)
			})
		}
	}
}

// TestUnschedulableMatchesFit checks, on random clusters, that a job is Unschedulable only
// when it cannot be placed on the nodes' Capacity: every Unschedulable job fails Fit there,
// and every other job in the queue fits there, by Fit or, where Fit's first fit fails, by
// the topology-aware placement, whose plan for the job alone on the Capacity is checked
// node by node. Jobs have no bound or held pods, so the Capacity is the whole question.
func TestUnschedulableMatchesFit(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 400; round++ {
		var nodes, capacityNodes []priority.Node
		for i := range 1 + r.IntN(6) {
			capacity := res(1000*int64(1+r.IntN(8)), gi*int64(1+r.IntN(16)), "nvidia.com/gpu", r.IntN(3))
			free := priority.Resources{}
			for k, v := range capacity {
				free[k] = v - r.Int64N(v+1)
			}
			name := "n" + strconv.Itoa(i)
			nodes = append(nodes, priority.Node{Name: name, Free: free, Capacity: capacity})
			capacityNodes = append(capacityNodes, priority.Node{Name: name, Free: capacity})
		}
		var jobs []priority.Job
		for j := range 1 + r.IntN(5) {
			req := func() priority.Resources {
				return res(500*int64(1+r.IntN(10)), gi*int64(r.IntN(8)), "nvidia.com/gpu", r.IntN(2))
			}
			jobs = append(jobs, mkJob("ns/j"+strconv.Itoa(j)).prio(int32(r.IntN(1000000))).
				gang(r.IntN(3), req(), 1+r.IntN(6), req()).obj())
		}
		for _, policy := range []priority.Policy{priority.PolicyStrict, priority.PolicyReserve, priority.PolicyBestEffort, priority.PolicyBackfill} {
			m := priority.DefaultModel()
			m.Policy = policy
			q := m.Admit(priority.State{Nodes: nodes, Jobs: jobs}, t0)
			for i := range jobs {
				d, _ := q.Lookup(jobs[i].Key)
				fits := priority.Fit(capacityNodes, jobs[i].Pods).OK
				unschedulable := d.Phase == priority.PhaseUnschedulable
				if unschedulable && fits {
					t.Fatalf("round %d, %s: %s is %s but Fit on the capacity places it\nnodes %+v\njob %+v",
						round, policy, d.Key, d.Phase, nodes, jobs[i])
				}
				if !unschedulable && !fits {
					alone := m.Admit(priority.State{Nodes: capacityNodes, Jobs: jobs[i : i+1]}, t0)
					a, _ := alone.Lookup(jobs[i].Key)
					if a.Phase != priority.PhaseAdmitted {
						t.Fatalf("round %d, %s: %s is %s, but alone on the capacity it is %s\nnodes %+v\njob %+v",
							round, policy, d.Key, d.Phase, a.Phase, nodes, jobs[i])
					}
					checkPlanFits(t, capacityNodes, jobs[i].Pods, a.Plan)
				}
			}
		}
	}
}

// checkPlanFits checks that plan places every pod on a node with room for all the pods it
// puts there, every resource.
func checkPlanFits(t *testing.T, nodes []priority.Node, pods []priority.Pod, plan map[string]string) {
	t.Helper()
	used := map[string]priority.Resources{}
	for _, p := range pods {
		n, ok := plan[p.UID]
		if !ok {
			t.Fatalf("plan %v leaves out %s", plan, p.UID)
		}
		if used[n] == nil {
			used[n] = priority.Resources{}
		}
		for k, v := range p.Request {
			used[n][k] += v
		}
	}
	for _, n := range nodes {
		for k, v := range used[n.Name] {
			if v > 0 && v > n.Free[k] {
				t.Fatalf("plan %v puts %s %d on %s, which has %d", plan, k, v, n.Name, n.Free[k])
			}
		}
	}
}

// TestRank: Rank gives Admit's walk order without fitting: running jobs are left out, and
// no job is unschedulable, not even on a cluster without nodes.
func TestRank(t *testing.T) {
	jobs := []priority.Job{
		workerJob("ns/low", 0, 1000).obj(),
		workerJob("ns/high", 1000000, 1000).obj(),
		workerJob("ns/starved", 0, 1000).created(t0.Add(-time.Hour)).obj(),
		mkJob("ns/run").pods(mkPod("run-w-0", priority.RoleWorker, 0).bound("n1")).obj(),
	}
	m := priority.DefaultModel()
	var got []string
	for i, d := range m.Rank(jobs, t0) {
		got = append(got, d.Key)
		if d.Position != i+1 || d.QueueLen != 3 || d.Phase != "" || d.P == 0 {
			t.Errorf("%s: position %d, queue %d, phase %q, P %v", d.Key, d.Position, d.QueueLen, d.Phase, d.P)
		}
	}
	if want := []string{"ns/starved", "ns/high", "ns/low"}; !cmp.Equal(want, got) {
		t.Errorf("Rank order %v, want %v", got, want)
	}
	var admitted []string
	for _, d := range m.Admit(priority.State{Nodes: cpuNodes(100000), Jobs: jobs}, t0).Order {
		admitted = append(admitted, d.Key)
	}
	if !cmp.Equal(admitted, got) {
		t.Errorf("Admit order %v, Rank order %v", admitted, got)
	}
}
