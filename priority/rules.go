package priority

import "strconv"

// RuleKind is what a pod rule asks of the domains of its key.
type RuleKind int

// The rule kinds, from a pod's pod anti-affinity (Apart), pod affinity (Together) and
// topology spread constraints (Spread). What follows is what a required rule asks; a
// preferred one (Rule.Weight > 0) asks nothing and only scores (see Rule.Weight).
const (
	// RuleApart: a pod that keeps the rule goes only to a domain with no pod the rule
	// counts; a pod the rule counts goes to no domain with a pod that keeps it.
	RuleApart RuleKind = iota
	// RuleTogether: a pod that keeps the rule goes only to a domain with a pod the rule
	// counts, or anywhere when no such pod exists yet and it is counted itself.
	RuleTogether
	// RuleSpread: a pod that keeps the rule goes to a domain d only when
	// count(d) + self - min over the eligible domains of count <= MaxSkew, where self is 1
	// when the rule counts the pod. The eligible domains are those of the nodes the pod may
	// use that carry the key.
	RuleSpread
)

// Rule is one placement rule of a job's pods over the domains of a node label key: the
// nodes with the same value of Key are one domain, a node without the key is in none
// (for HostnameLevel a node without the label is its own domain, by its name).
type Rule struct {
	Kind RuleKind
	Key  string
	// MaxSkew bounds the difference of the counts (RuleSpread only).
	MaxSkew int
	// Weight is 0 for a required rule (required pod (anti-)affinity, DoNotSchedule spread),
	// which the placement keeps, and 1-100 for a preferred one (a preferred term's weight;
	// a ScheduleAnyway spread constraint weighs 100), which never keeps a pod off a node:
	// among the nodes that fit, a pod preferring it goes where Weight times the pods it
	// counts in the node's domain scores most, added for together and taken off for apart
	// and spread (for spread a node without the key scores least).
	Weight int
	// Why names the rule for sentences, as a noun phrase: "its required pod anti-affinity
	// by kubernetes.io/hostname (pods app=a)".
	Why string
	// Elsewhere counts, by domain (the key's value), the pods the rule counts that are
	// bound to or held for a node and are not the job's own; Staying counts those of them
	// that belong to no job, which stay when every job's pods are gone: the check on the
	// nodes' Capacity counts them for apart and spread rules, and Elsewhere for together.
	Elsewhere map[string]int
	Staying   map[string]int
}

// String is the rule's Why.
func (r Rule) String() string { return r.Why }

// HasRules reports whether some pod of the job keeps one of its required rules: those
// jobs are placed pod by pod (rulePlacer); preferred rules alone leave a job to the gang
// placement (see HasPreferences).
func (j *Job) HasRules() bool {
	return j.somePod(func(p *Pod) []int { return p.keeps() })
}

// HasPreferences reports whether some pod of the job prefers one of its preferred rules.
func (j *Job) HasPreferences() bool {
	return j.somePod(func(p *Pod) []int { return p.prefers() })
}

// somePod reports whether the job has rules and some pod's list of them is not empty.
func (j *Job) somePod(list func(p *Pod) []int) bool {
	if len(j.Rules) == 0 {
		return false
	}
	for i := range j.Pods {
		if len(list(&j.Pods[i])) > 0 {
			return true
		}
	}
	return false
}

// keyDomains is the domains of one label key over a capacity table's nodes: dom[p] is the
// domain of position p (-1: the node has no value), names the domains' values.
type keyDomains struct {
	dom    []int32
	names  []string
	byName map[string]int32
}

// domainsOf returns the domains of key over c's nodes, worked out on first use.
func (c *capacity) domainsOf(key string) *keyDomains {
	if k, ok := c.keyDoms[key]; ok {
		return k
	}
	k := &keyDomains{dom: make([]int32, len(c.nodes)), byName: map[string]int32{}}
	for p, name := range c.nodes {
		value, ok := "", false
		if c.src != nil {
			value, ok = c.src[c.order[p]].Labels[key]
		}
		if !ok && key == HostnameLevel {
			value, ok = name, true
		}
		if !ok {
			k.dom[p] = -1
			continue
		}
		d, seen := k.byName[value]
		if !seen {
			d = int32(len(k.names))
			k.byName[value] = d
			k.names = append(k.names, value)
		}
		k.dom[p] = d
	}
	if c.keyDoms == nil {
		c.keyDoms = map[string]*keyDomains{}
	}
	c.keyDoms[key] = k
	return k
}

