package priority

import "slices"

// Preferred rules (Rule.Weight > 0: preferred pod (anti-)affinity, ScheduleAnyway spread)
// never keep a pod off a node and never make a job wait: they only choose among the nodes
// that fit. A job with required rules scores them in rulePlacer.choose; a job placed by the
// gang placement has its plan improved afterwards by preferPlan, inside the domain the plan
// chose.

// preference is how much pod p prefers position at by the preferred rules it has: for each,
// the rule's Weight times the pods it counts in at's domain, added for together and taken
// off for apart and spread; for spread a node without the key scores as though every pod
// the rule counts, and one more, were there.
func (g *rulePlacer) preference(p *Pod, at int) int {
	s := 0
	for _, r := range p.prefers() {
		if r < 0 || r >= len(g.rules) {
			continue
		}
		rule := &g.rules[r]
		n := 0
		if d := g.doms[r].dom[at]; d >= 0 {
			n = g.counts[r][d]
		} else if rule.Kind == RuleSpread {
			n = g.totals[r] + 1
		}
		if rule.Kind == RuleTogether {
			s += rule.Weight * n
		} else {
			s -= rule.Weight * n
		}
	}
	return s
}

// preferenceCeiling bounds preference for p on any node: no pod counted where apart and
// spread, every counted pod where together. A node reaching it is as good as any.
func (g *rulePlacer) preferenceCeiling(p *Pod) int {
	s := 0
	for _, r := range p.prefers() {
		if r >= 0 && r < len(g.rules) && g.rules[r].Kind == RuleTogether {
			s += g.rules[r].Weight * g.totals[r]
		}
	}
	return s
}

// preferSpan is the [lo, hi) positions preferPlan may move v's pods in: the domain of the
// lowest level that holds all of the job's placed and planned pods, or, when one node holds
// them and the job may leave it, the domain of the next level up (the whole table without
// levels). hi-lo < 2 when there is nowhere to move to.
func preferSpan(c *capacity, v *jobView) (lo, hi int) {
	first := v.plan[0].node
	l := spanLevel(c, v.placed, v.plan)
	if l == nodeLevel {
		if v.required == nodeLevel {
			return first, first + 1
		}
		l = 1
	}
	for l <= c.lay.levels() && l < v.required && !c.lay.hasDomain(l, first) {
		l++ // no domain of that level: the next one up
	}
	if l > c.lay.levels() {
		return 0, len(c.nodes)
	}
	return c.lay.spanOf(l, c.lay.domainOf(l, first))
}

// preferPlan moves the planned pods of v, a job without required rules that the gang
// placement has placed on c (in a trial), to nodes its preferred rules score higher: each
// pod in plan order, when some node of preferSpan with room for it scores strictly more
// than its own (counting the job's other pods where they are planned), goes to the one
// that scores most (see better).
// Two passes at most. The plan stays inside the domain it chose and fits: a move gives the
// pod's room back and takes it on a node that has it. It costs pods * nodes of the domain
// * rules, and only jobs with preferences pay it.
func preferPlan(c *capacity, v *jobView) {
	if len(v.plan) == 0 {
		return
	}
	lo, hi := preferSpan(c, v)
	if hi-lo < 2 {
		return
	}
	g := newRulePlacer(c, v)
	index := make(map[string]int, len(v.toFit))
	for i, p := range v.toFit {
		index[p.UID] = i
	}
	pods := make([]int, len(v.plan)) // the toFit index of each planned pod
	// psAt is where the job's PS are, placed and planned (newRulePlacer has the placed).
	placedPS := slices.Clone(g.ps)
	psAt := func() {
		g.ps = append(g.ps[:0], placedPS...)
		for _, pp := range v.plan {
			if pp.role == RolePS {
				g.ps = insertSorted(g.ps, pp.node)
			}
		}
	}
	for k, pp := range v.plan {
		pods[k] = index[pp.uid]
		g.count(v.toFit[pods[k]], pp.node)
	}
	psAt()
	for range 2 {
		moved := false
		for k := range v.plan {
			p, dm := v.toFit[pods[k]], v.demands[pods[k]]
			if len(p.prefers()) == 0 {
				continue
			}
			from := v.plan[k].node
			g.tally(p, from, -1)
			if to := g.better(p, dm, from, lo, hi); to != from {
				c.give(from, dm.needs)
				c.take(to, dm.needs)
				v.plan[k].node = to
				if p.Role == RolePS {
					psAt()
				}
				moved = true
			}
			g.count(p, v.plan[k].node)
		}
		if !moved {
			return
		}
	}
}

// better is the position in [lo, hi) that pod p (of demand dm, planned on from and taken out
// of the counts) prefers to from, or from when none scores strictly more: the one that
// scores most, a worker's PS nodes tried first, then the first in table order.
func (g *rulePlacer) better(p *Pod, dm demand, from, lo, hi int) int {
	best, bestScore := from, g.preference(p, from)
	consider := func(at int) {
		if at == from || at < lo || at >= hi || !g.c.usable(at, dm) || !g.c.fits(at, dm.needs) {
			return
		}
		if p.Role == RolePS && g.v.job.PSApart && containsSorted(g.ps, at) {
			return
		}
		if s := g.preference(p, at); s > bestScore {
			best, bestScore = at, s
		}
	}
	if p.Role != RolePS {
		for _, at := range g.ps {
			consider(at)
		}
	}
	ceiling := g.preferenceCeiling(p)
	for at := g.c.findIn(dm.needs, lo, hi); at >= 0 && bestScore < ceiling; at = g.c.findIn(dm.needs, at+1, hi) {
		consider(at)
	}
	return best
}
