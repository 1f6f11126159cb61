package priority_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

const (
	rackKey = "example.com/rack"
	zoneKey = "topology.kubernetes.io/zone"
)

// rackCluster is racks racks of perRack nodes of cpu millicores each, the racks split
// evenly over zones. Node names interleave the racks (n00 in r0, n01 in r1, ...), so a
// placement that keeps to a rack does so by its labels, not by name order.
func rackCluster(zones, racks, perRack int, cpu int64) []priority.Node {
	var out []priority.Node
	for i := range racks * perRack {
		r := i % racks
		free := res(cpu, 64*gi)
		n := node(fmt.Sprintf("n%02d", i), free)
		n.Capacity = res(cpu, 64*gi)
		n.Labels = map[string]string{rackKey: fmt.Sprintf("r%d", r), zoneKey: fmt.Sprintf("z%d", r*zones/racks)}
		out = append(out, n)
	}
	return out
}

// topoState is a state over nodes with the rack and zone levels.
func topoState(nodes []priority.Node, jobs ...priority.Job) priority.State {
	return priority.State{Nodes: nodes, Jobs: jobs, Topology: priority.NewNodeIndex(nodes, []string{rackKey, zoneKey}, nil)}
}

// where says, for each pod of a decision's plan, its node's rack: "ps-0@n03/r3".
func where(nodes []priority.Node, job priority.Job, plan map[string]string) []string {
	rack := map[string]string{}
	for _, n := range nodes {
		rack[n.Name] = n.Labels[rackKey]
	}
	var out []string
	for _, p := range job.Pods {
		n := p.Node
		if p.State == priority.PodPending {
			n = plan[p.UID]
		}
		_, name, _ := strings.Cut(p.Name, "-")
		out = append(out, name+"@"+n+"/"+rack[n])
	}
	return out
}

func TestTopologyPlacement(t *testing.T) {
	busy := func(nodes []priority.Node, cpu map[string]int64) []priority.Node {
		for i := range nodes {
			if c, ok := cpu[nodes[i].Name]; ok {
				nodes[i].Free = res(c, 64*gi)
			}
		}
		return nodes
	}
	tests := []struct {
		name  string
		nodes []priority.Node
		job   priority.Job
		want  []string           // where, in the job's pod order
		place priority.Placement // the decision's Placement
	}{
		{
			name:  "one PS and its workers fit one node: that node, the first in topology order",
			nodes: rackCluster(1, 2, 4, 8000),
			job:   mkJob("ns/a").gang(1, res(2000, gi), 3, res(2000, gi)).obj(),
			want:  []string{"ps-0@n00/r0", "w-0@n00/r0", "w-1@n00/r0", "w-2@n00/r0"},
			place: priority.Placement{Level: "node", Domains: []string{"r0"}, Workers: 3, NearPSNode: 3, NearPSDomain: 3},
		},
		{
			name:  "two PS: one rack, each PS on its own node with the workers it serves",
			nodes: rackCluster(1, 2, 4, 8000),
			job:   mkJob("ns/a").gang(2, res(2000, gi), 6, res(2000, gi)).obj(),
			want: []string{"ps-0@n00/r0", "ps-1@n02/r0",
				"w-0@n00/r0", "w-1@n00/r0", "w-2@n00/r0", "w-3@n02/r0", "w-4@n02/r0", "w-5@n02/r0"},
			place: priority.Placement{Level: rackKey, Domains: []string{"r0"}, Workers: 6, NearPSNode: 6, NearPSDomain: 6},
		},
		{
			name: "two PS go to the rack that holds them most tightly",
			// r0 has 4 x 8000 free, r1 two nodes of 3000 and two full: 6000 in r1 is the tighter.
			nodes: busy(rackCluster(1, 2, 4, 8000), map[string]int64{"n01": 3000, "n03": 3000, "n05": 0, "n07": 0}),
			job:   mkJob("ns/a").gang(2, res(1000, gi), 2, res(2000, gi)).obj(),
			want:  []string{"ps-0@n01/r1", "ps-1@n03/r1", "w-0@n01/r1", "w-1@n03/r1"},
			place: priority.Placement{Level: rackKey, Domains: []string{"r1"}, Workers: 2, NearPSNode: 2, NearPSDomain: 2},
		},
		{
			name: "bound pods anchor the rack, even where another rack is tighter",
			nodes: busy(rackCluster(1, 2, 4, 8000), map[string]int64{"n01": 2000, "n03": 2000, "n05": 2000, "n07": 2000,
				"n00": 6000}),
			job: mkJob("ns/a").min(3).pods(
				mkPod("a-ps-0", priority.RolePS, 0).req(res(2000, gi)).bound("n00"),
				mkPod("a-w-0", priority.RoleWorker, 0).req(res(6000, gi)),
				mkPod("a-w-1", priority.RoleWorker, 1).req(res(6000, gi)),
			).obj(),
			want:  []string{"ps-0@n00/r0", "w-0@n00/r0", "w-1@n02/r0"},
			place: priority.Placement{Level: rackKey, Domains: []string{"r0"}, Workers: 2, NearPSNode: 1, NearPSDomain: 2},
		},
		{
			name:  "bigger than a rack: the fewest racks, each PS with the workers it serves",
			nodes: rackCluster(1, 4, 2, 8000),
			job:   mkJob("ns/a").gang(2, res(2000, gi), 10, res(2000, gi)).obj(),
			want: []string{"ps-0@n00/r0", "ps-1@n01/r1",
				"w-0@n00/r0", "w-1@n00/r0", "w-2@n00/r0", "w-3@n04/r0", "w-4@n04/r0",
				"w-5@n01/r1", "w-6@n01/r1", "w-7@n01/r1", "w-8@n05/r1", "w-9@n05/r1"},
			place: priority.Placement{Level: zoneKey, Domains: []string{"r0", "r1"}, Workers: 10, NearPSNode: 6, NearPSDomain: 10},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := topoState(tt.nodes, tt.job)
			q := priority.DefaultModel().Admit(s, t0)
			d, _ := q.Lookup(tt.job.Key)
			if d.Phase != priority.PhaseAdmitted {
				t.Fatalf("phase %s (%s), want Admitted", d.Phase, d.Blocker)
			}
			if diff := cmp.Diff(tt.want, where(tt.nodes, tt.job, d.Plan)); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.place, d.Placement); diff != "" {
				t.Errorf("Placement (-want +got):\n%s", diff)
			}
			checkPlanFits(t, tt.nodes, pendingOf(tt.job), d.Plan)
		})
	}
}