// rulePlacer places the pods of a job with rules pod by pod on a capacity table, keeping
// every rule: each pod goes, among the nodes it may use that have room for it and that its
// rules allow, to the one whose domains hold the fewest pods its spread rules count, a
// worker to a node of a PS of its job before others, a PS to a node without one, then to
// the first in table order. It is plain and costs pods * nodes * rules: only jobs with
// rules use it, and the others keep the topology-aware placement.
type rulePlacer struct {
	c     *capacity
	v     *jobView
	rules []Rule
	doms  []*keyDomains
	// counts[r][d] is how many pods rule r counts are in domain d; keepers[r][d] how many
	// pods that keep r (for RuleApart); totals[r] the sum of counts[r], and positive[r]
	// how many of counts[r] are above 0.
	counts, keepers  [][]int
	totals, positive []int
	ps               []int // positions of the job's PS
	minOf            []int // per rule: the least count over the eligible domains of the pod at hand
	seen             []bool
	// prefer: the job's preferred rules steer choose (off where only feasibility counts).
	prefer bool
}

// intsFor returns n zeroed ints from c's scratch for a rule placer's counts.
func (c *capacity) intsFor(n int) []int {
	if cap(c.ruleInts)-len(c.ruleInts) < n {
		// The counts handed out before keep the old array; the new one serves the rest.
		c.ruleInts = make([]int, 0, max(2*cap(c.ruleInts), n, 64))
	}
	out := c.ruleInts[len(c.ruleInts) : len(c.ruleInts)+n]
	clear(out)
	c.ruleInts = c.ruleInts[:len(c.ruleInts)+n]
	return out
}

// ruleFit is how far a rulePlacer got: as reachFit, and why names the rule that left no
// node for the first pod that did not fit ("" when resources did).
type ruleFit struct {
	reachFit
	why string
}

// domainIntsFor returns n zeroed ints from c's scratch for a rule placer's counts by
// domain. Clearing them whole cost each job with a rule over hostname two arrays of the
// nodes' length a recompute; the placers zero only what the last one set.
func (c *capacity) domainIntsFor(n int) []int {
	if cap(c.domainInts)-len(c.domainInts) < n {
		c.domainInts = make([]int, 0, max(2*cap(c.domainInts), n, 64))
	}
	out := c.domainInts[len(c.domainInts) : len(c.domainInts)+n]
	c.domainInts = c.domainInts[:len(c.domainInts)+n]
	return out
}

// setDomain adds n to *at, one of the counts by domain, noting it for the next placer to
// zero when it leaves zero.
func (c *capacity) setDomain(at *int, n int) {
	if *at == 0 && n != 0 {
		c.domainSet = append(c.domainSet, at)
	}
	*at += n
}

func newRulePlacer(c *capacity, v *jobView) *rulePlacer {
	g := &rulePlacer{c: c, v: v, rules: v.job.Rules}
	n := len(g.rules)
	g.doms, g.counts, g.keepers = make([]*keyDomains, n), make([][]int, n), make([][]int, n)
	// One placer at a time: the last one's counts are done with.
	c.ruleInts = c.ruleInts[:0]
	for _, at := range c.domainSet {
		*at = 0
	}
	c.domainInts, c.domainSet = c.domainInts[:0], c.domainSet[:0]
	g.totals, g.positive, g.minOf = c.intsFor(n), c.intsFor(n), c.intsFor(n)
	for r, rule := range g.rules {
		k := c.domainsOf(rule.Key)
		g.doms[r] = k
		g.counts[r], g.keepers[r] = c.domainIntsFor(len(k.names)), c.domainIntsFor(len(k.names))
		// On the nodes' Capacity other jobs' pods are gone: they no longer keep a pod
		// away (apart, spread), but a pod that must join them (together) may still.
		elsewhere := rule.Elsewhere
		if c.fromCap && rule.Kind != RuleTogether {
			elsewhere = rule.Staying
		}
		for value, count := range elsewhere {
			if d, ok := k.byName[value]; ok && count > 0 {
				g.add(r, int(d), count)
			}
		}
	}
	for _, p := range v.placed {
		if at := c.nodeIndex(p.Node); at >= 0 {
			g.count(p, at)
		}
	}
	for _, name := range v.psNodes {
		if at := c.nodeIndex(name); at >= 0 {
			g.ps = insertSorted(g.ps, at)
		}
	}
	return g
}

