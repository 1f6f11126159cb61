package priority

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"
)

// Placement levels: 0 is the node, 1..L the topology levels (State.Topology's keys, nearest
// first), L+1 the whole cluster.
const nodeLevel = 0

// gangPlacer places one job's required pending pods on a capacity table so that workers sit
// with their parameter servers (see placeJob). It works inside the table's open trial and
// can be taken back to a mark.
type gangPlacer struct {
	c       *capacity
	lay     *layout // nil or without levels: the node and the cluster only
	top     int     // the cluster level, L+1
	pods    []*Pod
	demands []demand
	// groups are the job's PS, each with the workers it serves; a job without a PS is one
	// group without one.
	groups []podGroup
	// placed are the table positions of the job's bound and held pods, and planned those
	// of the pods placed so far; ps the positions of its PS, placed or planned.
	placed []int
	plan   []plannedPod
	ps     []int
	// psApart forbids two PS on a node (hard PS anti-affinity).
	psApart bool
	// partial keeps placing after a pod that does not fit (a reservation), instead of
	// giving up on the job.
	partial bool
	// required and preferred are the job's levels: the placement stays inside one domain
	// of required (top: no requirement), and looks for one domain from preferred up.
	required, preferred int

	// Scratch space, kept across reset. domains is a stack: each candidates call pushes its
	// list, and its caller pops it when done.
	all      []placerMember
	ints     []int
	sum      []int64
	totalBuf []dimNeed
	found    []candidate
	domains  []int
	rooms    []room
}

// candidate is a domain candidates may return, with what orders it.
type candidate struct {
	d      int
	near   int
	slack  float64
	wanted int
}

// podGroup is a PS and the workers it serves: they are kept together.
type podGroup struct {
	ps      int   // index of its pending PS in pods, or -1
	psAt    int   // position of its bound or held PS, or -1
	members []int // indexes of its pending worker-side pods in pods
	anchors []int // positions of its bound and held pods
}

// placerMark is a point a gangPlacer can be taken back to.
type placerMark struct {
	c        mark
	plan, ps int
}

func (g *gangPlacer) mark() placerMark {
	return placerMark{g.c.mark(), len(g.plan), len(g.ps)}
}

func (g *gangPlacer) rollbackTo(m placerMark) {
	g.c.rollbackTo(m.c)
	g.plan, g.ps = g.plan[:m.plan], g.ps[:m.ps]
}

// newGangPlacer prepares the placement of v's pods to fit on c, with its bound and held
// pods where they are, at the job's levels (required: the level one domain of which must
// hold the job; preferred: the level the search for one domain starts at).
func newGangPlacer(c *capacity, v *jobView, required, preferred int) *gangPlacer {
	g := &gangPlacer{}
	g.reset(c, v, required, preferred)
	return g
}

// placerMember is one of a job's pods as reset deals them into groups.
type placerMember struct {
	pod     *Pod
	pending int // index in pods, or -1
	at      int // position when placed, or -1
	group   int
}

// reset makes g the placer of v's pods on c, reusing g's arrays (see newGangPlacer).
func (g *gangPlacer) reset(c *capacity, v *jobView, required, preferred int) {
	*g = gangPlacer{
		c: c, lay: c.lay, top: c.lay.levels() + 1,
		pods: v.toFit, demands: v.demands,
		psApart:  v.job.PSApart,
		required: required, preferred: preferred,
		groups: g.groups[:0], placed: g.placed[:0], plan: g.plan[:0], ps: g.ps[:0],
		all: g.all[:0], ints: g.ints[:0], sum: g.sum, totalBuf: g.totalBuf,
		found: g.found[:0], domains: g.domains[:0], rooms: g.rooms[:0],
	}
	if len(v.placed) == 0 && (len(v.toFit) < 2 || v.toFit[1].Role != RolePS) {
		// Nothing placed and at most one PS (pending pods come PS first): one group.
		ints := g.ints
		pg := podGroup{ps: -1, psAt: -1}
		for i, p := range v.toFit {
			if p.Role == RolePS {
				pg.ps = i
			} else {
				ints = append(ints, i)
			}
		}
		pg.members = ints
		g.groups = append(g.groups, pg)
		g.ints = ints
		return
	}
	// Every PS and worker-side pod, pending or placed, in intra-job order: each PS heads a
	// group, and the workers are dealt to the groups in blocks of consecutive indexes.
	all := g.all
	for i, p := range v.toFit {
		all = append(all, placerMember{p, i, -1, 0})
	}
	for _, p := range v.placed {
		all = append(all, placerMember{p, -1, c.nodeIndex(p.Node), 0})
	}
	if len(v.placed) > 0 { // pending pods alone come sorted already
		slices.SortFunc(all, func(a, b placerMember) int { return comparePods(a.pod, b.pod) })
	}
	k, workers := 0, 0
	for _, m := range all {
		if m.pod.Role == RolePS {
			k++
		} else {
			workers++
		}
	}
	groups := max(k, 1)
	ps, w := 0, 0
	for i := range all {
		m := &all[i]
		if m.pod.Role == RolePS {
			m.group = ps
			ps++
		} else {
			m.group = w * groups / workers
			w++
		}
		if m.at >= 0 {
			g.placed = append(g.placed, m.at)
		}
	}
	g.all = all
	// The groups' member and anchor lists live in one array: group by group, members then
	// anchors.
	ints := g.ints
	for grp := range groups {
		pg := podGroup{ps: -1, psAt: -1}
		start := len(ints)
		for _, m := range all {
			if m.group != grp {
				continue
			}
			if m.pod.Role == RolePS {
				pg.ps, pg.psAt = m.pending, m.at
				if m.at >= 0 {
					g.ps = append(g.ps, m.at)
				}
			} else if m.pending >= 0 {
				ints = append(ints, m.pending)
			}
		}
		mid := len(ints)
		for _, m := range all {
			if m.group == grp && m.at >= 0 {
				ints = append(ints, m.at)
			}
		}
		pg.members, pg.anchors = ints[start:mid:mid], ints[mid:len(ints):len(ints)]
		g.groups = append(g.groups, pg)
	}
	g.ints = ints
}

