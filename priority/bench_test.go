package priority_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/priority"
)

// benchState is the issue-7 size: 2000 jobs of 1 PS + 4 workers (10k pending pods) on 5000
// nodes. nodeCPU sets how contended it is: with 16 cores a node, every job fits; with 4,
// about half the jobs do and the rest are tried against what is left.
func benchState(nodeCPU int64) priority.State {
	r := rand.New(rand.NewPCG(1, 1))
	var s priority.State
	for i := range 5000 {
		free := res(nodeCPU*1000, 64*gi, "pods", 110)
		if i%4 == 0 {
			free["nvidia.com/gpu"] = 4
		}
		n := node("node-"+strconv.Itoa(100000+i*7919%100000), free)
		n.Capacity = free // nothing runs yet: each node could offer all it has
		s.Nodes = append(s.Nodes, n)
	}
	users := []string{"alice", "bob", "carol", "dave", "erin"}
	for i := range 2000 {
		wReq := res(int64(1+r.IntN(4))*1000, int64(1+r.IntN(8))*gi)
		if i%5 == 0 {
			wReq["nvidia.com/gpu"] = 1
		}
		j := mkJob("team-"+strconv.Itoa(i%50)+"/job-"+strconv.Itoa(i)).
			user(users[i%len(users)]).prio(int32(r.IntN(1000))*1000).
			created(t0.Add(-time.Duration(r.IntN(3600))*time.Second)).
			gang(1, res(2000, 4*gi), 4, wReq)
		s.Jobs = append(s.Jobs, j.obj())
	}
	return s
}

func BenchmarkAdmit(b *testing.B) {
	for _, bc := range []struct {
		name        string
		nodeCPU     int64
		policy      priority.Policy
		sortedNodes bool
	}{
		{"fits/reserve", 16, priority.PolicyReserve, false},
		{"fits/reserve/sorted-nodes", 16, priority.PolicyReserve, true},
		{"contended/reserve", 4, priority.PolicyReserve, false},
		{"contended/strict", 4, priority.PolicyStrict, false},
		{"contended/besteffort", 4, priority.PolicyBestEffort, false},
		{"fits/reserve/racks", 16, priority.PolicyReserve, true},
		{"contended/reserve/racks", 4, priority.PolicyReserve, true},
		{"fits/reserve/rules", 16, priority.PolicyReserve, true},
		{"contended/reserve/rules", 4, priority.PolicyReserve, true},
		{"fits/reserve/prefer", 16, priority.PolicyReserve, true},
		{"contended/reserve/prefer", 4, priority.PolicyReserve, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchState(bc.nodeCPU)
			if bc.sortedNodes { // as a cluster view that keeps its nodes in name order passes them
				slices.SortFunc(s.Nodes, func(a, b priority.Node) int { return strings.Compare(a.Name, b.Name) })
			}
			if strings.HasSuffix(bc.name, "/racks") {
				// 125 racks of 40 nodes in 5 zones, as the view passes them: with an index.
				for i := range s.Nodes {
					s.Nodes[i].Labels = map[string]string{"rack": "r" + strconv.Itoa(i/40), "zone": "z" + strconv.Itoa(i/1000)}
				}
				s.Topology = priority.NewNodeIndex(s.Nodes, []string{"rack", "zone"}, nil)
			}
			if strings.HasSuffix(bc.name, "/rules") {
				// One job in ten wants one pod a node, one in ten spreads over 5 zones
				// (maxSkew 1): 400 jobs placed pod by pod.
				for i := range s.Nodes {
					s.Nodes[i].Labels = map[string]string{"zone": "z" + strconv.Itoa(i/1000)}
				}
				for i := range s.Jobs {
					rule := priority.Rule{Kind: priority.RuleApart, Key: priority.HostnameLevel, Why: "one a node"}
					switch i % 10 {
					case 5:
						rule = priority.Rule{Kind: priority.RuleSpread, Key: "zone", MaxSkew: 1, Why: "over the zones"}
					case 0:
					default:
						continue
					}
					s.Jobs[i].Rules = []priority.Rule{rule}
					for k := range s.Jobs[i].Pods {
						s.Jobs[i].Pods[k].RuleRefs = &priority.RuleRefs{Keeps: []int{0}, Counts: []int{0}}
					}
				}
			}
			if strings.HasSuffix(bc.name, "/prefer") {
				// One job in ten would rather have its workers one a node (preferred
				// anti-affinity by hostname): 200 plans improved after the gang placement.
				rule := priority.Rule{Kind: priority.RuleApart, Key: priority.HostnameLevel, Weight: 100, Why: "rather one a node"}
				for i := 0; i < len(s.Jobs); i += 10 {
					s.Jobs[i] = preferring(&jobB{s.Jobs[i]}, rule, true, priority.RoleWorker).obj()
				}
			}
			m := priority.DefaultModel()
			m.UserTiers = map[string]string{"alice": "gold", "carol": "silver"}
			m.Policy = bc.policy
			q := m.Admit(s, t0)
			admitted := 0
			for _, d := range q.Order {
				if d.Phase == priority.PhaseAdmitted {
					admitted++
				}
			}
			b.ReportMetric(float64(admitted), "admitted")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				m.Admit(s, t0)
			}
		})
	}
}

// BenchmarkFit places one 8 PS + 56 worker gang on the 5000 nodes, as a caller checking a
// single job would.
func BenchmarkFit(b *testing.B) {
	s := benchState(16)
	pods := mkJob("ns/big").gang(8, res(2000, 4*gi), 56, res(4000, 8*gi)).obj().Pods
	b.ReportAllocs()
	for b.Loop() {
		priority.Fit(s.Nodes, pods)
	}
}

// BenchmarkPreemptBacklog: 1000 full nodes, each running a bronze job that ran an hour,
// and 200 starved gangs that do not fit. Under urgent mode each starved gang asks for
// victims on every recompute: with the eviction budget spent (paused) or with victims
// (minRun: the budget left), against preemption off.
func BenchmarkPreemptBacklog(b *testing.B) {
	for _, bc := range []struct {
		name      string
		mode      priority.PreemptionMode
		preempted int
	}{{"off", priority.PreemptOff, 0}, {"urgent/paused", priority.PreemptUrgent, 4}, {"urgent/budget-left", priority.PreemptUrgent, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			nodes, jobs := fullCluster(1000, time.Hour)
			for i := range 200 {
				jobs = append(jobs, mkJob("ns/old-"+strconv.Itoa(i)).created(t0.Add(-2*time.Hour)).gang(0, nil, 3, res(4000, 0)).obj())
			}
			m := priority.DefaultModel()
			m.Preemption = bc.mode
			s := priority.State{Nodes: nodes, Jobs: jobs, Topology: priority.NewNodeIndex(nodes, []string{rackKey}, nil), Preempted: bc.preempted}
			var w priority.Workspace
			b.ReportAllocs()
			for b.Loop() {
				m.AdmitIn(s, t0, &w)
			}
		})
	}
}
