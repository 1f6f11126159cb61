package priority

import (
	"slices"
	"strings"
)

// layout is a NodeIndex's nodes in placement order: sorted by their topology label values,
// the widest level first, then by name, so that every domain of every level is one run of
// positions. The capacity table is built in this order; a domain is then a range of the
// table, and first fit inside a domain is a bounded search of the max-tree.
//
// Domains nest by construction: a domain at level l is the nodes that share the values of
// levels l..L-1 (a rack is the nodes of one rack name in one zone). A node without a value
// at level l is a domain of its own there: it shares that level with no other node, as the
// affinity scores read it.
type layout struct {
	names []string // node names, by input index
	order []int32  // input index of the node at each position
	at    []int32  // position of each input index
	// pos is each node's position by name, so that a capacity table built in this order
	// looks nodes up without a map of its own each time.
	pos map[string]int32
	// dom[l][p] is the domain number of position p at topology level l (0: the nearest
	// level listed, e.g. rack); span[l][d] is domain d's [start, end) positions.
	dom  [][]int32
	span [][][2]int32
	// value[l][d] is the label value that names domain d at level l ("" for a node without
	// one, which is a domain of its own).
	value [][]string
	keys  []string // the level keys, nearest first
	// single[d] is a one-element list naming domain d of the nearest level: its value, or
	// the node's name for a node without one. Placements of one domain share it.
	single [][]string
}

// newLayout orders nodes (with labels as labelsOf reads them) over the topology levels.
func newLayout(nodes []Node, topology []string, labelsOf func(node string) map[string]string) *layout {
	levels := len(topology)
	n := len(nodes)
	lay := &layout{names: make([]string, n), order: make([]int32, n), at: make([]int32, n), keys: slices.Clone(topology)}
	values := make([]string, n*levels) // node i's value at level l: values[i*levels+l]
	for i := range nodes {
		lay.names[i] = nodes[i].Name
		lay.order[i] = int32(i)
		labels := nodes[i].Labels
		if labels == nil && labelsOf != nil {
			labels = labelsOf(nodes[i].Name)
		}
		for l, key := range topology {
			values[i*levels+l] = labels[key]
		}
	}
	slices.SortFunc(lay.order, func(a, b int32) int {
		for l := levels - 1; l >= 0; l-- {
			va, vb := values[int(a)*levels+l], values[int(b)*levels+l]
			if va == vb {
				continue
			}
			// Nodes without a value go after those with one.
			if va == "" {
				return 1
			}
			if vb == "" {
				return -1
			}
			return strings.Compare(va, vb)
		}
		return strings.Compare(lay.names[a], lay.names[b])
	})
	lay.pos = make(map[string]int32, n)
	for p, i := range lay.order {
		lay.at[i] = int32(p)
		if _, dup := lay.pos[lay.names[i]]; !dup {
			lay.pos[lay.names[i]] = int32(p)
		}
	}
	lay.dom = make([][]int32, levels)
	lay.span = make([][][2]int32, levels)
	lay.value = make([][]string, levels)
	for l := range levels {
		dom := make([]int32, n)
		d := int32(-1)
		for p, i := range lay.order {
			if p == 0 || !sameDomain(values, levels, l, int(lay.order[p-1]), int(i)) {
				d++
				lay.span[l] = append(lay.span[l], [2]int32{int32(p), int32(p)})
				lay.value[l] = append(lay.value[l], values[int(i)*levels+l])
			}
			dom[p] = d
			lay.span[l][d][1] = int32(p + 1)
		}
		lay.dom[l] = dom
	}
	if levels > 0 {
		lay.single = make([][]string, len(lay.span[0]))
		for d, sp := range lay.span[0] {
			name := lay.value[0][d]
			if name == "" {
				name = lay.names[lay.order[sp[0]]]
			}
			lay.single[d] = []string{name}
		}
	}
	return lay
}

// sameDomain reports whether nodes a and b are in one domain at level l: both have a value
// there, and they agree on it and on every wider level.
func sameDomain(values []string, levels, l, a, b int) bool {
	if values[a*levels+l] == "" {
		return false
	}
	for k := l; k < levels; k++ {
		if values[a*levels+k] != values[b*levels+k] {
			return false
		}
	}
	return true
}

// levels is the number of topology levels (without the node and the cluster).
func (lay *layout) levels() int {
	if lay == nil {
		return 0
	}
	return len(lay.keys)
}

// matches reports whether the layout was built for exactly these nodes, in this order.
func (lay *layout) matches(nodes []Node) bool {
	if lay == nil || len(lay.names) != len(nodes) {
		return false
	}
	for i := range nodes {
		if nodes[i].Name != lay.names[i] {
			return false
		}
	}
	return true
}

// domainOf is the domain number of table position p at placement level l (1..L: the
// topology levels; the node level 0 and the cluster level L+1 have no numbers).
func (lay *layout) domainOf(l, p int) int { return int(lay.dom[l-1][p]) }

// spanOf is the [start, end) positions of domain d at placement level l.
func (lay *layout) spanOf(l, d int) (int, int) {
	s := lay.span[l-1][d]
	return int(s[0]), int(s[1])
}

// levelName names placement level l: "node", a label key, or "cluster".
func (lay *layout) levelName(l int) string {
	switch {
	case l <= 0:
		return "node"
	case l > lay.levels():
		return "cluster"
	}
	return lay.keys[l-1]
}
