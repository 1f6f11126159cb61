package priority

import (
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// FitResult is the outcome of a simulated placement.
type FitResult struct {
	// OK is true when every pod found a node.
	OK bool `json:"ok"`
	// Placement maps a placed pod's UID to its node. When OK is false it holds the pods
	// that did fit, which is what a reserving job sets aside.
	Placement map[string]string `json:"placement"`
	// Blocker names the first pod that did not fit and the resource that was short.
	Blocker string `json:"blocker,omitempty"`
}

// Fit simulates placing pods on the nodes' free capacity, node by node and for every
// resource the pods request (cpu, memory, extended resources) plus one "pods" slot on
// nodes that list "pods"; it never adds capacity up across nodes, since a gang that fits
// in total but not node by node would take the turn and never gather. A pod goes only to
// a node of its Nodes (every node when nil). Pods are placed in
// SortPods order. A PS goes to the first node (by name) that fits and hosts no other PS of
// this placement, else to the first that fits; a worker goes to the first node hosting one
// of its PS that fits, else to the first that fits; other pods go to the first that fits.
// Pods that do not fit are skipped and the rest still placed. The inputs are not changed.
func Fit(nodes []Node, pods []Pod) FitResult {
	sorted := slices.Clone(pods)
	SortPods(sorted)
	ptrs := make([]*Pod, len(sorted))
	for i := range sorted {
		ptrs[i] = &sorted[i]
	}
	var dims dimSet
	demands := dims.demands(ptrs, nil)
	c := newCapacity(nodes, &dims, nil, nil)
	res := FitResult{OK: true, Placement: make(map[string]string, len(sorted))}
	var ps []int
	for i, p := range ptrs {
		at := c.placeOne(p.Role, demands[i], &ps, false)
		if at < 0 {
			if res.OK {
				res.OK = false
				res.Blocker = c.shortage(podLabel(p, ""), demands[i])
			}
			continue
		}
		res.Placement[p.UID] = c.nodes[at]
	}
	return res
}

// dimNeed is what a pod needs of one resource, by index into a capacity's dimensions.
type dimNeed struct {
	dim    int
	amount int64
}

// unlimited stands for "no limit" (a node without a "pods" entry). It is far from the
// int64 range so that subtracting and adding back can never overflow.
const unlimited = math.MaxInt64 / 4

// demand is what one pod needs, sorted by dimension with the pod slot last, and the nodes
// it may use (nil: any). Pods with equal needs and the same nodes share a shape, so the
// search for one can start where the last one left off.
type demand struct {
	needs []dimNeed
	set   *NodeSet
	shape int
}

// dimSet names the resource dimensions of one computation. Only resources some pod asks
// for get a dimension; "pods" always has one, as the last, because every pod takes a slot.
type dimSet struct {
	names  []string
	shapes int
}

// provisional returns the provisional dimension of a resource name, adding it when new.
// A short linear scan beats hashing for the handful of resources clusters have.
func (ds *dimSet) provisional(name string, index map[string]int) int {
	if len(ds.names) <= 8 {
		for d, n := range ds.names {
			if n == name {
				return d
			}
		}
	} else if d, ok := index[name]; ok {
		return d
	}
	d := len(ds.names)
	index[name] = d
	ds.names = append(ds.names, name)
	return d
}

// demandScratch is the memory demands writes its result into, kept by a caller that
// computes demands again and again (Workspace); the zero value is ready to use. A result
// is valid until the next call with the same scratch.
type demandScratch struct {
	backing []dimNeed
	out     []demand
	sameAs  []int32
}

// demands turns each pod's request into its demand, in w's memory (nil: fresh memory).
// Non-positive amounts need nothing; a "pods" entry in a request is ignored, since a pod
// is one pod. It is meant to be called once per dimSet.
func (ds *dimSet) demands(pods []*Pod, w *demandScratch) []demand {
	if w == nil {
		w = &demandScratch{}
	}
	index := map[string]int{}
	total := 0
	for _, p := range pods {
		total += len(p.Request) + 1
	}
	if cap(w.backing) < total {
		w.backing = make([]dimNeed, 0, total)
	}
	backing := w.backing[:0]
	w.out = grown(w.out, len(pods))
	out := w.out
	clear(out)
	// Pods that share one request map (a caller may intern equal requests) and one node
	// set share one demand: sameAs[i] is the first pod with pod i's map and set, or i.
	w.sameAs = grown(w.sameAs, len(pods))
	sameAs := w.sameAs
	type requestAndSet struct {
		request unsafe.Pointer
		set     *NodeSet
	}
	firstWith := make(map[requestAndSet]int32)
	// Provisional dimension numbers in order of first sight; renumbered below into the
	// display order once every name is known.
	for i, p := range pods {
		sameAs[i] = int32(i)
		out[i].set = p.Nodes
		if p.Request != nil {
			at := requestAndSet{reflect.ValueOf(p.Request).UnsafePointer(), p.Nodes}
			if j, ok := firstWith[at]; ok {
				sameAs[i] = j
				continue
			}
			firstWith[at] = int32(i)
		}
		start := len(backing)
		for name, v := range p.Request {
			if v <= 0 || name == resourcePods {
				continue
			}
			d := ds.provisional(name, index)
			backing = append(backing, dimNeed{d, v})
		}
		// Room for the pod slot, filled in once the dimension of "pods" is known.
		backing = append(backing, dimNeed{})
		out[i].needs = backing[start:len(backing):len(backing)]
	}
	order := slices.Clone(ds.names)
	slices.SortFunc(order, compareResourceNames)
	renumber := make([]int, len(ds.names))
	for i, name := range order {
		renumber[index[name]] = i
	}
	ds.names = append(order, resourcePods)
	podsDim := len(ds.names) - 1

	shapes := map[string]int{}
	setIDs := map[*NodeSet]uint64{}
	var key []byte
	for i := range out {
		if j := sameAs[i]; int(j) != i {
			out[i] = out[j] // j < i: already renumbered
			continue
		}
		needs := out[i].needs
		req := needs[:len(needs)-1]
		for k := range req {
			req[k].dim = renumber[req[k].dim]
		}
		slices.SortFunc(req, func(a, b dimNeed) int { return a.dim - b.dim })
		needs[len(needs)-1] = dimNeed{podsDim, 1}

		// A gang's workers usually ask for the same: compare with the pod before first.
		if i > 0 && out[i].set == out[i-1].set && slices.Equal(needs, out[i-1].needs) {
			out[i].shape = out[i-1].shape
			continue
		}
		key = key[:0]
		if set := out[i].set; set != nil {
			id, ok := setIDs[set]
			if !ok {
				id = uint64(len(setIDs) + 1)
				setIDs[set] = id
			}
			key = binary.AppendUvarint(key, id)
		} else {
			key = append(key, 0)
		}
		for _, n := range req {
			key = binary.AppendUvarint(key, uint64(n.dim))
			key = binary.AppendVarint(key, n.amount)
		}
		shape, ok := shapes[string(key)]
		if !ok {
			shape = len(shapes)
			shapes[string(key)] = shape
		}
		out[i].shape = shape
	}
	ds.shapes = len(shapes)
	return out
}

const resourcePods = "pods"

// compareResourceNames orders resources for messages: cpu, memory, then the rest by name.
func compareResourceNames(a, b string) int {
	rank := func(s string) int {
		switch s {
		case "cpu":
			return 0
		case "memory":
			return 1
		}
		return 2
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	return strings.Compare(a, b)
}

// capacity is the free capacity of every node in one dense table with a max-tree over it:
// each tree node holds, per resource, the most free on any node below it. Finding the
// first node that fits a pod then skips whole runs of full nodes, so placing 10k pods on
// 5000 nodes costs about pods*log(nodes) instead of pods*nodes.
type capacity struct {
	nodes []string // node names in placement order (by name)
	// maxTree's leaf size+i is node i's free amounts, r of them (one per resource).
	maxTree
	names []string // resource names by dimension

	// cursor[shape] is the first node that may fit that shape: no node before it does
	// (len(nodes) when none does). Capacity only shrinks between trials, and give moves
	// the cursors back, so it stays true and each shape's search resumes instead of
	// rescanning full nodes.
	cursor []int

	byName map[string]int // node index by name, built on first use
	// dupNames is 1 when two nodes share a name, -1 when none do, 0 until asked.
	dupNames int8

	// sets holds, for each node set some pod is limited to, the nodes of the set.
	sets map[*NodeSet]*nodeMask
	// maskHeads[i] heads node i's list of links into the masks that hold it (-1: none;
	// nil until a mask is made): add keeps those masks' trees, and only those.
	maskHeads []int32
	maskLinks []maskLink

	// psScratch is the backing array of place's set of PS nodes, reused job after job.
	psScratch []int

	// lay is the node order and the topology domains when the table is built in placement
	// order (nil: by name, no domains); sums[l-1][d*r+dim] is the free amount of dim summed
	// over domain d of placement level l, each node's amount clamped to [0, sumCap].
	lay  *layout
	sums [][]int64
	// wanted[l-1][d] is how many of the queue's pods to fit may use some node of domain d
	// of placement level l (see wantedBy); nil when not counted.
	wanted [][]int
	// placer is place's gang placer, reset job after job; kept is keepPlan's scratch.
	placer    gangPlacer
	kept      []keptNode
	keptNeeds []dimNeed

	// src and order are the nodes the table is built from and their input index by
	// position (for their labels); fromCap is set for a table of the nodes' Capacity.
	// keyDoms caches the domains of the label keys the rules of jobs ask about.
	src     []Node
	order   []int32
	fromCap bool
	keyDoms map[string]*keyDomains
	// ruleInts is the scratch the rule placer's per-rule numbers are cut from (intsFor),
	// domainInts the one of its counts by domain (domainIntsFor), kept zero between
	// placers: domainSet lists the counts a placer made non-zero, which the next one zeroes.
	ruleInts, domainInts []int
	domainSet            []*int

	// unknown[p] counts the nodes before position p+1 whose Capacity is not known (nil),
	// in a table built from Capacity; nil when there are none.
	unknown []int32

	// version moves whenever the free amounts change for good: a take or give outside a
	// trial, a commit of a trial that took or gave. A rollback restores the amounts of the
	// trial's start and leaves it. failed keeps, by gangKey, the version at which a gang
	// did not fit and how (see place).
	version uint64
	failed  map[string]failedFit
	failKey []byte // place's gangKey of the job it places, for failed

	// While a trial is open, takes and cursor moves are logged so that a job that does
	// not fit can be taken back out.
	trial bool
	undo  []taken
	// arena holds the needs takeCopy took, which the undo log refers to.
	arena []dimNeed
	// totals numbers the gang totals that have a cursor (see totalShape), after the pod
	// shapes; key is its scratch.
	totals     map[string]int
	key        []byte
	undoCursor [][2]int // shape, old cursor
	// totalTexts holds what total said, by the pods' count, node set and sums (textKey):
	// the jobs of a backlog mostly ask alike, and each that does not fit is told its total.
	totalTexts map[string]string
	// shortTexts does the same for shortage (see shortText).
	shortTexts map[string]string
	textKey    []byte
	totalSum   []int64
}

type taken struct {
	node  int
	needs []dimNeed
	given bool // given back (give), not taken: undone by taking it again
}

// capacityArrays are the arrays of one capacity table, kept for the next call to reuse.
type capacityArrays struct {
	order []int32
	nodes []string
	tree  []int64
}

// tableSource says which of a node's maps a capacity table is built from.
type tableSource int

const (
	// fromFree reads Node.Free; a missing resource is zero.
	fromFree tableSource = iota
	// fromCapacity reads Node.Capacity; a nil Capacity is unlimited in every resource.
	fromCapacity
)

// newCapacity builds the table from the nodes' Free, in name order, or in lay's placement
// order when lay is not nil (it must be the layout of exactly these nodes), so that the
// result does not depend on the order of the input. Its arrays come from a when not nil.
func newCapacity(nodes []Node, ds *dimSet, a *capacityArrays, lay *layout) *capacity {
	return newCapacityFrom(nodes, ds, a, fromFree, lay)
}

// newCapacityFrom builds the table from the nodes' Free or Capacity, as src says.
func newCapacityFrom(nodes []Node, ds *dimSet, a *capacityArrays, src tableSource, lay *layout) *capacity {
	if a == nil {
		a = &capacityArrays{}
	}
	a.order = grown(a.order, len(nodes))
	order := a.order
	if lay != nil {
		copy(order, lay.order) // a's arrays are reused: never hand them the layout's own
	} else {
		// Sorting int32 indexes moves no pointers, which keeps the GC's write barrier out
		// of the sort; an already sorted input (a snapshot kept in order) skips it.
		for i := range order {
			order[i] = int32(i)
		}
		byName := func(a, b int32) int { return strings.Compare(nodes[a].Name, nodes[b].Name) }
		if !slices.IsSortedFunc(order, byName) {
			slices.SortFunc(order, byName)
		}
	}
	a.nodes = grown(a.nodes, len(order))
	for i, k := range order {
		a.nodes[i] = nodes[k].Name
	}
	return fillCapacity(nodes, order, a.nodes, ds, a, src, lay)
}

// sibling builds a table of the same nodes in the same order as c, from src, with its
// tree taken from a: the sort is done once for both.
func (c *capacity) sibling(nodes []Node, order []int32, ds *dimSet, a *capacityArrays, src tableSource) *capacity {
	return fillCapacity(nodes, order, c.nodes, ds, a, src, c.lay)
}

// fillCapacity builds the table of nodes[order[i]], named names[i], from src, with the
// domain sums of lay when it is not nil.
func fillCapacity(nodes []Node, order []int32, names []string, ds *dimSet, a *capacityArrays, src tableSource, lay *layout) *capacity {
	r := len(ds.names)
	size := 1
	for size < len(order) {
		size *= 2
	}
	// Every entry of the tree but the unused root slot 0 is written below.
	a.tree = grown(a.tree, 2*size*r)
	c := &capacity{
		nodes:   names,
		maxTree: maxTree{r: r, size: size, tree: a.tree},
		names:   ds.names,
		cursor:  make([]int, ds.shapes),
		src:     nodes,
		order:   order,
		// fromCap: the Capacity table's rules count only the pods that stay.
		fromCap: src == fromCapacity,
	}
	podsDim := r - 1
	var lastFree unsafe.Pointer // a caller may share one Free map between nodes
	for i, k := range order {
		n := &nodes[k]
		leaf := c.tree[(size+i)*r : (size+i+1)*r]
		m := n.Free
		if src == fromCapacity {
			if m = n.Capacity; m == nil {
				for d := range leaf {
					leaf[d] = unlimited
				}
				lastFree = nil
				if c.unknown == nil {
					c.unknown = make([]int32, len(order))
				}
				c.unknown[i] = 1
				continue
			}
		}
		free := reflect.ValueOf(m).UnsafePointer()
		if free != nil && free == lastFree {
			copy(leaf, c.tree[(size+i-1)*r:(size+i)*r])
			continue
		}
		lastFree = free
		for d := 0; d < podsDim; d++ {
			leaf[d] = m[ds.names[d]]
		}
		if v, ok := m[resourcePods]; ok {
			leaf[podsDim] = v
		} else {
			leaf[podsDim] = unlimited
		}
	}
	for i := len(order); i < size; i++ {
		leaf := c.tree[(size+i)*r : (size+i+1)*r]
		for d := range leaf {
			leaf[d] = math.MinInt64
		}
	}
	c.build()
	for i := 1; i < len(c.unknown); i++ {
		c.unknown[i] += c.unknown[i-1]
	}
	if lay != nil && lay.levels() > 0 {
		c.lay = lay
		c.sums = make([][]int64, lay.levels())
		for l := range c.sums {
			sums := make([]int64, len(lay.span[l])*r)
			for p := range order {
				row := sums[int(lay.dom[l][p])*r:]
				for d, v := range c.tree[(size+p)*r : (size+p+1)*r] {
					row[d] += sumPart(v)
				}
			}
			c.sums[l] = sums
		}
	} else if lay != nil {
		c.lay = lay
	}
	return c
}

// knownIn reports whether every node in [lo, hi) has a known Capacity (see unknown).
func (c *capacity) knownIn(lo, hi int) bool {
	if c.unknown == nil || lo >= hi {
		return true
	}
	before := int32(0)
	if lo > 0 {
		before = c.unknown[lo-1]
	}
	return c.unknown[hi-1] == before
}

// sumCap bounds one node's share of a domain sum, so that a node without a pod limit
// (unlimited) or a nil Capacity cannot overflow the sum of thousands of nodes.
const sumCap = int64(1) << 44

// sumPart is one node's free amount as it counts in a domain sum.
func sumPart(v int64) int64 { return min(max(v, 0), sumCap) }

// nodeMask is one node set in a capacity table's node order, with a tree of the maxima of
// the table's free amounts over the set's nodes alone, kept as the table changes (add): a
// pod limited to the set finds its node down that tree, not by a walk of the set's nodes
// (jobs limited to one zone of full nodes: each walked the zone's nodes).
type nodeMask struct {
	// list is the indexes in, ascending; the tree's leaf size+k is node list[k], as c's
	// leaf c.size+i is node i (unused leaves are MinInt64).
	list []int32
	// in has bit i set when node i is in the set.
	in []uint64
	maxTree
}

// has reports whether node i is in the set.
func (m *nodeMask) has(i int) bool { return m.in[i>>6]&(1<<(i&63)) != 0 }

// maskLink is one node's place in one mask: leaf k of m. The links of a node form a list
// through next (-1 ends it), headed by capacity.maskHeads.
type maskLink struct {
	m    *nodeMask
	k    int32
	next int32
}

// maskOf returns a node set's mask in c's node order, worked out on first use.
func (c *capacity) maskOf(set *NodeSet) *nodeMask {
	if m, ok := c.sets[set]; ok {
		return m
	}
	m := &nodeMask{in: make([]uint64, (len(c.nodes)+63)/64)}
	if set.Len() < len(c.nodes) && c.uniqueNames() {
		// From the set's names: a cluster of many small node pools made a mask per pool,
		// each a look at every node (1000 pools of 5 nodes: 5M lookups a recompute).
		for name := range set.names {
			if i := c.nodeIndex(name); i >= 0 {
				m.list = append(m.list, int32(i))
			}
		}
		slices.Sort(m.list)
	} else {
		for i, name := range c.nodes {
			if set.Has(name) {
				m.list = append(m.list, int32(i))
			}
		}
	}
	if c.maskHeads == nil {
		c.maskHeads = make([]int32, len(c.nodes))
		for i := range c.maskHeads {
			c.maskHeads[i] = -1
		}
	}
	for k, i := range m.list {
		m.in[i>>6] |= 1 << (i & 63)
		c.maskLinks = append(c.maskLinks, maskLink{m: m, k: int32(k), next: c.maskHeads[i]})
		c.maskHeads[i] = int32(len(c.maskLinks) - 1)
	}
	r := c.r
	m.r, m.size = r, 1
	for m.size < len(m.list) {
		m.size *= 2
	}
	m.tree = make([]int64, 2*m.size*r)
	for k := range m.size {
		leaf := m.tree[(m.size+k)*r : (m.size+k+1)*r]
		if k < len(m.list) {
			copy(leaf, c.tree[(c.size+int(m.list[k]))*r:])
			continue
		}
		for d := range leaf {
			leaf[d] = math.MinInt64
		}
	}
	m.build()
	if c.sets == nil {
		c.sets = map[*NodeSet]*nodeMask{}
	}
	c.sets[set] = m
	return m
}

// follow copies node's free amounts of needs' resources from c's table into m's leaf k
// (node is list[k]), and the maxima above it.
func (m *nodeMask) follow(c *capacity, node, k int, needs []dimNeed) {
	v := m.size + k
	for _, n := range needs {
		m.tree[v*m.r+n.dim] = c.tree[(c.size+node)*c.r+n.dim]
	}
	m.raise(v, needs)
}

// findIn returns the first node in [from, to) of m's set that fits needs, or -1, down m's
// tree.
func (m *nodeMask) findIn(needs []dimNeed, from, to int) int {
	lo, _ := slices.BinarySearch(m.list, int32(from))
	hi, _ := slices.BinarySearch(m.list, int32(to))
	if k := m.findRange(1, 0, m.size, lo, hi, needs); k >= 0 {
		return int(m.list[k])
	}
	return -1
}

// usable reports whether a pod of demand d may use node n.
func (c *capacity) usable(n int, d demand) bool {
	return d.set == nil || c.maskOf(d.set).has(n)
}

// wantedBy counts, for each domain of each placement level, how many of the demands may
// use some node of it: a pod without a node set counts in every domain, one limited to a
// set in the domains the set reaches. Among domains that hold a gang alike, the gang takes
// the one the fewest other pods may use (candidates): nodes a taint or a selector keeps
// for a few jobs go to those jobs, not to one that could run anywhere.
func (c *capacity) wantedBy(demands []demand) {
	levels := c.lay.levels()
	if levels == 0 {
		return
	}
	c.wanted = make([][]int, levels)
	for l := 1; l <= levels; l++ {
		c.wanted[l-1] = make([]int, len(c.lay.span[l-1]))
	}
	everywhere := 0
	perSet := map[*NodeSet]int{}
	for _, d := range demands {
		if d.set == nil {
			everywhere++
		} else {
			perSet[d.set]++
		}
	}
	for l := 1; l <= levels; l++ {
		row := c.wanted[l-1]
		for d := range row {
			row[d] = everywhere
		}
		for set, n := range perSet {
			last := -1
			for _, at := range c.maskOf(set).list { // positions ascending: a domain's are adjacent
				if d := c.lay.domainOf(l, int(at)); d >= 0 && d != last {
					row[d] += n
					last = d
				}
			}
		}
	}
}

// uniqueNames reports whether no two nodes of the table share a name (by contract they
// do not; nodeIndex finds the first of a name when they do).
func (c *capacity) uniqueNames() bool {
	if c.dupNames == 0 {
		c.dupNames = -1
		if c.lay != nil {
			if len(c.lay.pos) != len(c.nodes) {
				c.dupNames = 1
			}
		} else {
			for i := 1; i < len(c.nodes); i++ { // in name order: equal names are adjacent
				if c.nodes[i] == c.nodes[i-1] {
					c.dupNames = 1
					break
				}
			}
		}
	}
	return c.dupNames < 0
}

// nodeIndex finds a node by name (-1 when absent).
func (c *capacity) nodeIndex(name string) int {
	if c.lay != nil { // the table is in the layout's order
		if p, ok := c.lay.pos[name]; ok {
			return int(p)
		}
		return -1
	}
	if c.byName == nil {
		c.byName = make(map[string]int, len(c.nodes))
		for i, n := range c.nodes {
			if _, dup := c.byName[n]; !dup {
				c.byName[n] = i
			}
		}
	}
	if i, ok := c.byName[name]; ok {
		return i
	}
	return -1
}

// leftover copies what is left of each node, its dimensions in c.names order, the nodes in
// the order of the Nodes the table was built from.
func (c *capacity) leftover() []int64 {
	out := make([]int64, len(c.order)*c.r)
	for i, k := range c.order {
		copy(out[int(k)*c.r:(int(k)+1)*c.r], c.tree[(c.size+i)*c.r:(c.size+i+1)*c.r])
	}
	return out
}

// maxTree is a tree of per-resource maxima over rows of r amounts: leaf size+k holds row
// k, each inner node the maxima of its two children (slot 0 is unused). The capacity table
// is one over the nodes, and each node set keeps one over its own nodes (nodeMask).
type maxTree struct {
	r    int     // amounts per row: resources per node
	size int     // leaves: a power of two >= the rows
	tree []int64 // (2*size) * r values
}

// covers reports whether tree node v has, for every need, some row below it with enough.
// On a leaf that is exactly "the pod fits on this node".
func (t *maxTree) covers(v int, needs []dimNeed) bool {
	base := v * t.r
	for _, n := range needs {
		if t.tree[base+n.dim] < n.amount {
			return false
		}
	}
	return true
}

// findRange is the first row in [from, to) under tree node v (rows [lo, hi)) that covers
// needs, or -1.
func (t *maxTree) findRange(v, lo, hi, from, to int, needs []dimNeed) int {
	if hi <= from || lo >= to || !t.covers(v, needs) {
		return -1
	}
	if hi-lo == 1 {
		return lo
	}
	mid := (lo + hi) / 2
	if at := t.findRange(2*v, lo, mid, from, to, needs); at >= 0 {
		return at
	}
	return t.findRange(2*v+1, mid, hi, from, to, needs)
}

// build sets every inner node's maxima from the leaves.
func (t *maxTree) build() {
	r := t.r
	for v := t.size - 1; v >= 1; v-- {
		for d := range r {
			t.tree[v*r+d] = max(t.tree[2*v*r+d], t.tree[(2*v+1)*r+d])
		}
	}
}

// raise sets the maxima above leaf v of needs' resources, after the leaf changed: it walks
// up while some maximum changes; above that point nothing can change.
func (t *maxTree) raise(v int, needs []dimNeed) {
	r := t.r
	for v /= 2; v >= 1; v /= 2 {
		changed := false
		for _, n := range needs {
			if m := max(t.tree[2*v*r+n.dim], t.tree[(2*v+1)*r+n.dim]); t.tree[v*r+n.dim] != m {
				t.tree[v*r+n.dim] = m
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

func (c *capacity) fits(node int, needs []dimNeed) bool {
	return c.covers(c.size+node, needs)
}

// firstFit returns the first node that fits d, or -1, and moves d's cursor there.
func (c *capacity) firstFit(d demand) int {
	at := c.firstFitFrom(d, c.cursor[d.shape])
	c.moveCursor(d.shape, at)
	return at
}

// moveCursor sets a shape's cursor to at, the first node at or after it that fits the
// shape (-1: none does).
func (c *capacity) moveCursor(shape, at int) {
	from := c.cursor[shape]
	to := at
	if at < 0 {
		to = len(c.nodes)
	}
	if to != from {
		if c.trial {
			c.undoCursor = append(c.undoCursor, [2]int{shape, from})
		}
		c.cursor[shape] = to
	}
}

// firstFitFrom returns the first node at or after from that d may use and that fits it,
// or -1. A pod limited to some nodes walks their list from the shape's cursor: each node
// it passes is one the cursor will not look at again.
func (c *capacity) firstFitFrom(d demand, from int) int {
	from = max(from, 0)
	if from >= len(c.nodes) {
		return -1
	}
	needs := d.needs
	if d.set != nil {
		return c.maskOf(d.set).findIn(needs, from, len(c.nodes))
	}
	// Nodes fill front to back, so the node a shape's cursor points at usually still fits.
	if c.fits(from, needs) {
		return from
	}
	return c.findRange(1, 0, c.size, from, len(c.nodes), needs)
}

// room is a node position and how many copies of a demand its free capacity holds.
type room struct {
	at     int
	copies int64
}

// appendRooms appends to buf, in position order, each node in [lo, hi) that d may use and
// that holds at least one copy of it, with how many. The nodes are found down the tree of
// maxima: a subtree whose maxima hold no copy is passed over whole.
func (c *capacity) appendRooms(buf []room, d demand, lo, hi int) []room {
	hi = min(hi, len(c.nodes))
	if d.set != nil {
		m := c.maskOf(d.set)
		for at := m.findIn(d.needs, lo, hi); at >= 0; at = m.findIn(d.needs, at+1, hi) {
			buf = append(buf, room{at, c.copies(at, d.needs)})
		}
		return buf
	}
	return c.appendRoomsIn(buf, 1, 0, c.size, lo, hi, d.needs)
}

func (c *capacity) appendRoomsIn(buf []room, v, vlo, vhi, lo, hi int, needs []dimNeed) []room {
	if vhi <= lo || vlo >= hi || !c.covers(v, needs) {
		return buf
	}
	if vhi-vlo <= roomsScan { // a few nodes: each looked at costs less than the tree
		for at := max(vlo, lo); at < min(vhi, hi); at++ {
			if n := c.copies(at, needs); n > 0 {
				buf = append(buf, room{at, n})
			}
		}
		return buf
	}
	mid := (vlo + vhi) / 2
	buf = c.appendRoomsIn(buf, 2*v, vlo, mid, lo, hi, needs)
	return c.appendRoomsIn(buf, 2*v+1, mid, vhi, lo, hi, needs)
}

// roomsScan is the size of a subtree appendRooms looks at node by node.
const roomsScan = 32

// copies is how many copies of needs node's free capacity holds (each need's amount is
// positive: every demand needs a pod slot).
func (c *capacity) copies(node int, needs []dimNeed) int64 {
	base := (c.size + node) * c.r
	n := int64(math.MaxInt64)
	for _, need := range needs {
		n = min(n, max(c.tree[base+need.dim], 0)/need.amount)
	}
	return n
}

// take subtracts needs from a node that fits them and updates the maxima above it.
func (c *capacity) take(node int, needs []dimNeed) {
	c.add(node, needs, -1)
	if c.trial {
		c.undo = append(c.undo, taken{node: node, needs: needs})
	}
}

// totalShape is the cursor number of a gang's total need, numbered on first sight.
func (c *capacity) totalShape(needs []dimNeed) int {
	c.key = c.key[:0]
	for _, n := range needs {
		c.key = binary.AppendUvarint(c.key, uint64(n.dim))
		c.key = binary.AppendVarint(c.key, n.amount)
	}
	if s, ok := c.totals[string(c.key)]; ok {
		return s
	}
	if c.totals == nil {
		c.totals = map[string]int{}
	}
	s := len(c.cursor)
	c.totals[string(c.key)] = s
	c.cursor = append(c.cursor, 0)
	return s
}

// give adds needs back to a node (room a preemption's victims would leave, or held binds
// given back), logged like take so that a trial takes it back out on rollback. A shape whose
// cursor is past the node may fit there now: its cursor moves back to it.
func (c *capacity) give(node int, needs []dimNeed) {
	c.add(node, needs, +1)
	if c.trial {
		c.undo = append(c.undo, taken{node: node, needs: needs, given: true})
	}
	for shape, at := range c.cursor {
		if at > node {
			if c.trial {
				c.undoCursor = append(c.undoCursor, [2]int{shape, at})
			}
			c.cursor[shape] = node
		}
	}
}

// undoOne reverses one logged take or give.
func (c *capacity) undoOne(t taken) {
	if t.given {
		c.add(t.node, t.needs, -1)
		return
	}
	c.add(t.node, t.needs, +1)
}

// takeCopy is take of needs that the caller goes on to reuse: the undo log keeps a copy.
func (c *capacity) takeCopy(node int, needs []dimNeed) {
	start := len(c.arena)
	c.arena = append(c.arena, needs...)
	c.take(node, c.arena[start:len(c.arena):len(c.arena)])
}

func (c *capacity) add(node int, needs []dimNeed, sign int64) {
	if !c.trial {
		c.version++
	}
	r := c.r
	v := c.size + node
	for _, n := range needs {
		old := c.tree[v*r+n.dim]
		c.tree[v*r+n.dim] += sign * n.amount
		if c.sums != nil {
			delta := sumPart(c.tree[v*r+n.dim]) - sumPart(old)
			for l, sums := range c.sums {
				sums[int(c.lay.dom[l][node])*r+n.dim] += delta
			}
		}
	}
	c.raise(v, needs)
	if c.maskHeads != nil {
		for e := c.maskHeads[node]; e >= 0; e = c.maskLinks[e].next {
			l := &c.maskLinks[e]
			l.m.follow(c, node, int(l.k), needs)
		}
	}
}

// taken appends to buf a copy of what the open trial has taken and given so far.
func (c *capacity) taken(buf []taken) []taken {
	for _, t := range c.undo {
		t.needs = slices.Clone(t.needs)
		buf = append(buf, t)
	}
	return buf
}

// begin opens a trial; commit keeps what it took, rollback gives it all back.
func (c *capacity) begin() { c.trial = true }

// mark is a point in an open trial that rollbackTo returns to.
type mark struct{ undo, cursor int }

func (c *capacity) mark() mark { return mark{len(c.undo), len(c.undoCursor)} }

// rollbackTo gives back what the open trial took since m, and keeps the trial open.
func (c *capacity) rollbackTo(m mark) {
	for i := len(c.undo) - 1; i >= m.undo; i-- {
		c.undoOne(c.undo[i])
	}
	for i := len(c.undoCursor) - 1; i >= m.cursor; i-- {
		c.cursor[c.undoCursor[i][0]] = c.undoCursor[i][1]
	}
	c.undo, c.undoCursor = c.undo[:m.undo], c.undoCursor[:m.cursor]
}

// findIn returns the first node in [from, to) that fits needs, or -1, by the max-tree.
func (c *capacity) findIn(needs []dimNeed, from, to int) int {
	to = min(to, len(c.nodes))
	if from >= to {
		return -1
	}
	if c.fits(from, needs) {
		return from
	}
	return c.findRange(1, 0, c.size, from, to, needs)
}

func (c *capacity) commit() {
	if len(c.undo) > 0 {
		c.version++
	}
	c.trial = false
	c.undo, c.undoCursor, c.arena = c.undo[:0], c.undoCursor[:0], c.arena[:0]
}

func (c *capacity) rollback() {
	for i := len(c.undo) - 1; i >= 0; i-- {
		c.undoOne(c.undo[i])
	}
	for i := len(c.undoCursor) - 1; i >= 0; i-- {
		c.cursor[c.undoCursor[i][0]] = c.undoCursor[i][1]
	}
	c.undo = c.undo[:0] // the amounts are those of the trial's start: the version stays
	c.commit()
}

// placeOne places one pod by the rules of Fit and returns its node, or -1 when it fits
// nowhere. ps is the sorted set of nodes hosting this job's PS; a placed PS joins it. With
// apart a PS never shares a node with another (hard PS anti-affinity).
func (c *capacity) placeOne(role Role, d demand, ps *[]int, apart bool) int {
	at := -1
	switch role {
	case RolePS:
		first := c.firstFit(d)
		at = first
		// Spread: skip nodes that already host a PS of this job, unless only they fit.
		for at >= 0 && containsSorted(*ps, at) {
			at = c.firstFitFrom(d, at+1)
		}
		if at < 0 && !apart {
			at = first
		}
	case RoleWorker:
		for _, n := range *ps {
			if c.usable(n, d) && c.fits(n, d.needs) {
				at = n
				break
			}
		}
		if at < 0 {
			at = c.firstFit(d)
		}
	default:
		at = c.firstFit(d)
	}
	if at < 0 {
		return -1
	}
	c.take(at, d.needs)
	if role == RolePS {
		*ps = insertSorted(*ps, at)
	}
	return at
}

func containsSorted(s []int, v int) bool {
	_, ok := slices.BinarySearch(s, v)
	return ok
}

func insertSorted(s []int, v int) []int {
	i, ok := slices.BinarySearch(s, v)
	if ok {
		return s
	}
	return slices.Insert(s, i, v)
}

// shortage explains why a pod fits on no node it may use: the first resource no such node
// has enough of with the most any has free, or, when each resource alone is somewhere,
// that no single node has them all.
func (c *capacity) shortage(who string, d demand) string {
	needs := d.needs
	if len(c.nodes) == 0 {
		return who + " cannot be placed: there are no nodes"
	}
	most := c.tree[c.r : 2*c.r] // the root: the most free on any node, per resource
	nodes := "any node"
	if d.set != nil {
		m := c.maskOf(d.set)
		if len(m.list) == 0 {
			return who + " cannot be placed: it may use none of the nodes (it may use " + d.set.Why + ")"
		}
		nodes = d.set.Why
		most = m.tree[c.r : 2*c.r] // the root of the set's tree
	}
	for _, n := range needs {
		if m := most[n.dim]; m < n.amount {
			return who + c.shortText(n, max(m, 0), nodes)
		}
	}
	if d.set != nil {
		return c.needs(who, needs) + " on one node; none of " + nodes + " has all of it free"
	}
	return c.needs(who, needs) + " on one node; no node has all of it free"
}

// shortText is shortage's text after the pod's name, when a node short of n has at most
// most free: the same for the many pods of a backlog that ask alike, so it is kept.
func (c *capacity) shortText(n dimNeed, most int64, nodes string) string {
	key := binary.AppendUvarint(c.textKey[:0], uint64(n.dim))
	key = binary.AppendVarint(key, n.amount)
	key = binary.AppendVarint(key, most)
	key = append(key, nodes...)
	c.textKey = key
	if text, ok := c.shortTexts[string(key)]; ok {
		return text
	}
	name := c.names[n.dim]
	text := " needs " + amount(name, n.amount) + " on a node; the most free on " + nodes + " is " + formatQuantity(name, most)
	if c.shortTexts == nil {
		c.shortTexts = map[string]string{}
	}
	c.shortTexts[string(key)] = text
	return text
}

// anyUsable reports whether some node d may use could hold d by itself (on c as it is).
func (c *capacity) anyUsable(d demand) bool {
	if d.set == nil {
		return c.covers(1, d.needs)
	}
	return c.maskOf(d.set).findIn(d.needs, 0, len(c.nodes)) >= 0
}

// needs says what a pod asks of one node, every resource: "worker ns/a-w-0 needs cpu
// 4000m, memory 8Gi".
func (c *capacity) needs(who string, needs []dimNeed) string {
	// The pod slot is left out unless it is all the pod needs: every pod takes one, and
	// naming it in "cpu, memory, pods" would only blur which resources clash.
	if len(needs) > 1 {
		needs = needs[:len(needs)-1]
	}
	return who + " needs " + c.amounts(needs)
}

// total says what pods ask for in all: "3 pods need cpu 4500m, memory 3Gi in all", and
// the nodes they may use when that is not every node. It does not depend on what is free,
// so it reads the same while the cluster changes around a waiting job.
func (c *capacity) total(pods []demand) string {
	var set *NodeSet // the first pod's that has one
	for _, p := range pods {
		if p.set != nil {
			set = p.set
			break
		}
	}
	sum := grown(c.totalSum, len(c.names))
	c.totalSum = sum
	clear(sum)
	for _, p := range pods {
		for _, n := range p.needs {
			sum[n.dim] += n.amount
		}
	}
	key := binary.AppendUvarint(c.textKey[:0], uint64(len(pods)))
	if set == nil {
		key = append(key, 0)
	} else {
		key = append(append(append(key, 1), set.Why...), 0)
	}
	for _, v := range sum {
		key = binary.AppendVarint(key, v)
	}
	c.textKey = key
	if text, ok := c.totalTexts[string(key)]; ok {
		return text
	}
	on := ""
	if set != nil {
		on = ", on " + set.Why
	}
	text := c.totalText(len(pods), sum, on)
	if c.totalTexts == nil {
		c.totalTexts = map[string]string{}
	}
	c.totalTexts[string(key)] = text
	return text
}

// totalText is total's text for n pods asking sum in all; on names the nodes they may use
// (", on ...") when that is not every node.
func (c *capacity) totalText(n int, sum []int64, on string) string {
	var needs []dimNeed
	for d, v := range sum[:len(sum)-1] { // every pod takes a slot: the count says it
		if v > 0 {
			needs = append(needs, dimNeed{d, v})
		}
	}
	if n == 1 {
		return "its pod needs " + c.amounts(needs) + on
	}
	return "its " + strconv.Itoa(n) + " pods need " + c.amounts(needs) + " in all" + on
}

// amounts writes resource amounts as users read them: "cpu 4000m, memory 8Gi".
func (c *capacity) amounts(needs []dimNeed) string {
	var b strings.Builder
	for i, n := range needs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(amount(c.names[n.dim], n.amount))
	}
	return b.String()
}

// DeviceClassPrefix starts the resource name a DRA DeviceClass's devices are counted under
// (extender/devices): kube-scheduler's implicit extended resource of the class.
const DeviceClassPrefix = "deviceclass.resource.kubernetes.io/"

// DeviceSelectedSep parts a class's name from the hash of a request's own selectors in the
// name of the devices of the class those selectors accept (extender/devices).
const DeviceSelectedSep = "/selected-"

// amount says an amount of a resource: "cpu 4000m", or of a device class "8
// gpu.example.com devices" ("1 gpu.example.com device"; "... devices its requests'
// selectors accept" for those a request's own selectors pick).
func amount(name string, v int64) string {
	if class, ok := strings.CutPrefix(name, DeviceClassPrefix); ok {
		class, selected, _ := strings.Cut(class, DeviceSelectedSep)
		out := strconv.FormatInt(v, 10) + " " + class + " device"
		if v != 1 {
			out += "s"
		}
		if selected != "" {
			out += " its requests' selectors accept"
		}
		return out
	}
	return name + " " + formatQuantity(name, v)
}

// podLabel names a pod in messages: its role and namespace/name (the namespace is taken
// from the job key; the UID stands in for a missing name).
func podLabel(p *Pod, namespace string) string {
	role := "pod"
	if p.Role != RoleOther {
		role = p.Role.String()
	}
	name := p.Name
	if name == "" {
		name = p.UID
	}
	if namespace != "" && !strings.Contains(name, "/") {
		name = namespace + "/" + name
	}
	return role + " " + name
}

// formatQuantity writes an amount the way Kubernetes users read it: cpu in millicores,
// byte resources with the largest exact binary suffix, everything else as a plain count.
func formatQuantity(resource string, v int64) string {
	switch {
	case resource == "cpu":
		return strconv.FormatInt(v, 10) + "m"
	case resource == "memory" || resource == "ephemeral-storage" || strings.HasPrefix(resource, "hugepages-"):
		for _, u := range []struct {
			suffix string
			shift  uint
		}{{"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
			if v != 0 && v%(1<<u.shift) == 0 {
				return strconv.FormatInt(v>>u.shift, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(v, 10)
}
