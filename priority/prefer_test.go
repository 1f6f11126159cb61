package priority_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

var (
	preferApartByHost = priority.Rule{Kind: priority.RuleApart, Key: priority.HostnameLevel, Weight: 100,
		Why: "its preferred pod anti-affinity by kubernetes.io/hostname (weight 100, pods app=a)"}
	preferSpreadByZone = priority.Rule{Kind: priority.RuleSpread, Key: zoneKey, MaxSkew: 1, Weight: 100,
		Why: "its ScheduleAnyway topology spread constraint by topology.kubernetes.io/zone (maxSkew 1, pods app=a)"}
	preferWithCache = priority.Rule{Kind: priority.RuleTogether, Key: priority.HostnameLevel, Weight: 50,
		Why: "its preferred pod affinity by kubernetes.io/hostname (weight 50, pods app=cache)", Elsewhere: map[string]int{"n3": 1}}
)

// preferring gives every pod of b whose role is one of roles (every pod: none given) the
// preferred rule, which counts those pods when counted is set.
func preferring(b *jobB, rule priority.Rule, counted bool, roles ...priority.Role) *jobB {
	at := len(b.j.Rules)
	b.j.Rules = append(b.j.Rules, rule)
	for i := range b.j.Pods {
		p := &b.j.Pods[i]
		if len(roles) > 0 && !containsRole(roles, p.Role) {
			continue
		}
		if p.RuleRefs == nil {
			p.RuleRefs = &priority.RuleRefs{}
		}
		p.RuleRefs.Prefers = append(p.RuleRefs.Prefers, at)
		if counted {
			p.RuleRefs.Counts = append(p.RuleRefs.Counts, at)
		}
	}
	return b
}

func containsRole(roles []priority.Role, r priority.Role) bool {
	for _, x := range roles {
		if x == r {
			return true
		}
	}
	return false
}

// TestAdmitPreferences: preferred rules steer the plan among the nodes that fit and never
// keep a job waiting: a gang preferring its pods apart is spread over the nodes of the
// domain the gang placement chose when they have room, and packed when they do not; a job
// with required rules weighs them after those.
func TestAdmitPreferences(t *testing.T) {
	workers := func(n int) *jobB { return mkJob("ns/a").gang(0, nil, n, res(1000, gi)) }
	tests := []struct {
		name     string
		nodes    []priority.Node
		topology []string // the levels (nil: none)
		job      priority.Job
		// key and perDomain: how many of the job's pods the plan puts in each domain of key.
		key       string
		perDomain map[string]int
	}{
		{
			name:  "no preference: the gang packs on one node",
			nodes: zonedNodes(4, 4), job: workers(4).obj(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n1": 4},
		},
		{
			name:  "preferred apart by hostname, room on 4 nodes: one a node",
			nodes: zonedNodes(4, 4), job: preferring(workers(4), preferApartByHost, true).obj(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n1": 1, "n2": 1, "n3": 1, "n4": 1},
		},
		{
			name:  "preferred apart, 6 pods on 2 roomy nodes: 3 each",
			nodes: zonedNodes(2, 2), job: preferring(workers(6), preferApartByHost, true).obj(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n1": 3, "n2": 3},
		},
		{
			name: "preferred apart, room on one node only: packed there, admitted all the same",
			nodes: func() []priority.Node {
				n := zonedNodes(4, 4)
				for i := 1; i < len(n); i++ {
					n[i].Free = res(0, 64*gi)
				}
				return n
			}(),
			job: preferring(workers(4), preferApartByHost, true).obj(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n1": 4},
		},
		{
			// n00, n02, n04 are rack r0, the odd ones r1: the gang stays in the rack the
			// gang placement chose.
			name:  "preferred apart with racks: spread over the nodes of the gang's rack only",
			nodes: rackCluster(1, 2, 3, 8000), topology: []string{rackKey},
			job: preferring(workers(6), preferApartByHost, true).obj(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n00": 2, "n02": 2, "n04": 2},
		},
		{
			name:  "preferred affinity to another job's pod on n3: the gang joins it",
			nodes: zonedNodes(4, 4), job: preferring(workers(4), preferWithCache, false).obj(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n3": 4},
		},
		{
			name:  "workers preferring each other apart, with a PS: one stays with the PS, the rest spread",
			nodes: zonedNodes(4, 4),
			job: preferring(mkJob("ns/a").gang(1, res(1000, gi), 4, res(1000, gi)), preferApartByHost, true,
				priority.RoleWorker).obj(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n1": 2, "n2": 1, "n3": 1, "n4": 1},
		},
		{
			name:  "ScheduleAnyway spread by zone: the zones evened out",
			nodes: zonedNodes(6, 2), job: preferring(workers(6), preferSpreadByZone, true).obj(),
			key: zoneKey, perDomain: map[string]int{"z1": 2, "z2": 2, "z3": 2},
		},
		{
			name:  "required together by zone, preferred apart by hostname: one zone, its nodes evened out",
			nodes: zonedNodes(4, 2),
			job: func() priority.Job {
				b := preferring(ruled("ns/a", 4, togetherByZone), preferApartByHost, true)
				return b.obj()
			}(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n1": 2, "n2": 2},
		},
		{
			name:  "required together by zone alone: packed on the zone's first node",
			nodes: zonedNodes(4, 2), job: ruled("ns/a", 4, togetherByZone).obj(),
			key: priority.HostnameLevel, perDomain: map[string]int{"n1": 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := priority.State{Nodes: tt.nodes, Jobs: []priority.Job{tt.job}}
			if tt.topology != nil {
				s.Topology = priority.NewNodeIndex(tt.nodes, tt.topology, nil)
			}
			q := priority.DefaultModel().Admit(s, t0)
			d, _ := q.Lookup("ns/a")
			if d.Phase != priority.PhaseAdmitted {
				t.Fatalf("%s: %s", d.Phase, d.Blocker)
			}
			if diff := cmp.Diff(tt.perDomain, podsPerDomain(q, tt.nodes, s.Jobs, tt.key)); diff != "" {
				t.Errorf("pods per %s domain (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}