func pendingOf(j priority.Job) []priority.Pod {
	var out []priority.Pod
	for _, p := range j.Pods {
		if p.State == priority.PodPending {
			out = append(out, p)
		}
	}
	return out
}

func TestTopologyRequests(t *testing.T) {
	bigGang := func(key string) *jobB { return mkJob(key).gang(1, res(2000, gi), 5, res(6000, gi)) } // 32000m
	tests := []struct {
		name    string
		nodes   []priority.Node
		job     priority.Job
		phase   priority.JobPhase
		blocker string
		level   string
	}{
		{
			name:  "no request: spread over two racks when no rack holds it",
			nodes: rackCluster(1, 2, 2, 16000),
			job:   bigGang("ns/a").obj(),
			phase: priority.PhaseAdmitted, level: zoneKey,
		},
		{
			name:  "a required rack that no rack has room for now: the job waits",
			nodes: busyAll(rackCluster(1, 2, 2, 32000), 16000),
			job:   bigGang("ns/a").required(rackKey).obj(),
			phase: priority.PhaseWaiting, blocker: "no one " + rackKey + " domain has room for its 6 pods together",
		},
		{
			name:    "a required rack that no rack could ever hold: unschedulable",
			nodes:   rackCluster(1, 2, 2, 16000),
			job:     bigGang("ns/a").required(rackKey).obj(),
			phase:   priority.PhaseUnschedulable,
			blocker: "never fits: no one " + rackKey + " domain can hold its 6 pods even with no other job's pods on the nodes",
		},
		{
			name:  "a required zone holds it",
			nodes: rackCluster(1, 2, 2, 16000),
			job:   bigGang("ns/a").required(zoneKey).obj(),
			phase: priority.PhaseAdmitted, level: zoneKey,
		},
		{
			name:  "required hostname: one node",
			nodes: rackCluster(1, 2, 2, 40000),
			job:   bigGang("ns/a").required(priority.HostnameLevel).obj(),
			phase: priority.PhaseAdmitted, level: "node",
		},
		{
			name:    "a key that is no topology level",
			nodes:   rackCluster(1, 2, 2, 40000),
			job:     bigGang("ns/a").required("example.com/row").obj(),
			phase:   priority.PhaseUnschedulable,
			blocker: "never fits: it requires one example.com/row domain, and example.com/row is not a topology level of the extender (affinity.topology)",
		},
		{
			name: "preferred zone: the tightest zone first, then the lowest level inside it",
			// Each zone is one rack of 3 x 16000: the job lands in one rack either way.
			nodes: rackCluster(2, 2, 3, 16000),
			job:   bigGang("ns/a").preferred(zoneKey).obj(),
			phase: priority.PhaseAdmitted, level: rackKey,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := priority.DefaultModel().Admit(topoState(tt.nodes, tt.job), t0)
			d, _ := q.Lookup(tt.job.Key)
			if d.Phase != tt.phase || d.Blocker != tt.blocker {
				t.Fatalf("phase %s, blocker %q; want %s, %q", d.Phase, d.Blocker, tt.phase, tt.blocker)
			}
			if tt.level != "" && d.Placement.Level != tt.level {
				t.Errorf("placement level %q, want %q (%s)", d.Placement.Level, tt.level, d.Placement)
			}
		})
	}
}

