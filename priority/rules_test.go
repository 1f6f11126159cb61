package priority_test

import (
	"sort"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

// zonedNodes are n1..nN with 8 CPU free and as Capacity, in zones z1, z2, ... of perZone
// nodes each.
func zonedNodes(n, perZone int) []priority.Node {
	out := make([]priority.Node, n)
	for i := range out {
		out[i] = priority.Node{
			Name: "n" + strconv.Itoa(i+1), Free: res(8000, 64*gi), Capacity: res(8000, 64*gi),
			Labels: map[string]string{zoneKey: "z" + strconv.Itoa(i/perZone+1)},
		}
	}
	return out
}

// ruled is a job of n workers of 1 CPU, every one keeping and counted by the one rule.
func ruled(key string, n int, rule priority.Rule) *jobB {
	b := mkJob(key).gang(0, nil, n, res(1000, gi))
	b.j.Rules = []priority.Rule{rule}
	for i := range b.j.Pods {
		b.j.Pods[i].RuleRefs = &priority.RuleRefs{Keeps: []int{0}, Counts: []int{0}}
	}
	return b
}

var (
	apartByHost = priority.Rule{Kind: priority.RuleApart, Key: priority.HostnameLevel,
		Why: "its required pod anti-affinity by kubernetes.io/hostname (pods app=a)"}
	spreadByZone = priority.Rule{Kind: priority.RuleSpread, Key: zoneKey, MaxSkew: 1,
		Why: "its topology spread constraint by topology.kubernetes.io/zone (maxSkew 1, pods app=a)"}
	togetherByZone = priority.Rule{Kind: priority.RuleTogether, Key: zoneKey,
		Why: "its required pod affinity by topology.kubernetes.io/zone (pods app=a)"}
)

// TestAdmitRules: a job's required pod (anti-)affinity and hard spread constraints are
// part of the fit: a gang they make impossible with no other job's pods is Unschedulable,
// naming the rule, and holds nobody back; one they keep out for now waits; an admitted
// one is planned as they ask.
func TestAdmitRules(t *testing.T) {
	type row struct {
		Key     string
		Phase   priority.JobPhase
		Blocker string
	}
	withCounts := func(r priority.Rule, elsewhere, staying map[string]int) priority.Rule {
		r.Elsewhere, r.Staying = elsewhere, staying
		return r
	}
	tests := []struct {
		name  string
		nodes []priority.Node
		jobs  []priority.Job
		want  []row
		// key and perDomain: how many of job "ns/a"'s pods the plan puts in each domain of
		// key (nil: not checked).
		key       string
		perDomain map[string]int
	}{
		{
			name:  "one per node, 6 pods on 4 nodes: unschedulable, the small job behind is admitted",
			nodes: zonedNodes(4, 4),
			jobs: []priority.Job{
				ruled("ns/a", 6, apartByHost).prio(1000).obj(),
				mkJob("ns/small").gang(0, nil, 1, res(1000, gi)).obj(),
			},
			want: []row{
				{"ns/small", priority.PhaseAdmitted, ""},
				{"ns/a", priority.PhaseUnschedulable, "never fits: only 4 of the 6 pods it needs can be placed keeping its required pod anti-affinity by kubernetes.io/hostname (pods app=a), even with no other job's pods on the nodes"},
			},
		},
		{
			name:  "one per node, 6 pods on 6 nodes: admitted, one pod a node",
			nodes: zonedNodes(6, 6),
			jobs:  []priority.Job{ruled("ns/a", 6, apartByHost).obj()},
			want:  []row{{"ns/a", priority.PhaseAdmitted, ""}},
			key:   priority.HostnameLevel, perDomain: map[string]int{"n1": 1, "n2": 1, "n3": 1, "n4": 1, "n5": 1, "n6": 1},
		},
		{
			name:  "a pod of another job it counts on n1: it waits for it, naming the rule",
			nodes: zonedNodes(6, 6),
			jobs:  []priority.Job{ruled("ns/a", 6, withCounts(apartByHost, map[string]int{"n1": 1}, nil)).obj()},
			want:  []row{{"ns/a", priority.PhaseWaiting, "worker ns/a-w-5 has no node with room that keeps its required pod anti-affinity by kubernetes.io/hostname (pods app=a)"}},
		},
		{
			name:  "a pod in no job it counts on n1 stays: unschedulable",
			nodes: zonedNodes(6, 6),
			jobs: []priority.Job{ruled("ns/a", 6, withCounts(apartByHost,
				map[string]int{"n1": 1}, map[string]int{"n1": 1})).obj()},
			want: []row{{"ns/a", priority.PhaseUnschedulable, "never fits: only 5 of the 6 pods it needs can be placed keeping its required pod anti-affinity by kubernetes.io/hostname (pods app=a), even with no other job's pods on the nodes"}},
		},
		{
			name:  "spread over 3 zones with maxSkew 1: two a zone, though one node holds them all",
			nodes: zonedNodes(6, 2),
			jobs:  []priority.Job{ruled("ns/a", 6, spreadByZone).obj()},
			want:  []row{{"ns/a", priority.PhaseAdmitted, ""}},
			key:   zoneKey, perDomain: map[string]int{"z1": 2, "z2": 2, "z3": 2},
		},
		{
			name:  "spread with 2 pods it counts in z1 already: the rest evens the zones out",
			nodes: zonedNodes(6, 2),
			jobs:  []priority.Job{ruled("ns/a", 4, withCounts(spreadByZone, map[string]int{"z1": 2}, nil)).obj()},
			want:  []row{{"ns/a", priority.PhaseAdmitted, ""}},
			key:   zoneKey, perDomain: map[string]int{"z2": 2, "z3": 2},
		},
		{
			name: "spread where one zone is too small for its share: unschedulable",
			// z1 has room for 1 pod of 4 CPU, z2 and z3 for 4 each: with maxSkew 1 they take 2
			// each, 5 in all.
			nodes: func() []priority.Node {
				n := zonedNodes(6, 2)
				n[0].Free, n[0].Capacity = res(4000, 64*gi), res(4000, 64*gi)
				n[1].Free, n[1].Capacity = res(2000, 64*gi), res(2000, 64*gi)
				return n
			}(),
			jobs: func() []priority.Job {
				b := ruled("ns/a", 6, spreadByZone)
				for i := range b.j.Pods {
					b.j.Pods[i].Request = res(4000, gi)
				}
				return []priority.Job{b.obj()}
			}(),
			want: []row{{"ns/a", priority.PhaseUnschedulable, "never fits: only 5 of the 6 pods it needs can be placed keeping its topology spread constraint by topology.kubernetes.io/zone (maxSkew 1, pods app=a), even with no other job's pods on the nodes"}},
		},
		{
			name:  "together in one zone: every pod in the first zone with room",
			nodes: zonedNodes(6, 2),
			jobs:  []priority.Job{ruled("ns/a", 12, togetherByZone).obj()},
			want:  []row{{"ns/a", priority.PhaseAdmitted, ""}},
			key:   zoneKey, perDomain: map[string]int{"z1": 12},
		},
		{
			name:  "together with a pod it counts in z2: every pod joins it there",
			nodes: zonedNodes(6, 2),
			jobs:  []priority.Job{ruled("ns/a", 4, withCounts(togetherByZone, map[string]int{"z2": 1}, nil)).obj()},
			want:  []row{{"ns/a", priority.PhaseAdmitted, ""}},
			key:   zoneKey, perDomain: map[string]int{"z2": 4},
		},
		{
			name: "together with another job's pod in z2, z2 full for now: it waits for room there",
			nodes: func() []priority.Node {
				n := zonedNodes(6, 2)
				n[2].Free, n[3].Free = res(0, 64*gi), res(0, 64*gi)
				return n
			}(),
			jobs: []priority.Job{ruled("ns/a", 4, withCounts(togetherByZone, map[string]int{"z2": 1}, nil)).obj()},
			want: []row{{"ns/a", priority.PhaseWaiting, "worker ns/a-w-0 has no node with room that keeps its required pod affinity by topology.kubernetes.io/zone (pods app=a)"}},
		},
		{
			name:  "together, more than one zone holds: unschedulable",
			nodes: zonedNodes(6, 2),
			jobs:  []priority.Job{ruled("ns/a", 17, togetherByZone).obj()},
			want:  []row{{"ns/a", priority.PhaseUnschedulable, "never fits: only 16 of the 17 pods it needs can be placed keeping its required pod affinity by topology.kubernetes.io/zone (pods app=a), even with no other job's pods on the nodes"}},
		},
		{
			name:  "a bound pod of the job counts: the others keep off its node",
			nodes: zonedNodes(3, 3),
			jobs: func() []priority.Job {
				b := ruled("ns/a", 3, apartByHost)
				b.j.Pods[0].State, b.j.Pods[0].Node = priority.PodBound, "n2"
				return []priority.Job{b.obj()}
			}(),
			want: []row{{"ns/a", priority.PhaseAdmitted, ""}},
			key:  priority.HostnameLevel, perDomain: map[string]int{"n1": 1, "n2": 1, "n3": 1},
		},
		{
			name:  "a pod the rule counts but that keeps none stays off the keepers' nodes",
			nodes: zonedNodes(3, 3),
			jobs: func() []priority.Job {
				b := ruled("ns/a", 2, apartByHost)
				b.pods(mkPod("a-ps-0", priority.RolePS, 0).req(res(1000, gi)))
				b.j.Pods[2].RuleRefs = &priority.RuleRefs{Counts: []int{0}}
				return []priority.Job{b.obj()}
			}(),
			want: []row{{"ns/a", priority.PhaseAdmitted, ""}},
			key:  priority.HostnameLevel, perDomain: map[string]int{"n1": 1, "n2": 1, "n3": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := priority.DefaultModel()
			q := m.Admit(priority.State{Nodes: tt.nodes, Jobs: tt.jobs}, t0)
			var got []row
			for _, list := range [][]*priority.Decision{q.Order, q.Running, q.Unschedulable} {
				for _, d := range list {
					got = append(got, row{d.Key, d.Phase, d.Blocker})
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("decisions (-want +got):\n%s", diff)
			}
			if tt.perDomain == nil {
				return
			}
			if diff := cmp.Diff(tt.perDomain, podsPerDomain(q, tt.nodes, tt.jobs, tt.key)); diff != "" {
				t.Errorf("pods per %s domain (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}

// podsPerDomain is how many pods of job "ns/a" of jobs are bound, held or planned in q in
// each domain of key over nodes (the node's name for hostname).
func podsPerDomain(q *priority.Queue, nodes []priority.Node, jobs []priority.Job, key string) map[string]int {
	labels := map[string]map[string]string{}
	for _, n := range nodes {
		labels[n.Name] = n.Labels
	}
	domainOf := func(node string) string {
		if key == priority.HostnameLevel {
			return node
		}
		return labels[node][key]
	}
	perDomain := map[string]int{}
	for _, j := range jobs {
		if j.Key != "ns/a" {
			continue
		}
		for _, p := range j.Pods {
			if p.Node != "" {
				perDomain[domainOf(p.Node)]++
			}
		}
	}
	d, _ := q.Lookup("ns/a")
	for _, node := range d.Plan {
		perDomain[domainOf(node)]++
	}
	return perDomain
}

// TestAdmitRulesKeepTurnPlan: a job that has the turn keeps its previous plan while it
// keeps its rules, and is planned anew when a pod it counts came onto a planned node.
func TestAdmitRulesKeepTurnPlan(t *testing.T) {
	m := priority.DefaultModel()
	nodes := zonedNodes(4, 4)
	job := ruled("ns/a", 2, apartByHost).obj()
	first := m.Admit(priority.State{Nodes: nodes, Jobs: []priority.Job{job}}, t0)
	d, _ := first.Lookup("ns/a")
	if d.Phase != priority.PhaseAdmitted {
		t.Fatalf("first queue: %s %s", d.Phase, d.Blocker)
	}
	planned := sortedValues(d.Plan)

	again := m.Admit(priority.State{Nodes: nodes, Jobs: []priority.Job{job}, Previous: first}, t0.Add(1e9))
	d2, _ := again.Lookup("ns/a")
	if diff := cmp.Diff(planned, sortedValues(d2.Plan)); diff != "" {
		t.Errorf("kept plan (-want +got):\n%s", diff)
	}

	moved := job
	moved.Rules = []priority.Rule{apartByHost}
	moved.Rules[0].Elsewhere = map[string]int{planned[0]: 1}
	third := m.Admit(priority.State{Nodes: nodes, Jobs: []priority.Job{moved}, Previous: first}, t0.Add(1e9))
	d3, _ := third.Lookup("ns/a")
	for _, n := range d3.Plan {
		if n == planned[0] {
			t.Errorf("plan %v keeps a pod on %s, where a pod its anti-affinity counts came", d3.Plan, n)
		}
	}
	if d3.Phase != priority.PhaseAdmitted {
		t.Errorf("re-planned job: %s %s", d3.Phase, d3.Blocker)
	}
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
