package priority

import "slices"

// NodeIndex numbers the topology label values of a fixed list of nodes. Prioritize scores
// thousands of candidates a call; with the index, a candidate's closeness to the placed
// pods compares small integers from one array instead of looking its labels up in a map
// spread over the heap. Build it once per node list; it is read-only after.
type NodeIndex struct {
	topology []string
	values   []map[string]int32 // per level: label value -> its number
	ids      []int32            // node i's value number at level l is ids[i*levels+l]; -1: none
	// lay is the nodes in placement order with their domains, for Admit's topology-aware
	// placement (State.Topology).
	lay *layout
}

// NewNodeIndex indexes nodes over the topology levels. A node's labels are its Labels, or
// labelsOf(name) when those are nil, as Score reads them.
func NewNodeIndex(nodes []Node, topology []string, labelsOf func(node string) map[string]string) *NodeIndex {
	levels := len(topology)
	x := &NodeIndex{topology: slices.Clone(topology), values: make([]map[string]int32, levels), ids: make([]int32, len(nodes)*levels)}
	for l := range x.values {
		x.values[l] = map[string]int32{}
	}
	for i := range nodes {
		labels := nodes[i].Labels
		if labels == nil && labelsOf != nil {
			labels = labelsOf(nodes[i].Name)
		}
		for l, key := range topology {
			x.ids[i*levels+l] = x.number(l, labels[key], true)
		}
	}
	x.lay = newLayout(nodes, topology, labelsOf)
	return x
}

// Topology returns the label keys the index was built for.
func (x *NodeIndex) Topology() []string { return x.topology }

// Levels says, for each of the index's label keys, how many of its nodes carry it and how
// many domains they make. A key on no node takes no part in the placement: it is placed
// as if it were not configured.
func (x *NodeIndex) Levels() []TopologyLevel {
	if x == nil || x.lay == nil {
		return nil
	}
	return slices.Clone(x.lay.carried)
}

// number is value's number at level l, or -1 for no value; with add a new value is
// numbered, without it an unknown value is -1 too.
func (x *NodeIndex) number(l int, value string, add bool) int32 {
	if value == "" {
		return -1
	}
	if n, ok := x.values[l][value]; ok {
		return n
	}
	if !add {
		return -1
	}
	n := int32(len(x.values[l]))
	x.values[l][value] = n
	return n
}

// placementIndex is a podPlacement in a NodeIndex's numbers: the placed pods per level
// value, and each placed node's value numbers. A value no indexed node has is -1: no
// candidate shares it.
type placementIndex struct {
	x      *NodeIndex
	levels [][]int32 // per level: placed pods by value number
	here   [][]int32 // per placed node (as in podPlacement.counts): its value numbers
}

// indexOn numbers pl's placed pods in x.
func (pl *podPlacement) indexOn(x *NodeIndex) *placementIndex {
	at := &placementIndex{x: x, levels: make([][]int32, len(pl.topology)), here: make([][]int32, len(pl.counts))}
	for l := range at.levels {
		at.levels[l] = make([]int32, len(x.values[l]))
	}
	for k := range pl.counts {
		pn := &pl.counts[k]
		at.here[k] = make([]int32, len(pl.topology))
		for l, v := range pn.values {
			n := x.number(l, v, false)
			at.here[k][l] = n
			if n >= 0 {
				at.levels[l][n] += int32(pn.count)
			}
		}
	}
	return at
}

// closenessAt is closeness (without the per-level counts) for candidate n, node i of the
// index.
func (pl *podPlacement) closenessAt(at *placementIndex, i int, n *Node) (int, float64) {
	onNode := 0
	var here []int32
	if k := pl.nodes.find(n.Name); k >= 0 {
		onNode, here = pl.counts[k].count, at.here[k]
	}
	levels := len(pl.topology)
	if levels == 0 {
		return onNode, 0
	}
	ids := at.x.ids[i*levels : i*levels+levels]
	var shared float64
	w := closenessLevel0
	for l, id := range ids {
		next := w * closenessDecay
		if l == levels-1 {
			next = 0
		}
		count := 0
		if id >= 0 {
			count = int(at.levels[l][id])
			if here != nil && here[l] == id {
				count -= onNode // pods on n itself count as same node, not as same domain
			}
		}
		shared += (w - next) * float64(count)
		w = next
	}
	return onNode, shared
}