// busyAll leaves free only cpu millicores on every node.
func busyAll(nodes []priority.Node, cpu int64) []priority.Node {
	for i := range nodes {
		nodes[i].Free = res(cpu, 64*gi)
	}
	return nodes
}

// TestPSApartNeverSharesANode: with hard PS anti-affinity the plan never puts two PS on
// one node (the filter would refuse it), even when that leaves the job waiting.
func TestPSApartNeverSharesANode(t *testing.T) {
	nodes := rackCluster(1, 1, 1, 64000) // one big node
	job := mkJob("ns/a").gang(2, res(1000, gi), 2, res(1000, gi)).obj()
	q := priority.DefaultModel().Admit(topoState(nodes, job), t0)
	if d, _ := q.Lookup("ns/a"); d.Phase != priority.PhaseAdmitted {
		t.Fatalf("soft: phase %s, want Admitted (two PS may share the only node)", d.Phase)
	}
	job.PSApart = true
	q = priority.DefaultModel().Admit(topoState(nodes, job), t0)
	if d, _ := q.Lookup("ns/a"); d.Phase == priority.PhaseAdmitted {
		t.Fatalf("hard: admitted with plan %v: two PS on one node", d.Plan)
	}
}

// TestReserveKeepsToTheDomain: the head that does not fit reserves room in the rack it is
// to run in; a job behind it may use the other rack, not the reserved room.
func TestReserveKeepsToTheDomain(t *testing.T) {
	nodes := rackCluster(1, 2, 2, 16000)
	// r0 (n00, n02) half full, r1 (n01, n03) all but full.
	nodes[0].Free, nodes[2].Free = res(8000, 64*gi), res(8000, 64*gi)
	nodes[1].Free, nodes[3].Free = res(2000, 64*gi), res(2000, 64*gi)
	head := mkJob("ns/head").prio(900000).gang(1, res(4000, gi), 3, res(8000, gi)).required(rackKey).obj() // 28000m
	small := mkJob("ns/small").prio(100000).gang(0, nil, 1, res(2000, gi)).obj()
	back := mkJob("ns/back").prio(50000).gang(0, nil, 1, res(6000, gi)).obj()
	q := reserveModel().Admit(topoState(nodes, head, small, back), t0)
	got := map[string]priority.JobPhase{}
	for _, d := range q.Order {
		got[d.Key] = d.Phase
	}
	want := map[string]priority.JobPhase{"ns/head": priority.PhaseWaiting, "ns/small": priority.PhaseAdmitted, "ns/back": priority.PhaseWaiting}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("phases (-want +got):\n%s", diff)
	}
	d, _ := q.Lookup("ns/head")
	if d.Placement.Level != rackKey || !slices.Equal(d.Placement.Domains, []string{"r0"}) {
		t.Errorf("reservation %s, want in rack r0", d.Placement)
	}
	s, _ := q.Lookup("ns/small")
	if n := s.Plan["uid-small-w-0"]; n != "n01" && n != "n03" {
		t.Errorf("small planned on %s, want r1 (n01 or n03): r0 is reserved", n)
	}
}