// run places the whole job; false when it does not fit as asked (with partial, what fits
// is placed all the same).
func (g *gangPlacer) run() bool {
	return g.placeUnit(g.groups, 0, len(g.c.nodes), g.top, g.preferred, g.required)
}

// placeUnit places the groups u inside [lo, hi), a domain of level scope. It looks for the
// lowest level, from level from up to level upto (and below scope), at which one domain
// holds all of u: on the node level the first node that does (in placement order, which
// fills domains front to back); on a topology level the domain that holds it most tightly,
// nearest the job's other pods. Inside that domain u is placed the same way. When no
// domain below scope holds u, u is spread over [lo, hi) (split), unless upto is below scope.
func (g *gangPlacer) placeUnit(u []podGroup, lo, hi, scope, from, upto int) bool {
	if g.pendingIn(u) == 0 {
		return true
	}
	last := min(upto, scope-1)
	for l := from; l <= last; l++ {
		if l == nodeLevel {
			if g.psIn(u) > 1 {
				continue // PS are kept apart: a gang of two PS needs two nodes
			}
			if at, total := g.nodeFor(u, lo, hi); at >= 0 {
				g.putAll(u, at, total)
				return true
			}
			continue
		}
		// Levels from..l-1 have been searched over every domain of level l; only a
		// search that started above the node level leaves lower levels to look at inside.
		inner := l
		if from > nodeLevel {
			inner = nodeLevel
		}
		depth := len(g.domains)
		for _, d := range g.candidates(u, l, lo, hi) {
			dlo, dhi := g.lay.spanOf(l, d)
			m := g.mark()
			if g.placeUnit(u, dlo, dhi, l, inner, l) {
				return true
			}
			g.rollbackTo(m)
			// Keeping groups together packs differently from first fit; a domain that
			// first fit fills is still one domain.
			if g.flatIn(u, dlo, dhi) {
				return true
			}
			g.rollbackTo(m)
		}
		g.domains = g.domains[:depth]
	}
	if upto < scope {
		return false
	}
	return g.split(u, lo, hi, scope)
}

// split spreads u over [lo, hi), a domain of level scope that no lower domain holds u in:
// each group goes to the lowest domain that holds it; a group no lower domain holds is
// placed pod by pod, its PS first, each worker as near its PS as there is room.
func (g *gangPlacer) split(u []podGroup, lo, hi, scope int) bool {
	ok := true
	if len(u) > 1 {
		for i := range u {
			if !g.placeUnit(u[i:i+1], lo, hi, scope, nodeLevel, scope) {
				if !g.partial {
					return false
				}
				ok = false
			}
		}
		return ok
	}
	grp := &u[0]
	if grp.ps < 0 {
		return g.splitGroup(grp, lo, hi, scope, false)
	}
	// The PS first, where most of its workers can follow; when that takes room its workers
	// needed (a PS on a node with free accelerators but its cpu), the workers first and the
	// PS as near them as there is room.
	m := g.mark()
	if g.splitGroup(grp, lo, hi, scope, true) {
		return true
	}
	g.rollbackTo(m)
	if g.splitGroup(grp, lo, hi, scope, false) {
		return true
	}
	if g.partial { // a reservation keeps what the first way placed
		g.rollbackTo(m)
		g.splitGroup(grp, lo, hi, scope, true)
	}
	return false
}