// count notes pod p at position at in the rules' counts.
func (g *rulePlacer) count(p *Pod, at int) { g.tally(p, at, 1) }

// tally adds n (1, or -1 to take a pod out) for pod p at position at to the rules' counts.
func (g *rulePlacer) tally(p *Pod, at, n int) {
	for _, r := range p.counts() {
		if r < 0 || r >= len(g.rules) {
			continue
		}
		if d := g.doms[r].dom[at]; d >= 0 {
			g.add(r, int(d), n)
		}
	}
	for _, r := range p.keeps() {
		if r < 0 || r >= len(g.rules) || g.rules[r].Kind != RuleApart {
			continue
		}
		if d := g.doms[r].dom[at]; d >= 0 {
			g.c.setDomain(&g.keepers[r][d], n)
		}
	}
}

// add adds n pods to rule r's count in domain d.
func (g *rulePlacer) add(r, d, n int) {
	was := g.counts[r][d]
	g.c.setDomain(&g.counts[r][d], n)
	g.totals[r] += n
	switch now := g.counts[r][d]; {
	case was <= 0 && now > 0:
		g.positive[r]++
	case was > 0 && now <= 0:
		g.positive[r]--
	}
}

// prepare works out, for pod p of demand dm, the least count of each spread rule it keeps
// over its eligible domains.
func (g *rulePlacer) prepare(p *Pod, dm demand) {
	for _, r := range p.keeps() {
		if r < 0 || r >= len(g.rules) || g.rules[r].Kind != RuleSpread {
			continue
		}
		least := -1
		if dm.set == nil && g.positive[r] < len(g.counts[r]) {
			// Some domain counts none (or less): the least is 0. A spread over the nodes
			// of a large cluster looked at every node for each pod of each such job.
			g.minOf[r] = 0
			continue
		}
		if dm.set == nil { // every domain of the key is eligible
			for _, c := range g.counts[r] {
				if least < 0 || c < least {
					least = c
				}
			}
			g.minOf[r] = max(least, 0)
			continue
		}
		if n := len(g.counts[r]); cap(g.seen) < n {
			g.seen = make([]bool, n)
		} else {
			g.seen = g.seen[:n]
			clear(g.seen)
		}
		for at, d := range g.doms[r].dom {
			if d < 0 || g.seen[d] || !g.c.usable(at, dm) {
				continue
			}
			g.seen[d] = true
			if least < 0 || g.counts[r][d] < least {
				least = g.counts[r][d]
			}
		}
		g.minOf[r] = max(least, 0)
	}
}

// broken is the first rule pod p would break at position at, or -1.
func (g *rulePlacer) broken(p *Pod, at int) int {
	for _, r := range p.keeps() {
		if r < 0 || r >= len(g.rules) {
			continue
		}
		rule, d := &g.rules[r], g.doms[r].dom[at]
		switch rule.Kind {
		case RuleApart:
			if d >= 0 && g.counts[r][d] > 0 {
				return r
			}
		case RuleTogether:
			if d < 0 || (g.counts[r][d] == 0 && (g.totals[r] > 0 || !countsFor(p, r))) {
				return r
			}
		case RuleSpread:
			self := 0
			if countsFor(p, r) {
				self = 1
			}
			if d < 0 || g.counts[r][d]+self-g.minOf[r] > rule.MaxSkew {
				return r
			}
		}
	}
	// A pod an anti-affinity rule counts stays out of the domains of the pods keeping it.
	for _, r := range p.counts() {
		if r < 0 || r >= len(g.rules) || g.rules[r].Kind != RuleApart {
			continue
		}
		if d := g.doms[r].dom[at]; d >= 0 && g.keepers[r][d] > 0 && !keeps(p, r) {
			return r
		}
	}
	return -1
}

