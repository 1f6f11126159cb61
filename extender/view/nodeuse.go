package view

import (
	"maps"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/priority"
)

// nodeUse is what the pods bound to one node take, kept event by event so that a recompute
// does not walk every pod record: all of them take from the node's free capacity, the ones
// that stay (not counted in a job, not being deleted) from its Capacity (see freeCapacity).
type nodeUse struct {
	taken, staying         useSums
	takenPods, stayingPods int64
}

// useSums is a sum of pod requests by resource name, with how many pods named each
// resource: a name stays in the free capacity while a pod asks for it, as it would in a
// pass over the pods, even at zero.
type useSums map[string]useSum

type useSum struct {
	sum  int64
	pods int64
}

// add adds request, times sign (1 or -1), to s (allocated on first use) and returns it.
func (s useSums) add(request priority.Resources, sign int64) useSums {
	if s == nil {
		s = useSums{}
	}
	for name, v := range request {
		u := s[name]
		u.sum += sign * v
		u.pods += sign
		if u.pods == 0 {
			delete(s, name)
		} else {
			s[name] = u
		}
	}
	return s
}

// from returns allocatable less the sums and pods pod slots, in a map of its own. The
// slots are taken only from a node that lists "pods" (a pod request never does).
func (s useSums) from(allocatable priority.Resources, pods int64) priority.Resources {
	out := maps.Clone(allocatable)
	if out == nil {
		out = priority.Resources{}
	}
	for name, u := range s {
		out[name] -= u.sum
	}
	if _, ok := out["pods"]; ok {
		out["pods"] -= pods
	}
	return out
}

// track adds (sign 1) or takes out (sign -1) what r takes on the node it is bound to.
// x.mu is held.
func (x *viewIndex) track(r *podRecord, sign int64) {
	if r == nil {
		return
	}
	if r.deleting || r.turnGated {
		if sign > 0 {
			x.special[r.uid] = r
		} else if x.special[r.uid] == r {
			delete(x.special, r.uid)
		}
	}
	if r.rules != nil {
		x.withRules += int(sign)
	}
	if r.terminated || r.node == "" {
		return
	}
	u := x.used[r.node]
	if u == nil {
		u = &nodeUse{}
		x.used[r.node] = u
	}
	u.takenPods += sign
	u.taken = u.taken.add(r.request, sign)
	if !r.counted && !r.deleting {
		u.stayingPods += sign
		u.staying = u.staying.add(r.request, sign)
	}
	if u.takenPods == 0 {
		delete(x.used, r.node)
	}
}

// boundUse is the schedulable nodes' free capacity and Capacity less what the pods bound
// to them take (x.used), and whether each map is the node's own (not its allocatable's).
// x.mu is held.
func (x *viewIndex) boundUse() (nodes []priority.Node, ownFree, ownCapacity []bool) {
	nodes = make([]priority.Node, len(x.schedulable))
	ownFree, ownCapacity = make([]bool, len(nodes)), make([]bool, len(nodes))
	for i, n := range x.schedulable {
		nodes[i] = priority.Node{Name: x.schedNames[i], Free: n.allocatable, Capacity: n.allocatable, Labels: n.labels}
		u := x.used[n.name]
		if u == nil {
			continue
		}
		nodes[i].Free, ownFree[i] = u.taken.from(n.allocatable, u.takenPods), true
		if u.stayingPods > 0 {
			nodes[i].Capacity, ownCapacity[i] = u.staying.from(n.allocatable, u.stayingPods), true
		}
	}
	return nodes, ownFree, ownCapacity
}

// heldRecords is the records of the pending pods that held has a bind for. x.mu is held.
func (x *viewIndex) heldRecords(held map[types.UID]string) []*podRecord {
	var out []*podRecord
	for uid := range held {
		if r := x.pods[uid]; r != nil && r.node == "" && !r.terminated {
			out = append(out, r)
		}
	}
	return out
}