// TestPlacementKeepsGangsInOneDomain is the property: whenever one domain of the lowest
// level at which one can hold the whole gang exists (each checked with Fit on its nodes
// alone), the plan keeps the whole gang, so every worker with its PS, inside one domain
// of that level; and every plan fits its nodes.
func TestPlacementKeepsGangsInOneDomain(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 23))
	checked := map[string]int{}
	defer func() {
		// The rounds must exercise both levels, or the property says little.
		t.Logf("rounds checked by level: %v", checked)
		if checked[rackKey] < 50 || checked[zoneKey] < 10 {
			t.Errorf("rounds checked by level %v: too few", checked)
		}
	}()
	for round := range 300 {
		zones := 1 + r.IntN(2)
		racks := zones * (1 + r.IntN(3))
		nodes := rackCluster(zones, racks, 1+r.IntN(4), 1000*int64(4+r.IntN(13)))
		for i := range nodes {
			if r.IntN(3) == 0 {
				nodes[i].Free = res(nodes[i].Free["cpu"]*int64(r.IntN(4))/4, 64*gi)
			}
		}
		job := mkJob("ns/j").gang(r.IntN(3), res(1000*int64(1+r.IntN(3)), gi), 1+r.IntN(8), res(1000*int64(1+r.IntN(4)), gi)).obj()
		m := priority.DefaultModel()
		m.SpreadAfter = 0 // the placement alone: a job that fits is admitted
		q := m.Admit(topoState(nodes, job), t0)
		d, _ := q.Lookup(job.Key)
		lowest := lowestHoldingLevel(nodes, job)
		if lowest == "" {
			continue // no single rack or zone holds it; nothing to keep
		}
		checked[lowest]++
		if d.Phase != priority.PhaseAdmitted {
			t.Fatalf("round %d: %s fits one %s but is %s (%s)", round, job.Key, lowest, d.Phase, d.Blocker)
		}
		checkPlanFits(t, nodes, job.Pods, d.Plan)
		if got := d.Placement.Level; levelRank(got) > levelRank(lowest) {
			t.Fatalf("round %d: plan spans a %s, but one %s holds the gang: %v", round, got, lowest, where(nodes, job, d.Plan))
		}
	}
}

func levelRank(level string) int {
	return slices.Index([]string{"node", rackKey, zoneKey, "cluster"}, level)
}

// lowestHoldingLevel is the lowest of rack and zone at which one domain's nodes, alone,
// fit the job by Fit ("" when neither does; the node level is not asked, since two PS
// are kept apart).
func lowestHoldingLevel(nodes []priority.Node, job priority.Job) string {
	for _, key := range []string{rackKey, zoneKey} {
		domains := map[string][]priority.Node{}
		for _, n := range nodes {
			domains[n.Labels[key]] = append(domains[n.Labels[key]], n)
		}
		for _, ns := range domains {
			if priority.Fit(ns, job.Pods).OK {
				return key
			}
		}
	}
	return ""
}

// TestTurnsKeepTheirPlan: a job that got the turn keeps it, and its pods their planned nodes,
// for Model.TurnHold: a job of higher P that comes meanwhile is placed around it instead of
// taking the rack kube-scheduler is already filling. Past the hold, P decides again.
func TestTurnsKeepTheirPlan(t *testing.T) {
	nodes := rackCluster(1, 2, 2, 16000)
	a := mkJob("ns/a").prio(100000).gang(2, res(2000, gi), 6, res(4000, gi)).obj() // 28000m: a rack
	b := mkJob("ns/b").prio(900000).gang(2, res(2000, gi), 6, res(4000, gi)).obj()
	m := priority.DefaultModel()
	first := m.Admit(topoState(nodes, a), t0)
	da, _ := first.Lookup("ns/a")
	rackOfA := where(nodes, a, da.Plan)[0]
	if da.TurnSince != t0 {
		t.Fatalf("a's turn since %v, want %v", da.TurnSince, t0)
	}

	for _, tc := range []struct {
		name   string
		after  time.Duration
		aKeeps bool
	}{
		{"within the hold: a keeps its plan, b goes around it", m.TurnHold / 2, true},
		{"past the hold: b, of higher P, is placed first", m.TurnHold + time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := topoState(nodes, a, b)
			s.Previous = first
			q := m.Admit(s, t0.Add(tc.after))
			da, _ := q.Lookup("ns/a")
			db, _ := q.Lookup("ns/b")
			if da.Phase != priority.PhaseAdmitted || db.Phase != priority.PhaseAdmitted {
				t.Fatalf("phases a %s, b %s; want both admitted, a rack each", da.Phase, db.Phase)
			}
			prev, _ := first.Lookup("ns/a")
			kept := cmp.Equal(da.Plan, prev.Plan)
			if kept != tc.aKeeps {
				t.Errorf("a's plan kept = %v, want %v: %v (was %v)", kept, tc.aKeeps, where(nodes, a, da.Plan), rackOfA)
			}
			if want := t0; tc.aKeeps && da.TurnSince != want {
				t.Errorf("a's turn since %v, want %v", da.TurnSince, want)
			}
			if first := q.Order[0].Key; (first == "ns/a") != tc.aKeeps {
				t.Errorf("queue starts with %s", first)
			}
		})
	}
}

