package priority

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// roomiestScan is roomiest as it was before appendRooms: every node of [lo, hi) is looked
// at, and the domains' sums saturate (they wrapped). It is the reference the walk down the
// tree must agree with.
func roomiestScan(g *gangPlacer, grp *podGroup, lo, hi, scope int) int {
	pod := grp.ps
	if len(grp.members) > 0 {
		pod = grp.members[0]
	}
	if pod < 0 || lo >= hi {
		return -1
	}
	d := g.demands[pod]
	r := g.c.r
	copies := make([]int64, hi-lo)
	for at := lo; at < hi; at++ {
		if !g.c.usable(at, d) {
			continue
		}
		n := int64(math.MaxInt64)
		for _, need := range d.needs {
			n = min(n, max(g.c.tree[(g.c.size+at)*r+need.dim], 0)/need.amount)
		}
		copies[at-lo] = n
	}
	for l := min(scope-1, g.lay.levels()); l >= 1; l-- {
		best, most := -1, int64(-1)
		for dom := g.lay.domainOf(l, lo); dom <= g.lay.domainOf(l, hi-1); dom++ {
			dlo, dhi := g.lay.spanOf(l, dom)
			var n int64
			for _, c := range copies[dlo-lo : dhi-lo] {
				n = addCopies(n, c)
			}
			if n > most {
				best, most = dom, n
			}
		}
		dlo, dhi := g.lay.spanOf(l, best)
		copies, lo, hi = copies[dlo-lo:dhi-lo], dlo, dhi
	}
	best, most := lo, int64(-1)
	for at := lo; at < hi; at++ {
		if n := copies[at-lo]; n > most {
			best, most = at, n
		}
	}
	return best
}

// randomPlacement is a random cluster of racks in zones, mostly full, and a job's pods: a
// PS and workers, some limited to a few nodes. It returns the table in placement order and
// a view of the job with its demands, and the table's gang placer reset for the job.
func randomPlacement(r *rand.Rand) (*capacity, *jobView, *gangPlacer) {
	var nodes []Node
	for i := range 1 + r.IntN(150) {
		free := Resources{"cpu": int64(r.IntN(5)) * 1000, "memory": int64(r.IntN(5)), "pods": int64(r.IntN(4))}
		if r.IntN(2) == 0 {
			free["cpu"] = 0 // a full node
		}
		if r.IntN(4) == 0 {
			delete(free, "pods") // no pod limit: copies of a pod that asks for nothing else are unlimited
		}
		labels := map[string]string{"rack": "r" + strconv.Itoa(r.IntN(8)), "zone": "z" + strconv.Itoa(r.IntN(3))}
		if r.IntN(10) == 0 {
			labels = nil // a node without topology labels: a domain of its own
		}
		nodes = append(nodes, Node{Name: "n" + strconv.Itoa(i), Free: free, Labels: labels})
	}
	var sets []*NodeSet // two node selectors, each on about a third of the nodes
	for k := range 2 {
		var subset []string
		for i := range nodes {
			if r.IntN(3) == 0 {
				subset = append(subset, nodes[i].Name)
			}
		}
		sets = append(sets, NewNodeSet("node selector "+strconv.Itoa(k), subset))
	}
	job := &Job{Key: "ns/j", PSApart: r.IntN(2) == 0}
	var pods []*Pod
	for i := range 1 + r.IntN(6) {
		p := &Pod{UID: "p" + strconv.Itoa(i), Role: RoleWorker, Request: Resources{"cpu": int64(1+r.IntN(3)) * 1000, "memory": int64(r.IntN(3))}}
		if r.IntN(5) == 0 {
			p.Request = nil // best effort: it asks for a pod slot only
		}
		if i < r.IntN(3) {
			p.Role = RolePS
		}
		if r.IntN(4) == 0 {
			p.Nodes = sets[r.IntN(4)/3] // mostly the first
		}
		pods = append(pods, p)
	}
	var ds dimSet
	demands := ds.demands(pods, nil)
	lay := newLayout(nodes, []string{"rack", "zone"}, nil)
	c := newCapacity(nodes, &ds, nil, lay)
	v := &jobView{job: job, toFit: pods, demands: demands}
	v.levels(lay, lay.levels()+1)
	c.placer.reset(c, v, v.required, v.preferred)
	return c, v, &c.placer
}

// randomGroupAndDomain is a random group of v's pods to fit (a PS and workers, or either)
// and a random domain of c, of level scope: positions [lo, hi).
func randomGroupAndDomain(r *rand.Rand, c *capacity, v *jobView) (grp podGroup, scope, lo, hi int) {
	grp = podGroup{ps: -1, psAt: -1}
	for i := range v.toFit {
		if r.IntN(2) == 0 {
			grp.members = append(grp.members, i)
		} else if grp.ps < 0 {
			grp.ps = i
		}
	}
	top := c.lay.levels() + 1
	scope = 1 + r.IntN(top)
	lo, hi = 0, len(c.nodes)
	if scope < top {
		lo, hi = c.lay.spanOf(scope, c.lay.domainOf(scope, r.IntN(len(c.nodes))))
	}
	return grp, scope, lo, hi
}