// splitGroup places one group pod by pod inside [lo, hi), a domain of level scope: its PS
// first (psFirst) or last, each pod as near the group's pods placed so far as there is room
// (see nearest). It reports whether all fit; with partial it places what fits.
func (g *gangPlacer) splitGroup(grp *podGroup, lo, hi, scope int, psFirst bool) bool {
	ok := true
	target := -1
	for _, a := range append([]int{grp.psAt}, grp.anchors...) {
		if a >= lo && a < hi {
			target = a
			break
		}
	}
	if target < 0 {
		target = g.nearJob(lo, hi)
	}
	if target < 0 {
		// Nothing of the job here yet: where most of its workers can go.
		target = g.roomiest(grp, lo, hi, scope)
	}
	placePS := func() {
		if grp.ps < 0 {
			return
		}
		at := g.nearest(grp.ps, target, lo, hi, scope, true)
		if at < 0 {
			ok = false
			return
		}
		if psFirst || target < 0 {
			target = at
		}
	}
	if psFirst {
		placePS()
		if !ok && !g.partial {
			return false
		}
	}
	for _, i := range grp.members {
		at := g.nearest(i, target, lo, hi, scope, false)
		if at < 0 {
			if !g.partial {
				return false
			}
			ok = false
			continue
		}
		if target < 0 {
			target = at
		}
	}
	if !psFirst {
		placePS()
	}
	return ok
}

// flatIn places u's pending pods in [lo, hi) by Fit's first fit: each PS on the first node
// without another PS of the job (else the first, when PS may share), each worker on the
// first node with a PS of the job that has room, else the first that fits. It reports
// whether they all fit; what it placed stays for the caller to keep or take back.
func (g *gangPlacer) flatIn(u []podGroup, lo, hi int) bool {
	for _, grp := range u {
		if grp.ps >= 0 && g.nearest(grp.ps, -1, lo, hi, nodeLevel, true) < 0 {
			return false
		}
	}
	for _, grp := range u {
		for _, i := range grp.members {
			d := g.demands[i]
			at := -1
			for _, p := range g.ps { // a handful; the first by position, as Fit takes them
				if p >= lo && p < hi && (at < 0 || p < at) && g.c.usable(p, d) && g.c.fits(p, d.needs) {
					at = p
				}
			}
			if at < 0 {
				at = g.firstIn(d, lo, hi, false)
			}
			if at < 0 {
				return false
			}
			g.put(i, at)
		}
	}
	return true
}

// roomiest is the node inside [lo, hi), a domain of level scope, with room for the most of
// the group's workers (counted as copies of its first worker, or of its PS without one, node
// by node): in the child domain with room for the most, and so on down to the node; -1 when
// the group has no pending pod.
func (g *gangPlacer) roomiest(grp *podGroup, lo, hi, scope int) int {
	pod := grp.ps
	if len(grp.members) > 0 {
		pod = grp.members[0]
	}
	if pod < 0 || lo >= hi {
		return -1
	}
	// Only the nodes with room for one copy count; the others hold none. They are found
	// down the tree of maxima, which passes over the full parts of the range. A loop over
	// all of [lo, hi), with a slice of its length, cost a backlog that waits on a full
	// cluster 1.2 s and 690 MB a recompute (5000 nodes, 8.3k of 10k jobs waiting:
	// BenchmarkRecomputeWaitingBacklog, nodecpu=2); this, 64 ms and 10 MB.
	rooms := g.c.appendRooms(g.rooms[:0], g.demands[pod], lo, hi)
	defer func() { g.rooms = rooms[:0] }()
	for l := min(scope-1, g.lay.levels()); l >= 1; l-- {
		// The domain with room for the most, the first of those: a domain without
		// rooms holds none, and the first domain is taken when none holds any.
		best, most := g.lay.domainOf(l, lo), int64(0)
		for k := 0; k < len(rooms); {
			dom, n := g.lay.domainOf(l, rooms[k].at), int64(0)
			for ; k < len(rooms) && g.lay.domainOf(l, rooms[k].at) == dom; k++ {
				n = addCopies(n, rooms[k].copies)
			}
			if n > most {
				best, most = dom, n
			}
		}
		dlo, dhi := g.lay.spanOf(l, best)
		from, _ := slices.BinarySearchFunc(rooms, dlo, func(r room, at int) int { return cmp.Compare(r.at, at) })
		to, _ := slices.BinarySearchFunc(rooms, dhi, func(r room, at int) int { return cmp.Compare(r.at, at) })
		rooms, lo, hi = rooms[from:to], dlo, dhi
	}
	best, most := lo, int64(0)
	for _, r := range rooms {
		if r.copies > most {
			best, most = r.at, r.copies
		}
	}
	return best
}