// TestReserveOnOneNode: a head that one node could hold reserves the node where most of it
// fits now, all of that node's free room up to its need; a job behind goes to the other.
func TestReserveOnOneNode(t *testing.T) {
	nodes := rackCluster(1, 1, 2, 8000)                                                  // n00, n01: one rack, 8000m each
	nodes[0].Free, nodes[1].Free = res(2000, 64*gi), res(4000, 64*gi)                    // 6000m free in all
	head := mkJob("ns/head").prio(900000).gang(1, res(1000, gi), 3, res(2000, gi)).obj() // 7000m
	small := mkJob("ns/small").prio(100000).gang(0, nil, 1, res(2000, gi)).obj()
	q := reserveModel().Admit(topoState(nodes, head, small), t0)
	d, _ := q.Lookup("ns/head")
	if d.Phase != priority.PhaseWaiting || d.Placement.Level != "node" || !slices.Equal(d.Placement.Domains, []string{"n01"}) {
		t.Fatalf("head: %s, reservation %s; want Waiting with node n01 reserved", d.Phase, d.Placement)
	}
	if !strings.Contains(d.Reason, "room for it in node n01 is set aside meanwhile") {
		t.Errorf("reason %q", d.Reason)
	}
	s, _ := q.Lookup("ns/small")
	if s.Phase != priority.PhaseAdmitted || s.Plan["uid-small-w-0"] != "n00" {
		t.Errorf("small: %s on %v; want admitted on n00 (n01 is reserved)", s.Phase, s.Plan)
	}
}