func countsFor(p *Pod, r int) bool { return containsInt(p.counts(), r) }
func keeps(p *Pod, r int) bool     { return containsInt(p.keeps(), r) }

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// spreadScore is how many pods the spread rules pod p keeps count in the domains of at.
func (g *rulePlacer) spreadScore(p *Pod, at int) int {
	s := 0
	for _, r := range p.keeps() {
		if r >= 0 && r < len(g.rules) && g.rules[r].Kind == RuleSpread {
			if d := g.doms[r].dom[at]; d >= 0 {
				s += g.counts[r][d]
			}
		}
	}
	return s
}

// choose is the position in [lo, hi) for pod i of the job, or -1 and the rule that left no
// node with room (-1 when room was short). Among the nodes with room that its required rules
// allow it takes the one whose domains hold the fewest pods its spread rules count, then the
// one its preferred rules score highest (preference), then, for a worker, a node of its PS
// (those are tried first), then the first in table order. Nodes without room are skipped by
// the max-tree; the walk stops at the first node as good as any can be.
func (g *rulePlacer) choose(i, lo, hi int) (int, int) {
	p, dm := g.v.toFit[i], g.v.demands[i]
	g.prepare(p, dm)
	floor := 0 // the least spread score any node can have
	for _, r := range p.keeps() {
		if r >= 0 && r < len(g.rules) && g.rules[r].Kind == RuleSpread {
			floor += g.minOf[r]
		}
	}
	ceiling, prefers := 0, g.prefer && len(p.prefers()) > 0 // the most preference can be
	if prefers {
		ceiling = g.preferenceCeiling(p)
	}
	offFloor := 0 // 1 once a worker's PS nodes are tried: off them it is off its PS
	best, blame := -1, -1
	var bestSpread, bestPref, bestOff int
	consider := func(at int) bool {
		if !g.c.usable(at, dm) || !g.c.fits(at, dm.needs) {
			return false
		}
		onPS := containsSorted(g.ps, at)
		if p.Role == RolePS && onPS && g.v.job.PSApart {
			return false
		}
		if r := g.broken(p, at); r >= 0 {
			if blame < 0 {
				blame = r
			}
			return false
		}
		spread, pref, off := g.spreadScore(p, at), 0, 0
		if prefers {
			pref = g.preference(p, at)
		}
		if (p.Role == RolePS && onPS) || (p.Role != RolePS && len(g.ps) > 0 && !onPS) {
			off = 1
		}
		if best < 0 || spread < bestSpread || spread == bestSpread && (pref > bestPref || pref == bestPref && off < bestOff) {
			best, bestSpread, bestPref, bestOff = at, spread, pref, off
		}
		return bestSpread == floor && bestPref == ceiling && bestOff <= offFloor
	}
	if p.Role != RolePS && len(g.ps) > 0 {
		for _, at := range g.ps {
			if at >= lo && at < hi && consider(at) {
				return best, -1
			}
		}
		offFloor = 1
	}
	for at := g.c.findIn(dm.needs, lo, hi); at >= 0; at = g.c.findIn(dm.needs, at+1, hi) {
		if consider(at) {
			break
		}
	}
	if best >= 0 {
		blame = -1
	}
	return best, blame
}

// run places the job's required pods inside [lo, hi), appending them to plan when it is
// not nil; with all it goes on past a pod that does not fit. It says how far it got.
func (g *rulePlacer) run(lo, hi int, plan *[]plannedPod, all bool) ruleFit {
	out := ruleFit{reachFit: reachFit{first: -1}}
	for i, p := range g.v.toFit {
		at, blame := g.choose(i, lo, hi)
		if at < 0 {
			if out.first < 0 {
				out.first = i
				if blame >= 0 {
					out.why = g.rules[blame].Why
				}
			}
			if !all {
				break
			}
			continue
		}
		g.c.take(at, g.v.demands[i].needs)
		g.count(p, at)
		if p.Role == RolePS {
			g.ps = insertSorted(g.ps, at)
		}
		out.placed++
		if plan != nil {
			*plan = append(*plan, plannedPod{uid: p.UID, node: at, role: p.Role})
		}
	}
	return out
}