// TestRoomiestMatchesScan: the node roomiest picks, found down the tree of maxima, is the
// one a look at every node picks, in every domain of every level of random clusters.
func TestRoomiestMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 13))
	picked := 0
	for round := range 400 {
		c, v, g := randomPlacement(r)
		for range 10 {
			grp, scope, lo, hi := randomGroupAndDomain(r, c, v)
			got, want := g.roomiest(&grp, lo, hi, scope), roomiestScan(g, &grp, lo, hi, scope)
			if got != want {
				t.Fatalf("round %d: roomiest in [%d, %d) of level %d = %d, a scan says %d", round, lo, hi, scope, got, want)
			}
			if got > lo {
				picked++
			}
		}
	}
	if picked == 0 {
		t.Fatal("no case picked a node other than the first of its range")
	}
}

// TestEachHasRoomIsNecessary: a job one of whose pods has no node with room for it alone
// is never placed by the gang placer, so place may skip it.
func TestEachHasRoomIsNecessary(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	without, placed := 0, 0
	for round := range 2000 {
		c, v, g := randomPlacement(r)
		has := eachHasRoom(c, v)
		c.begin()
		fits := g.run()
		c.rollback()
		if fits && !has {
			t.Fatalf("round %d: the gang placer placed a job with a pod no node has room for", round)
		}
		if !has {
			without++
		}
		if fits {
			placed++
		}
	}
	if without == 0 || placed == 0 {
		t.Fatalf("%d jobs with a pod without room, %d placed: the cases do not cover both", without, placed)
	}
}

// TestSpreadLeastMatchesScan: the least count of a spread rule over every domain, which
// prepare takes as 0 while some domain counts none, is what a look at every domain gives,
// as pods are counted in and taken out at random (taken out, a count may go below 0).
func TestSpreadLeastMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 29))
	for round := range 300 {
		domains := 1 + r.IntN(6)
		g := &rulePlacer{
			c: &capacity{}, rules: []Rule{{Kind: RuleSpread}},
			counts: [][]int{make([]int, domains)}, totals: []int{0}, positive: []int{0}, minOf: []int{0},
		}
		pod := &Pod{RuleRefs: &RuleRefs{Keeps: []int{0}}}
		for step := range 40 {
			n := 1
			if r.IntN(3) == 0 {
				n = -1
			}
			g.add(0, r.IntN(domains), n)
			g.prepare(pod, demand{})
			want := slices.Min(g.counts[0])
			if g.minOf[0] != max(want, 0) {
				t.Fatalf("round %d step %d: counts %v, least %d, want %d", round, step, g.counts[0], g.minOf[0], max(want, 0))
			}
		}
	}
}

// TestRulePlacersStartFromZero: a rule placer's counts by domain start at zero though the
// placer before it, on the same table, counted pods there (the scratch is zeroed only
// where that one wrote).
func TestRulePlacersStartFromZero(t *testing.T) {
	var nodes []Node
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, Node{Name: name, Free: Resources{"cpu": 4000}})
	}
	var ds dimSet
	ds.demands(nil, nil)
	c := newCapacity(nodes, &ds, nil, nil)
	rules := []Rule{{Kind: RuleApart, Key: HostnameLevel}, {Kind: RuleSpread, Key: HostnameLevel, MaxSkew: 1}}
	refs := &RuleRefs{Keeps: []int{0, 1}, Counts: []int{0, 1}}
	sum := func(g *rulePlacer) (n int) {
		for r := range g.rules {
			for d := range g.counts[r] {
				n += g.counts[r][d] + g.keepers[r][d]
			}
		}
		return n
	}
	busy := &jobView{job: &Job{Key: "ns/a", Rules: rules}, placed: []*Pod{
		{UID: "a0", Node: "a", State: PodBound, RuleRefs: refs}, {UID: "a1", Node: "b", State: PodBound, RuleRefs: refs}}}
	if n := sum(newRulePlacer(c, busy)); n != 6 { // 2 pods, counted by both rules, kept apart by one
		t.Fatalf("the first placer counts %d, want 6", n)
	}
	idle := &jobView{job: &Job{Key: "ns/b", Rules: rules}}
	if g := newRulePlacer(c, idle); sum(g) != 0 || g.positive[1] != 0 {
		t.Errorf("the next placer starts from counts %v, keepers %v, %d positive", g.counts, g.keepers, g.positive[1])
	}
}

// TestNodeForMatchesScan: the node nodeFor finds for a group, looking only among the
// nodes of a node set some pod of it has, is the first node of the range that holds the
// group's total and that each pod may use, as a look at every node finds.
func TestNodeForMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 37))
	found, limited := 0, 0
	for round := range 600 {
		c, v, g := randomPlacement(r)
		for range 10 {
			grp, _, lo, hi := randomGroupAndDomain(r, c, v)
			if grp.ps < 0 && len(grp.members) == 0 {
				continue
			}
			u := []podGroup{grp}
			got, total := g.nodeFor(u, lo, hi)
			total = slices.Clone(total)
			want := -1
			for at := lo; at < hi && want < 0; at++ {
				ok := c.fits(at, total) && g.lay.hasDomain(g.required, at)
				if grp.ps >= 0 {
					ok = ok && c.usable(at, g.demands[grp.ps])
				}
				for _, i := range grp.members {
					ok = ok && c.usable(at, g.demands[i])
				}
				if ok {
					want = at
				}
			}
			if got != want {
				t.Fatalf("round %d: nodeFor in [%d, %d) = %d, a scan says %d", round, lo, hi, got, want)
			}
			if got >= 0 {
				found++
				if g.setOf(u) != nil {
					limited++
				}
			}
		}
	}
	if found == 0 || limited == 0 {
		t.Fatalf("%d groups placed, %d of them limited to a node set: the cases do not cover both", found, limited)
	}
}