// TestSpreadAfter: a young job that one rack could hold, were it empty, waits for one rather
// than be spread over two; the head that waits so reserves a rack; past model.spreadAfter it
// is spread.
func TestSpreadAfter(t *testing.T) {
	nodes := rackCluster(1, 2, 2, 8000)                         // r0: n00, n02; r1: n01, n03
	nodes[0].Free, nodes[1].Free = res(0, 64*gi), res(0, 64*gi) // one node of each rack busy
	job := func(age time.Duration) priority.Job {
		return mkJob("ns/a").gang(1, res(2000, gi), 3, res(2000, gi)).created(t0.Add(-age)).obj() // 8000m: a node
	}
	big := func(age time.Duration) priority.Job {
		return mkJob("ns/big").gang(1, res(2000, gi), 7, res(2000, gi)).created(t0.Add(-age)).obj() // 16000m: a rack
	}
	// small, behind big (lower P), fits the room big could spread over.
	small := mkJob("ns/small").user("carol").gang(1, res(2000, gi), 1, res(2000, gi)).obj()
	m := reserveModel()
	for _, tc := range []struct {
		name    string
		jobs    []priority.Job
		phase   priority.JobPhase
		blocker string
		level   string
		small   priority.JobPhase // small's phase, when it is there
	}{
		{name: "fits one node: admitted at once", jobs: []priority.Job{job(0)}, phase: priority.PhaseAdmitted, level: "node"},
		{name: "a rack's worth, young, a job behind it takes part of the room it could spread over: it waits for a rack",
			jobs: []priority.Job{big(time.Minute), small}, phase: priority.PhaseWaiting,
			blocker: "it waits for one example.com/rack domain with room for its 8 pods together, rather than spread over several", level: rackKey,
			small: priority.PhaseAdmitted},
		{name: "the same with nobody behind: its wait would leave the room idle, it spreads at once",
			jobs: []priority.Job{big(time.Minute)}, phase: priority.PhaseAdmitted, level: zoneKey},
		{name: "the same past spreadAfter: spread over both racks", jobs: []priority.Job{big(m.SpreadAfter + time.Second), small},
			phase: priority.PhaseAdmitted, level: zoneKey, small: priority.PhaseWaiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := m.Admit(topoState(nodes, tc.jobs...), t0)
			d, _ := q.Lookup(tc.jobs[0].Key)
			if d.Phase != tc.phase || d.Blocker != tc.blocker || d.Placement.Level != tc.level {
				t.Errorf("phase %s, blocker %q, placement %s; want %s, %q, level %s", d.Phase, d.Blocker, d.Placement, tc.phase, tc.blocker, tc.level)
			}
			if s, ok := q.Lookup(small.Key); ok && s.Phase != tc.small {
				t.Errorf("%s: phase %s (%s), want %s", small.Key, s.Phase, s.Blocker, tc.small)
			}
		})
	}
	t.Run("strict: spread at once, a waiting head would stop every job behind it", func(t *testing.T) {
		strict := m
		strict.Policy = priority.PolicyStrict
		d, _ := strict.Admit(topoState(nodes, big(time.Minute)), t0).Lookup("ns/big")
		if d.Phase != priority.PhaseAdmitted || d.Placement.Level != zoneKey {
			t.Errorf("phase %s, placement %s; want admitted over both racks", d.Phase, d.Placement)
		}
	})
}

// TestPSDoesNotTakeItsWorkersRoom replays a state seen in the medium evaluation: cpu is short
// where the GPUs are free, and a 1 PS + 16 worker job fits only if its PS takes a node
// without GPUs. Placed PS first, on the roomiest node, the PS took two workers' cpu and the
// group did not fit; the workers go first then, and the PS joins them in their rack.
func TestPSDoesNotTakeItsWorkersRoom(t *testing.T) {
	free := [][2]int64{ // cpu millicores, GPUs free, node by node; racks of 4
		{4000, 0}, {0, 0}, {4000, 2}, {4000, 0}, {0, 2}, {0, 2}, {0, 2}, {0, 2},
		{4000, 4}, {4000, 0}, {4000, 2}, {0, 2}, {0, 0}, {4000, 0}, {0, 2}, {0, 0},
		{2000, 1}, {4000, 0}, {2000, 3}, {2000, 1}, {2000, 1}, {2000, 3}, {0, 2}, {0, 2},
		{0, 0}, {0, 0}, {0, 0}, {0, 0}, {14000, 5}, {4000, 0}, {4000, 0}, {0, 0},
	}
	var nodes []priority.Node
	for i, f := range free {
		n := node(fmt.Sprintf("node-%02d", i), res(f[0], 64*gi, "nvidia.com/gpu", int(f[1])))
		n.Capacity = res(24000, 96*gi, "nvidia.com/gpu", 8)
		n.Labels = map[string]string{rackKey: fmt.Sprintf("rack-%d", i/4)}
		nodes = append(nodes, n)
	}
	job := mkJob("ns/j").gang(1, res(4000, gi), 16, res(2000, gi, "nvidia.com/gpu", 1)).obj()
	m := priority.DefaultModel()
	m.SpreadAfter = 0
	s := priority.State{Nodes: nodes, Jobs: []priority.Job{job}, Topology: priority.NewNodeIndex(nodes, []string{rackKey}, nil)}
	d, _ := m.Admit(s, t0).Lookup("ns/j")
	if d.Phase != priority.PhaseAdmitted {
		t.Fatalf("phase %s (%s)", d.Phase, d.Blocker)
	}
	checkPlanFits(t, nodes, job.Pods, d.Plan)
	// First fit puts the PS on node-00, beside 2 of the workers; rack-7 has room for 5
	// workers (on node-28) and the PS (node-29 or 30): no rack has room for more.
	if d.Placement.NearPSDomain < 5 {
		t.Errorf("placement %s: %d workers near the PS, want 5", d.Placement, d.Placement.NearPSDomain)
	}
}

