package priority

import (
	"slices"
	"strconv"
	"strings"
)

// layout is a NodeIndex's nodes in placement order: sorted by their topology label values,
// the widest level first, then by name, so that every domain of every level is one run of
// positions. The capacity table is built in this order; a domain is then a range of the
// table, and first fit inside a domain is a bounded search of the max-tree.
//
// Domains nest by construction: a domain at level l is the nodes that share the values of
// levels l..L-1 (a rack is the nodes of one rack name in one zone). A node without a value
// at level l has no domain there: it sits in a run of its own so that the runs stay
// nested, but it is never a domain a job may be placed in, reserve in or wait for
// (labelled), and it shares that level with no other node, as the affinity scores read it.
// A level that no node carries is left out altogether: the placement is as if it were not
// configured.
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
	keys  []string // the level keys some node carries, nearest first
	// carried is every configured level key, nearest first, with how many nodes carry it
	// and how many domains they make (zero for a key on no node, which keys leaves out).
	carried []TopologyLevel
	// single[d] is a one-element list naming domain d of the nearest level: its value, or
	// the node's name for a node without one. Placements of one domain share it.
	single [][]string
}

// TopologyLevel is a configured topology level (affinity.topology) as the cluster's nodes
// carry it: its label key, how many of the nodes have the label, and how many domains of
// the level they make. A level on no node is left out of the placement.
type TopologyLevel struct {
	Key     string `json:"key"`
	Nodes   int    `json:"nodes"`
	Domains int    `json:"domains"`
}

// String says it for people: "example.com/rack on 32 nodes in 8 domains",
// "topology.kubernetes.io/zone on no node (left out of the placement)".
func (l TopologyLevel) String() string {
	if l.Nodes == 0 {
		return l.Key + " on no node (left out of the placement)"
	}
	return l.Key + " on " + strconv.Itoa(l.Nodes) + plural(l.Nodes, " node", " nodes") + " in " + strconv.Itoa(l.Domains) + plural(l.Domains, " domain", " domains")
}

// newLayout orders nodes (with labels as labelsOf reads them) over the topology levels.
func newLayout(nodes []Node, topology []string, labelsOf func(node string) map[string]string) *layout {
	n := len(nodes)
	lay := &layout{names: make([]string, n), order: make([]int32, n), at: make([]int32, n), carried: make([]TopologyLevel, len(topology))}
	all := make([]string, n*len(topology)) // node i's value of key k: all[i*len(topology)+k]
	for i := range nodes {
		lay.names[i] = nodes[i].Name
		lay.order[i] = int32(i)
		labels := nodes[i].Labels
		if labels == nil && labelsOf != nil {
			labels = labelsOf(nodes[i].Name)
		}
		for k, key := range topology {
			all[i*len(topology)+k] = labels[key]
		}
	}
	// The levels some node carries; a key on no node is no level of the placement.
	var kept []int
	for k, key := range topology {
		lay.carried[k].Key = key
		for i := range n {
			if all[i*len(topology)+k] != "" {
				lay.carried[k].Nodes++
			}
		}
		if lay.carried[k].Nodes > 0 {
			kept = append(kept, k)
			lay.keys = append(lay.keys, key)
		}
	}
	levels := len(kept)
	values := all // node i's value at level l: values[i*levels+l]
	if levels < len(topology) {
		values = make([]string, n*levels)
		for i := range n {
			for l, k := range kept {
				values[i*levels+l] = all[i*len(topology)+k]
			}
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
		for _, v := range lay.value[l] {
			if v != "" {
				lay.carried[kept[l]].Domains++
			}
		}
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

// labelled reports whether domain d of placement level l (1..L) is one: its nodes carry
// the level's label. A node without it is a run of its own there, but no domain.
func (lay *layout) labelled(l, d int) bool { return lay.value[l-1][d] != "" }

// hasDomain reports whether table position p has a domain at placement level l: always at
// the node and the cluster level, and at a topology level when the node carries its label.
func (lay *layout) hasDomain(l, p int) bool {
	if l <= nodeLevel || l > lay.levels() {
		return true
	}
	return lay.labelled(l, lay.domainOf(l, p))
}

// configured reports whether key is a configured level, carried by a node or not.
func (lay *layout) configured(key string) bool {
	if lay == nil {
		return false
	}
	for _, c := range lay.carried {
		if c.Key == key {
			return true
		}
	}
	return false
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