// addCopies is a + b, both >= 0, saturating: a node without a pod limit holds copies of a
// pod that asks for nothing else without end (unlimited), and a few such nodes would wrap
// a plain sum to below zero.
func addCopies(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// nearJob is the position of the job's last placed or planned pod inside [lo, hi), or -1.
func (g *gangPlacer) nearJob(lo, hi int) int {
	for i := len(g.plan) - 1; i >= 0; i-- {
		if at := g.plan[i].node; at >= lo && at < hi {
			return at
		}
	}
	for _, at := range g.placed {
		if at >= lo && at < hi {
			return at
		}
	}
	return -1
}

// nearest places pod i as near target as there is room inside [lo, hi): on target itself,
// then in target's domain of each level up to scope, then anywhere in [lo, hi). A PS avoids
// nodes with another PS of the job, and takes one only when nothing else fits and PS may
// share. It returns the position, or -1 when the pod fits nowhere in [lo, hi).
func (g *gangPlacer) nearest(i, target, lo, hi, scope int, isPS bool) int {
	d := g.demands[i]
	avoid := isPS
	if target >= lo && target < hi && target >= 0 {
		if !(avoid && g.hasPS(target)) && g.c.usable(target, d) && g.c.fits(target, d.needs) {
			g.put(i, target)
			return target
		}
		for l := 1; l < scope && l <= g.lay.levels(); l++ {
			dlo, dhi := g.lay.spanOf(l, g.lay.domainOf(l, target))
			if at := g.firstIn(d, max(dlo, lo), min(dhi, hi), avoid); at >= 0 {
				g.put(i, at)
				return at
			}
		}
	}
	at := g.firstIn(d, lo, hi, avoid)
	if at < 0 && avoid && !g.psApart {
		at = g.firstIn(d, lo, hi, false)
	}
	if at >= 0 {
		g.put(i, at)
	}
	return at
}

// firstIn is the first position in [lo, hi) that pod demand d may use and that fits it,
// skipping nodes with a PS of the job when avoidPS is set; -1 when none.
func (g *gangPlacer) firstIn(d demand, lo, hi int, avoidPS bool) int {
	if d.set != nil {
		m := g.c.maskOf(d.set)
		at := m.findIn(d.needs, lo, hi)
		for at >= 0 && avoidPS && g.hasPS(at) {
			at = m.findIn(d.needs, at+1, hi)
		}
		return at
	}
	// No node before the shape's cursor fits it; a search of the rest of the table from
	// the cursor moves the cursor to what it finds, as first fit does.
	cursor := g.c.cursor[d.shape]
	from := max(lo, cursor)
	first := true
	for from < hi {
		at := g.c.findIn(d.needs, from, hi)
		if first && from == cursor && hi == len(g.c.nodes) {
			g.c.moveCursor(d.shape, at)
		}
		first = false
		if at < 0 || !(avoidPS && g.hasPS(at)) {
			return at
		}
		from = at + 1
	}
	return -1
}

// nodeFor is the node in [lo, hi) that holds every pending pod of u at once (the one their
// placed pods are on, when they are placed), or -1, and what they need together.
func (g *gangPlacer) nodeFor(u []podGroup, lo, hi int) (int, []dimNeed) {
	total := g.total(u)
	anchor := -1
	for _, grp := range u {
		for _, a := range grp.anchors {
			if anchor >= 0 && a != anchor {
				return -1, total
			}
			anchor = a
		}
	}
	pendingPS := false
	for _, grp := range u {
		pendingPS = pendingPS || grp.ps >= 0
	}
	ok := func(at int) bool {
		if pendingPS && g.hasPS(at) && at != anchor {
			return false
		}
		if !g.lay.hasDomain(g.required, at) {
			return false // the job requires a domain of a level whose label the node lacks
		}
		for _, grp := range u {
			if grp.ps >= 0 && !g.c.usable(at, g.demands[grp.ps]) {
				return false
			}
			for _, i := range grp.members {
				if !g.c.usable(at, g.demands[i]) {
					return false
				}
			}
		}
		return true
	}
	if anchor >= 0 {
		if anchor >= lo && anchor < hi && g.c.fits(anchor, total) && ok(anchor) {
			return anchor, total
		}
		return -1, total
	}
	// Gangs of one shape come again and again: the total keeps a cursor of its own, the
	// first node that may hold it, as a pod shape does.
	shape := g.c.totalShape(total)
	cursor := g.c.cursor[shape]
	from := max(lo, cursor)
	searched := false
	for from < hi {
		at := g.c.findIn(total, from, hi)
		if !searched && from == cursor && (at >= 0 || hi == len(g.c.nodes)) {
			g.c.moveCursor(shape, at)
		}
		searched = true
		if at < 0 || ok(at) {
			return at, total
		}
		from = at + 1
		if set := g.setOf(u); set != nil {
			// Only the nodes of the set can do: look among them, not at every node that
			// could hold the gang (a backlog limited to a zone walked the other zones'
			// free nodes job after job: 445 ms a recompute at 5000 nodes, 10k jobs).
			m := g.c.maskOf(set)
			at := m.findIn(total, from, hi)
			for at >= 0 && !ok(at) {
				at = m.findIn(total, at+1, hi)
			}
			return at, total
		}
	}
	return -1, total
}

// setOf is the node set of some pending pod of u (nil when none has one): a node the gang
// may use is in it.
func (g *gangPlacer) setOf(u []podGroup) *NodeSet {
	for _, grp := range u {
		if grp.ps >= 0 && g.demands[grp.ps].set != nil {
			return g.demands[grp.ps].set
		}
		for _, i := range grp.members {
			if g.demands[i].set != nil {
				return g.demands[i].set
			}
		}
	}
	return nil
}

// candidates are the domains of level l inside [lo, hi) whose free sums could hold u, and
// that hold u's placed pods (never the run of a node without the level's label), in the
// order to try them: nearest the job's other pods first
// (the lowest level at which an enclosing domain already has one), then the tightest fit
// (the least left of the scarcest resource u asks for, counted in u's own demand), then
// placement order.
func (g *gangPlacer) candidates(u []podGroup, l, lo, hi int) []int {
	lay := g.lay
	total := g.total(u)
	first, last := lay.domainOf(l, lo), lay.domainOf(l, hi-1)
	anchored := -1
	for _, grp := range u {
		for _, a := range grp.anchors {
			d := lay.domainOf(l, a)
			if anchored >= 0 && d != anchored {
				return nil
			}
			anchored = d
		}
	}
	if anchored >= 0 {
		if anchored < first || anchored > last {
			return nil
		}
		first, last = anchored, anchored
	}
	out := g.found[:0]
	sums := g.c.sums[l-1]
	r := g.c.r
	for d := first; d <= last; d++ {
		if !lay.labelled(l, d) {
			continue // a node without the level's label: no domain of it
		}
		row := sums[d*r : (d+1)*r]
		slack, fits := -1.0, true
		for _, n := range total {
			if row[n.dim] < n.amount {
				fits = false
				break
			}
			if n.dim == r-1 && len(total) > 1 {
				continue // every pod takes a slot; the resources say more
			}
			if s := float64(row[n.dim]-n.amount) / float64(n.amount); slack < 0 || s < slack {
				slack = s
			}
		}
		if fits {
			wanted := 0
			if g.c.wanted != nil {
				wanted = g.c.wanted[l-1][d]
			}
			out = append(out, candidate{d: d, near: g.nearness(l, d), slack: slack, wanted: wanted})
		}
	}
	slices.SortFunc(out, func(a, b candidate) int {
		if c := cmp.Compare(a.near, b.near); c != 0 {
			return c
		}
		if c := cmp.Compare(a.slack, b.slack); c != 0 {
			return c
		}
		if c := cmp.Compare(a.wanted, b.wanted); c != 0 {
			return c // of two alike, the one fewer other pods may use (capacity.wantedBy)
		}
		return cmp.Compare(a.d, b.d)
	})
	g.found = out
	start := len(g.domains)
	for _, c := range out {
		g.domains = append(g.domains, c.d)
	}
	return g.domains[start:len(g.domains):len(g.domains)]
}

// nearness is the lowest level, from l up, at which domain d of level l shares a domain
// with a placed or planned pod of the job; the cluster level when none.
func (g *gangPlacer) nearness(l, d int) int {
	if len(g.placed) == 0 && len(g.plan) == 0 {
		return g.top
	}
	start, _ := g.lay.spanOf(l, d)
	for m := l; m <= g.lay.levels(); m++ {
		ancestor := g.lay.domainOf(m, start)
		for _, at := range g.placed {
			if g.lay.domainOf(m, at) == ancestor {
				return m
			}
		}
		for _, pp := range g.plan {
			if g.lay.domainOf(m, pp.node) == ancestor {
				return m
			}
		}
	}
	return g.top
}

// total is what u's pending pods need together, one pod slot each, as one demand.
func (g *gangPlacer) total(u []podGroup) []dimNeed {
	sum := grown(g.sum, g.c.r)
	clear(sum)
	g.sum = sum
	add := func(i int) {
		for _, n := range g.demands[i].needs {
			sum[n.dim] += n.amount
		}
	}
	for _, grp := range u {
		if grp.ps >= 0 {
			add(grp.ps)
		}
		for _, i := range grp.members {
			add(i)
		}
	}
	out := g.totalBuf[:0]
	for d, v := range sum {
		if v > 0 {
			out = append(out, dimNeed{d, v})
		}
	}
	g.totalBuf = out
	return out
}

func (g *gangPlacer) pendingIn(u []podGroup) int {
	n := 0
	for _, grp := range u {
		if grp.ps >= 0 {
			n++
		}
		n += len(grp.members)
	}
	return n
}

// psIn is how many PS, placed or pending, the groups have.
func (g *gangPlacer) psIn(u []podGroup) int {
	n := 0
	for _, grp := range u {
		if grp.ps >= 0 || grp.psAt >= 0 {
			n++
		}
	}
	return n
}

func (g *gangPlacer) hasPS(at int) bool { return slices.Contains(g.ps, at) }

// putAll places every pending pod of u on one node.
// It takes their total from the node at once: one update of the tree instead of one a pod.
func (g *gangPlacer) putAll(u []podGroup, at int, total []dimNeed) {
	g.c.takeCopy(at, total)
	for _, grp := range u {
		if grp.ps >= 0 {
			g.record(grp.ps, at)
		}
		for _, i := range grp.members {
			g.record(i, at)
		}
	}
}

func (g *gangPlacer) put(i, at int) {
	g.c.take(at, g.demands[i].needs)
	g.record(i, at)
}

// record notes that pod i is planned on position at.
func (g *gangPlacer) record(i, at int) {
	g.plan = append(g.plan, plannedPod{uid: g.pods[i].UID, node: at, role: g.pods[i].Role})
	if g.pods[i].Role == RolePS {
		g.ps = append(g.ps, at)
	}
}

// levelOf is the placement level of a topology request's key: 0 for the node
// (HostnameLevel), l for the l-th topology key, top for "" (no request); ok is false for a
// key that is not a level of the layout.
func (lay *layout) levelOf(key string, top int) (int, bool) {
	switch key {
	case "":
		return top, true
	case HostnameLevel:
		return nodeLevel, true
	}
	if lay != nil {
		for i, k := range lay.keys {
			if k == key {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// summarize says where a job's pods are once planned: the lowest level with one domain
// holding them all, the nearest-level domains they use (in placement order), and how many
// worker-side pods share a node, or a nearest-level domain, with a PS of the job. It runs
// for every admitted job on every recompute, so it keeps to the stack where it can.
func summarize(c *capacity, placed []*Pod, plan []plannedPod) Placement {
	lay := c.lay
	levels := lay.levels()
	// domain is what a pod's position counts as in Domains: its nearest-level domain, or
	// the node itself without topology levels.
	domain := func(pos int) int {
		if levels == 0 {
			return pos
		}
		return lay.domainOf(1, pos)
	}
	var psBuf, domBuf [8]int
	ps, doms := psBuf[:0], domBuf[:0]
	first, n := -1, 0
	same := 0 // every pod so far shares a domain of levels >= same with the first (node: 0)
	visit := func(pos int, isPS bool) {
		n++
		if first < 0 {
			first = pos
		} else {
			for same <= levels && !samePlace(lay, same, first, pos) {
				same++
			}
		}
		if d := domain(pos); !slices.Contains(doms, d) {
			doms = append(doms, d)
		}
		if isPS && !slices.Contains(ps, pos) {
			ps = append(ps, pos)
		}
	}
	for _, p := range placed {
		if i := c.nodeIndex(p.Node); i >= 0 {
			visit(i, p.Role == RolePS)
		}
	}
	for _, pp := range plan {
		visit(pp.node, pp.role == RolePS)
	}
	if n == 0 {
		return Placement{}
	}
	out := Placement{Level: lay.levelName(same)}
	if len(doms) == 1 && levels > 0 {
		out.Domains = lay.single[doms[0]] // shared, never written
	} else {
		slices.Sort(doms) // domain numbers and positions both follow placement order
		out.Domains = make([]string, len(doms))
		for i, d := range doms {
			if levels == 0 {
				out.Domains[i] = c.nodes[d]
			} else {
				out.Domains[i] = lay.single[d][0]
			}
		}
	}
	if len(ps) == 0 {
		return out
	}
	count := func(pos int, isPS bool) {
		if isPS {
			return
		}
		out.Workers++
		if slices.Contains(ps, pos) {
			out.NearPSNode++
			out.NearPSDomain++
			return
		}
		if levels == 0 {
			return
		}
		d := lay.domainOf(1, pos)
		for _, at := range ps {
			if lay.domainOf(1, at) == d {
				out.NearPSDomain++
				return
			}
		}
	}
	for _, p := range placed {
		if i := c.nodeIndex(p.Node); i >= 0 {
			count(i, p.Role == RolePS)
		}
	}
	for _, pp := range plan {
		count(pp.node, pp.role == RolePS)
	}
	return out
}

// domainName names the domain of level l that holds position at: the node's name at the
// node level, else the label value (the node's name for a node without one).
func (c *capacity) domainName(l, at int) string {
	if l == nodeLevel {
		return c.nodes[at]
	}
	if v := c.lay.value[l-1][c.lay.domainOf(l, at)]; v != "" {
		return v
	}
	return c.nodes[at]
}

// samePlace reports whether positions a and b share a domain of placement level l (the
// node at 0; everything at the cluster level).
func samePlace(lay *layout, l, a, b int) bool {
	switch {
	case l == nodeLevel:
		return a == b
	case l > lay.levels():
		return true
	}
	return lay.domainOf(l, a) == lay.domainOf(l, b)
}

// String renders a placement for tables: "one example.com/rack: r1; 6/6 workers near a PS",
// "one node in r2; ...", "across r1, r3; 5/6 workers near a PS".
func (p Placement) String() string {
	if p.Level == "" {
		return ""
	}
	var s string
	switch p.Level {
	case "node":
		s = "one node in "
	case "cluster":
		s = "across "
	default:
		s = "one " + p.Level + ": "
	}
	if len(p.Domains) > 0 {
		for i, d := range p.Domains {
			if i > 0 {
				s += ", "
			}
			if i == 3 && len(p.Domains) > 4 {
				s += "+" + strconv.Itoa(len(p.Domains)-3) + " more"
				break
			}
			s += d
		}
	}
	if p.Workers > 0 {
		s += "; " + strconv.Itoa(p.NearPSDomain) + "/" + strconv.Itoa(p.Workers) + " workers near a PS"
	}
	return s
}

// reserve sets room aside on c for v, a job that does not fit now and leads the queue under
// the reserve policy: in the domain it is to run in, as much as it needs. The domain is the
// lowest-level one whose nodes' Capacity (the table reach) could hold the whole job, as its
// requested levels allow, choosing the one where most of it fits now, then the tightest;
// the whole cluster when none can (or their Capacity is not known). What fits of the job now is placed there (v.plan); the
// rest of the domain's free room, up to what the other pods need, is taken too, so that no
// job behind takes room the leader waits for. c must be in a trial. It returns where the
// reservation is: the placement of what fits, with the domain as its level and name.
func reserve(c, reach *capacity, v *jobView) Placement {
	if v.hasRules { // what fits keeping its rules, anywhere: a job with rules is kept to no domain
		placeRuled(c, v, &v.plan, true)
		out := summarize(c, v.placed, v.plan)
		out.Level = "cluster"
		return out
	}
	lo, hi, level := 0, len(c.nodes), c.lay.levels()+1
	if reach != nil {
		lo, hi, level = reserveDomain(c, reach, v)
	}
	g := newGangPlacer(c, v, v.required, v.preferred)
	g.partial = true
	if level > c.lay.levels() {
		g.run()
	} else {
		g.placeUnit(g.groups, lo, hi, level, nodeLevel, level)
	}
	v.plan = append(v.plan[:0], g.plan...)
	out := summarize(c, v.placed, v.plan)
	if level > c.lay.levels() {
		out.Level = "cluster"
		return out // spread over the cluster: what fits is set aside, the rest stays free
	}
	out.Level, out.Domains = c.lay.levelName(level), []string{c.domainName(level, lo)}
	planned := make(map[string]bool, len(g.plan))
	for _, pp := range g.plan {
		planned[pp.uid] = true
	}
	// Each pod that does not fit yet takes what it can of the domain's nodes it may use.
	want := make([]int64, c.r)
	for i, p := range v.toFit {
		if planned[p.UID] {
			continue
		}
		d := v.demands[i]
		clear(want)
		for _, n := range d.needs {
			want[n.dim] = n.amount
		}
		for at := lo; at < hi; at++ {
			if !c.usable(at, d) {
				continue
			}
			var take []dimNeed
			left := false
			for dim, w := range want {
				if w <= 0 {
					continue
				}
				if have := c.tree[(c.size+at)*c.r+dim]; have > 0 {
					n := min(w, have)
					take = append(take, dimNeed{dim, n})
					want[dim] -= n
				}
				left = left || want[dim] > 0
			}
			if len(take) > 0 {
				c.take(at, take)
			}
			if !left {
				break
			}
		}
	}
	return out
}

// reserveDomain chooses the domain a reserving job waits in (see reserve): its span and
// placement level. A domain the job reserved in the previous queue is chosen again while
// its Capacity can still hold the job.
func reserveDomain(c, reach *capacity, v *jobView) (lo, hi, level int) {
	top := c.lay.levels() + 1
	upto := min(v.required, top-1)
	fitsReach := func(dlo, dhi, l int) bool {
		if !reach.knownIn(dlo, dhi) {
			return false // unknown room says nothing of where the job could ever run
		}
		reach.begin()
		defer reach.rollback()
		for i, p := range v.placed {
			if at := reach.nodeIndex(p.Node); at >= 0 {
				reach.take(at, v.placedDemands[i].needs)
			}
		}
		g := newGangPlacer(reach, v, v.required, v.preferred)
		if l == nodeLevel {
			at, _ := g.nodeFor(g.groups, dlo, dhi)
			return at >= 0
		}
		return g.placeUnit(g.groups, dlo, dhi, l, nodeLevel, l)
	}
	// fitsNow is how many of the job's pods fit in the span now.
	free := make([]int64, c.r)
	fitsNow := func(dlo, dhi, l int) int {
		if l == nodeLevel {
			// One node: count on a copy of its free row, no trial needed.
			copy(free, c.tree[(c.size+dlo)*c.r:(c.size+dlo+1)*c.r])
			n := 0
		pods:
			for i := range v.toFit {
				d := v.demands[i]
				if !c.usable(dlo, d) {
					continue
				}
				for _, need := range d.needs {
					if free[need.dim] < need.amount {
						continue pods
					}
				}
				for _, need := range d.needs {
					free[need.dim] -= need.amount
				}
				n++
			}
			return n
		}
		m := c.mark()
		defer c.rollbackTo(m)
		g := newGangPlacer(c, v, v.required, v.preferred)
		g.partial = true
		g.placeUnit(g.groups, dlo, dhi, l, nodeLevel, l)
		return len(g.plan)
	}
	probe := newGangPlacer(c, v, v.required, v.preferred)
	start := nodeLevel
	if probe.psIn(probe.groups) > 1 {
		start = 1
	}
	for l := start; l <= upto; l++ {
		best, bestFit := -1, -1
		var spans [][2]int
		if l == nodeLevel {
			// Only nodes whose Capacity holds the whole job at once (and its anchors) are
			// worth a look; nodeFor on the Capacity table finds them one after another.
			rp := newGangPlacer(reach, v, v.required, v.preferred)
			for from := 0; from < len(reach.nodes); {
				at, _ := rp.nodeFor(rp.groups, from, len(reach.nodes))
				if at < 0 {
					break
				}
				spans = append(spans, [2]int{at, at + 1})
				from = at + 1
			}
		} else {
			for _, d := range probe.candidatesIn(reach, l) {
				dlo, dhi := c.lay.spanOf(l, d)
				spans = append(spans, [2]int{dlo, dhi})
			}
		}
		for k, sp := range spans {
			// nodeFor has checked a node against the Capacity already, unless the job's own
			// placed pods take part of it.
			if !reach.knownIn(sp[0], sp[1]) || (l > nodeLevel || len(v.placed) > 0) && !fitsReach(sp[0], sp[1], l) {
				continue
			}
			// The domain it reserved before keeps it: its room only grows while no other
			// job may take it, so the job runs there within the longest run of the jobs in
			// it. Moving to where more fits now would start that wait over.
			if v.reservedIn[0] == c.lay.levelName(l) && v.reservedIn[1] == c.domainName(l, sp[0]) {
				return sp[0], sp[1], l
			}
			if n := fitsNow(sp[0], sp[1], l); n > bestFit {
				best, bestFit = k, n
			}
		}
		if best >= 0 {
			return spans[best][0], spans[best][1], l
		}
	}
	return 0, len(c.nodes), top
}

// candidatesIn is candidates over the whole cluster, by the free sums of table t.
func (g *gangPlacer) candidatesIn(t *capacity, l int) []int {
	saved := g.c
	g.c = t
	defer func() { g.c = saved }()
	return g.candidates(g.groups, l, 0, len(t.nodes))
}

// PlanJob is where Admit would put a job's pending pods up to its minimum, on nodes over
// the topology (nil: none), with its bound and held pods where they are and nothing else
// in the way: the plan (pod UID -> node) and where it puts the job. The plan is nil when
// the job may not take a turn (its gang is incomplete or gated) or does not fit. It serves
// callers that place one job at a time, such as Volcano's prioritize.
func PlanJob(nodes []Node, topology *NodeIndex, job Job) (map[string]string, Placement) {
	m := DefaultModel()
	m.Policy = PolicyBestEffort
	q := m.Admit(State{Jobs: []Job{job}, Nodes: nodes, Topology: topology}, time.Time{})
	d, ok := q.Lookup(job.Key)
	if !ok || d.Phase != PhaseAdmitted {
		return nil, Placement{}
	}
	return d.Plan, d.Placement
}