// keeps reports whether v's plan keeps its rules: each planned pod, in plan order, where
// the placer would have allowed it. Nothing is taken.
func (g *rulePlacer) keepsPlan(plan []plannedPod) bool {
	for k, pp := range plan {
		if k >= len(g.v.toFit) || g.v.toFit[k].UID != pp.uid {
			return false
		}
		p := g.v.toFit[k]
		g.prepare(p, g.v.demands[k])
		if g.broken(p, pp.node) >= 0 {
			return false
		}
		g.count(p, pp.node)
	}
	return true
}

// ranges are the [lo, hi) position ranges of the domains v may run in: the domains of its
// required level, or the whole table.
func ruleRanges(c *capacity, v *jobView) [][2]int32 {
	top := c.lay.levels() + 1
	switch {
	case v.required >= top:
		return [][2]int32{{0, int32(len(c.nodes))}}
	case v.required == nodeLevel:
		out := make([][2]int32, len(c.nodes))
		for p := range out {
			out[p] = [2]int32{int32(p), int32(p + 1)}
		}
		return out
	}
	var out [][2]int32
	l := v.required - 1
	for d, span := range c.lay.span[l] {
		if c.lay.value[l][d] != "" { // a node without the level's label is in no domain of it
			out = append(out, span)
		}
	}
	return out
}

// placeRuled places v, a job with rules, on c (in a trial) into the first domain of its
// required level that holds it, and says how far it got (in the last domain tried).
func placeRuled(c *capacity, v *jobView, plan *[]plannedPod, all bool) ruleFit {
	out := ruleFit{reachFit: reachFit{first: 0}}
	start := c.mark()
	for _, span := range ruleRanges(c, v) {
		c.rollbackTo(start)
		if plan != nil {
			*plan = (*plan)[:0]
		}
		g := newRulePlacer(c, v)
		g.prefer = plan != nil // the fit alone (never-fits) needs no preferences
		out = g.run(int(span[0]), int(span[1]), plan, all)
		if out.first < 0 {
			return out
		}
	}
	return out
}

// ruleBlocker says why a job with rules does not fit c: the rule that left no node for a
// pod, or the resource that was short.
func ruleBlocker(c *capacity, v *jobView, f ruleFit) string {
	who := podLabel(v.toFit[f.first], namespaceOf(v.job.Key))
	if f.why != "" {
		return who + " has no node with room that keeps " + f.why
	}
	return c.shortage(who, v.demands[f.first])
}

// ruleNever says how far a job with rules gets on the nodes' Capacity ("" when it fits).
func ruleNever(r *capacity, v *jobView, f ruleFit) string {
	if f.first < 0 || f.why == "" {
		return neverText(r, v, f.reachFit)
	}
	return "only " + strconv.Itoa(f.placed) + " of the " + strconv.Itoa(len(v.toFit)) + " pods it needs can be placed keeping " + f.why + ", even with no other job's pods on the nodes"
}

// placeWithRules is place for a job with rules (c in a trial, start its mark): the plan it
// keeps from its turn while that still keeps its rules, else placeRuled's.
func placeWithRules(c *capacity, v *jobView, start mark) string {
	if v.hasTurn && keepPlan(c, v) && newRulePlacer(c, v).keepsPlan(v.plan) {
		v.keptPlan = true
		return ""
	}
	c.rollbackTo(start)
	v.plan = v.plan[:0]
	f := placeRuled(c, v, &v.plan, false)
	if f.first < 0 {
		return ""
	}
	v.plan = v.plan[:0]
	v.need = c.total(v.demands)
	if f.why != "" {
		v.need += ", keeping " + f.why
	}
	return ruleBlocker(c, v, f)
}

// reachRuled is tryReach for a job with rules: how far it gets on r, the table of the
// nodes' Capacity, with its own bound and held pods where they are. r is left as it was.
func reachRuled(r *capacity, v *jobView) ruleFit {
	r.begin()
	defer r.rollback()
	takePlaced(r, v)
	return placeRuled(r, v, nil, true)
}