// reserveModel is the default model under the reserve policy, for the tests of what a job
// that does not fit reserves (the default, backfill, reserves only after ReserveAfter).
func reserveModel() priority.Model {
	m := priority.DefaultModel()
	m.Policy = priority.PolicyReserve
	return m
}

// TestReservationStaysInItsDomain: a head that reserved a rack keeps it when another rack
// has more room now but still not enough, so the wait it started there does not start over;
// without the previous queue it would go where more fits now.
func TestReservationStaysInItsDomain(t *testing.T) {
	nodes := rackCluster(1, 2, 2, 16000)                                                                   // r0: n00, n02; r1: n01, n03
	head := mkJob("ns/head").prio(900000).gang(1, res(4000, gi), 3, res(8000, gi)).required(rackKey).obj() // 28000m
	free := func(r0, r1 int64) []priority.Node {
		out := slices.Clone(nodes)
		out[0].Free, out[2].Free = res(r0, 64*gi), res(r0, 64*gi)
		out[1].Free, out[3].Free = res(r1, 64*gi), res(r1, 64*gi)
		return out
	}
	reservedIn := func(q *priority.Queue) []string {
		d, _ := q.Lookup("ns/head")
		if d.Phase != priority.PhaseWaiting || d.Placement.Level != rackKey {
			t.Fatalf("head: %s, %s; want waiting with a rack reserved", d.Phase, d.Placement)
		}
		return d.Placement.Domains
	}
	m := reserveModel()
	first := m.Admit(topoState(free(8000, 2000), head), t0)
	if got := reservedIn(first); !slices.Equal(got, []string{"r0"}) {
		t.Fatalf("first reservation in %v, want r0 (most fits there)", got)
	}
	later := free(8000, 12000) // r1 has more room now, still short of 28000m
	if got := reservedIn(m.Admit(topoState(later, head), t0.Add(time.Minute))); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("with no previous queue: reservation in %v, want r1 (most fits there)", got)
	}
	s := topoState(later, head)
	s.Previous = first
	if got := reservedIn(m.Admit(s, t0.Add(time.Minute))); !slices.Equal(got, []string{"r0"}) {
		t.Errorf("after reserving r0: reservation in %v, want r0 kept", got)
	}
}

// TestDedicatedRackGoesToItsJob: the e2e test's full cluster, walked in one queue. Rack r1
// is tainted and only je tolerates it; every rack holds je alike, and je goes first (the
// highest P). It takes r1, which no other job may use, and every job fits; taking the first
// rack (r0) left jc and jd no room.
func TestDedicatedRackGoesToItsJob(t *testing.T) {
	nodes := rackCluster(1, 4, 4, 8000) // n00..n15, rack i%4, 32 CPU a rack
	var untainted []string
	for _, n := range nodes {
		if n.Labels[rackKey] != "r1" {
			untainted = append(untainted, n.Name)
		}
	}
	set := priority.NewNodeSet("the 12 of 16 nodes without a taint it does not tolerate", untainted)
	jobs := []priority.Job{
		mkJob("ns/ja").gang(2, res(4000, gi), 6, res(4000, gi)).onNodes(set).obj(),
		mkJob("ns/jb").gang(1, res(4000, gi), 7, res(4000, gi)).onNodes(set).obj(),
		mkJob("ns/jc").gang(1, res(2000, gi), 7, res(2000, gi)).onNodes(set).obj(),
		mkJob("ns/jd").gang(2, res(2000, gi), 6, res(2000, gi)).onNodes(set).obj(),
		mkJob("ns/je").prio(1000000).gang(2, res(4000, gi), 12, res(2000, gi)).obj(),
	}
	q := priority.DefaultModel().Admit(topoState(nodes, jobs...), t0)
	for _, j := range jobs {
		d, _ := q.Lookup(j.Key)
		if d.Phase != priority.PhaseAdmitted {
			t.Errorf("%s: %s", j.Key, d.Reason)
		}
	}
	if d, _ := q.Lookup("ns/je"); d.Phase == priority.PhaseAdmitted {
		if racks := where(nodes, jobs[4], d.Plan); !slices.ContainsFunc(racks, func(s string) bool { return strings.HasSuffix(s, "/r1") }) {
			t.Errorf("je on %v, want r1", racks)
		}
	}
}
