package priority

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestCapacityTrials drives the capacity table through random trials that are committed or
// rolled back, as Admit does, and checks it against a plain matrix after every step: the
// free values, the maxima of the tree, every shape's cursor, and first fit against a scan.
func TestCapacityTrials(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for round := range 40 {
		var nodes []Node
		for range 1 + r.IntN(60) {
			free := Resources{"cpu": int64(r.IntN(9)) * 1000, "memory": int64(r.IntN(9))}
			if r.IntN(2) == 0 {
				free["pods"] = int64(r.IntN(6))
			}
			if r.IntN(3) == 0 {
				free["gpu"] = int64(r.IntN(3))
			}
			nodes = append(nodes, Node{Name: "n" + strconv.Itoa(1000+r.IntN(9000)), Free: free})
		}
		// Node sets: a pod limited to one looks for its node down the set's own tree.
		var sets []*NodeSet
		for k := range 3 {
			var names []string
			for _, n := range nodes {
				if r.IntN(3) == 0 {
					names = append(names, n.Name)
				}
			}
			sets = append(sets, NewNodeSet("set "+strconv.Itoa(k), names))
		}
		var pods []*Pod
		for i := range 30 {
			req := Resources{"cpu": int64(r.IntN(4)) * 1000, "memory": int64(r.IntN(4))}
			if r.IntN(4) == 0 {
				req["gpu"] = 1
			}
			pod := &Pod{UID: strconv.Itoa(i), Request: req}
			if r.IntN(3) == 0 {
				pod.Nodes = sets[r.IntN(len(sets))]
			}
			pods = append(pods, pod)
		}
		var ds dimSet
		demands := ds.demands(pods, nil)
		c := newCapacity(nodes, &ds, nil, nil)

		// The plain matrix, in the table's node order.
		mirror := make([][]int64, len(c.nodes))
		for i := range mirror {
			mirror[i] = slices.Clone(c.tree[(c.size+i)*c.r : (c.size+i+1)*c.r])
		}
		fitsMirror := func(m [][]int64, i int, d demand) bool {
			if !d.set.Has(c.nodes[i]) {
				return false
			}
			for _, n := range d.needs {
				if m[i][n.dim] < n.amount {
					return false
				}
			}
			return true
		}
		for step := range 60 {
			c.begin()
			trial := make([][]int64, len(mirror))
			for i := range mirror {
				trial[i] = slices.Clone(mirror[i])
			}
			for range 1 + r.IntN(6) {
				d := demands[r.IntN(len(demands))]
				want := -1
				for i := range trial {
					if fitsMirror(trial, i, d) {
						want = i
						break
					}
				}
				got := c.placeOne(RoleOther, d, new([]int), false)
				if got != want {
					t.Fatalf("round %d step %d: placed on %d, a scan says %d", round, step, got, want)
				}
				if got >= 0 {
					for _, n := range d.needs {
						trial[got][n.dim] -= n.amount
					}
				}
			}
			if r.IntN(2) == 0 {
				c.commit()
				mirror = trial
			} else {
				c.rollback()
			}
			for i := range mirror {
				if leaf := c.tree[(c.size+i)*c.r : (c.size+i+1)*c.r]; !slices.Equal(leaf, mirror[i]) {
					t.Fatalf("round %d step %d: node %d holds %v, want %v", round, step, i, leaf, mirror[i])
				}
			}
			for v := c.size - 1; v >= 1; v-- {
				for d := range c.r {
					if want := max(c.tree[2*v*c.r+d], c.tree[(2*v+1)*c.r+d]); c.tree[v*c.r+d] != want {
						t.Fatalf("round %d step %d: tree node %d dim %d is %d, want %d", round, step, v, d, c.tree[v*c.r+d], want)
					}
				}
			}
			for set, m := range c.sets { // each set's nodes, and its tree: their rows and maxima
				var in []int32
				for i, name := range c.nodes {
					if set.Has(name) != m.has(i) {
						t.Fatalf("round %d step %d: node %s in the set %v, in its mask %v", round, step, name, set.Has(name), m.has(i))
					}
					if set.Has(name) {
						in = append(in, int32(i))
					}
				}
				if !slices.Equal(in, m.list) {
					t.Fatalf("round %d step %d: the set's mask lists %v, want %v", round, step, m.list, in)
				}
				for k := range m.size {
					for d := range c.r {
						want := int64(math.MinInt64)
						if k < len(m.list) {
							want = mirror[m.list[k]][d]
						}
						if got := m.tree[(m.size+k)*c.r+d]; got != want {
							t.Fatalf("round %d step %d: set leaf %d dim %d is %d, want %d", round, step, k, d, got, want)
						}
					}
				}
				for v := m.size - 1; v >= 1; v-- {
					for d := range c.r {
						if want := max(m.tree[2*v*c.r+d], m.tree[(2*v+1)*c.r+d]); m.tree[v*c.r+d] != want {
							t.Fatalf("round %d step %d: set tree node %d dim %d is %d, want %d", round, step, v, d, m.tree[v*c.r+d], want)
						}
					}
				}
			}
			for _, d := range demands {
				for i := 0; i < c.cursor[d.shape] && i < len(mirror); i++ {
					if fitsMirror(mirror, i, d) {
						t.Fatalf("round %d step %d: shape %d's cursor %d skips node %d, which fits", round, step, d.shape, c.cursor[d.shape], i)
					}
				}
			}
		}
	}
}

// TestDemandsSharedRequests: pods that share one request map get the same demands as pods
// with equal maps of their own, whatever the order and mix of requests; the shared ones
// are computed in one scratch reused from round to round, as Admit's Workspace does.
func TestDemandsSharedRequests(t *testing.T) {
	var scratch demandScratch
	shared := []Resources{
		{"cpu": 1000, "memory": 2 << 30},
		{"cpu": 2000, "memory": 2 << 30, "nvidia.com/gpu": 1},
		{"memory": 1 << 30, "pods": 3, "cpu": 0},
		{},
		nil,
	}
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		var sharing, owning []*Pod
		for i := range 1 + r.IntN(40) {
			req := shared[r.IntN(len(shared))]
			if r.IntN(5) == 0 { // a request nobody shares
				req = Resources{"cpu": int64(1 + r.IntN(4000)), "example.com/x": int64(r.IntN(2))}
			}
			uid := strconv.Itoa(i)
			sharing = append(sharing, &Pod{UID: uid, Request: req})
			var own Resources
			if req != nil {
				own = Resources{}
				for k, v := range req {
					own[k] = v
				}
			}
			owning = append(owning, &Pod{UID: uid, Request: own})
		}
		var dsShared, dsOwn dimSet
		got, want := dsShared.demands(sharing, &scratch), dsOwn.demands(owning, nil)
		if !slices.Equal(dsShared.names, dsOwn.names) || dsShared.shapes != dsOwn.shapes {
			t.Fatalf("round %d: dimensions %v/%d, want %v/%d", round, dsShared.names, dsShared.shapes, dsOwn.names, dsOwn.shapes)
		}
		for i := range got {
			if !slices.Equal(got[i].needs, want[i].needs) || got[i].shape != want[i].shape {
				t.Errorf("round %d pod %d: demand %+v, want %+v", round, i, got[i], want[i])
			}
		}
	}
}

// TestCapacitySharedFree: nodes that share one Free map (in and out of name order, next to
// nodes with their own) give the same capacity table as nodes with equal maps of their own.
func TestCapacitySharedFree(t *testing.T) {
	small := Resources{"cpu": 2000, "memory": 4 << 30, "pods": 10}
	big := Resources{"cpu": 16000, "memory": 64 << 30, "nvidia.com/gpu": 2}
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	frees := []Resources{small, small, big, small, big, big, nil}
	var sharing, owning []Node
	for i, name := range names {
		sharing = append(sharing, Node{Name: name, Free: frees[i]})
		var own Resources
		if frees[i] != nil {
			own = Resources{}
			for k, v := range frees[i] {
				own[k] = v
			}
		}
		owning = append(owning, Node{Name: name, Free: own})
	}
	pods := []*Pod{{UID: "p", Request: Resources{"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}}}
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1, 0}, {1, 0, 4, 5, 3, 2, 6}} {
		var s, o []Node
		for _, i := range order {
			s, o = append(s, sharing[i]), append(o, owning[i])
		}
		var ds1, ds2 dimSet
		ds1.demands(pods, nil)
		ds2.demands(pods, nil)
		got, want := newCapacity(s, &ds1, nil, nil), newCapacity(o, &ds2, nil, nil)
		if !slices.Equal(got.nodes, want.nodes) || !slices.Equal(got.tree[got.r:], want.tree[want.r:]) {
			t.Errorf("order %v: table %v %v, want %v %v", order, got.nodes, got.tree[got.r:], want.nodes, want.tree[want.r:])
		}
	}
}

// TestTotalKeptByWhatPodsAsk checks that total, which keeps its texts, says for each run of
// pods what a fresh table says: jobs that ask alike share a text, and no other job gets it.
func TestTotalKeptByWhatPodsAsk(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 11))
	zone := &NodeSet{Why: "nodes with zone=a"}
	var pods []*Pod
	for i := range 40 {
		req := Resources{"cpu": int64(1+r.IntN(3)) * 500, "memory": int64(r.IntN(3)) << 30}
		if r.IntN(4) == 0 {
			req["gpu"] = 1
		}
		pods = append(pods, &Pod{UID: strconv.Itoa(i), Request: req})
	}
	var ds dimSet
	demands := ds.demands(pods, nil)
	for i := range demands {
		if i%7 == 0 {
			demands[i].set = zone
		}
	}
	nodes := []Node{{Name: "n1", Free: Resources{"cpu": 4000, "memory": 8 << 30, "gpu": 1, "pods": 10}}}
	kept := newCapacity(nodes, &ds, nil, nil)
	for range 300 {
		from := r.IntN(len(demands))
		run := demands[from : from+r.IntN(min(5, len(demands)-from))+1]
		fresh := newCapacity(nodes, &ds, nil, nil)
		if got, want := kept.total(run), fresh.total(run); got != want {
			t.Fatalf("pods %d..%d: total %q, a fresh table says %q", from, from+len(run)-1, got, want)
		}
	}
	if len(kept.totalTexts) < 2 {
		t.Fatalf("%d texts kept: the runs all asked alike", len(kept.totalTexts))
	}
}

// TestShortageKeptByWhatIsShort checks that shortage, which keeps its texts, says what it
// says with none kept, while pods are taken onto the table and what is free moves.
func TestShortageKeptByWhatIsShort(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2))
	var nodes []Node
	for i := range 12 {
		nodes = append(nodes, Node{Name: "n" + strconv.Itoa(i), Free: Resources{"cpu": int64(1+r.IntN(4)) * 1000, "memory": int64(1+r.IntN(4)) << 30, "pods": 20}})
	}
	var pods []*Pod
	for i := range 30 {
		pods = append(pods, &Pod{UID: strconv.Itoa(i), Role: RoleWorker, Name: "w-" + strconv.Itoa(i),
			Request: Resources{"cpu": int64(1+r.IntN(8)) * 500, "memory": int64(1+r.IntN(6)) << 29}})
	}
	var ds dimSet
	demands := ds.demands(pods, nil)
	zone := NewNodeSet("nodes with zone=a", []string{"n1", "n4", "n7"})
	c := newCapacity(nodes, &ds, nil, nil)
	said := map[string]bool{}
	for step := range 400 {
		i := r.IntN(len(demands))
		d := demands[i]
		if step%5 == 0 {
			d.set = zone
		}
		got := c.shortage(podLabel(pods[i], "ns"), d)
		kept := c.shortTexts
		c.shortTexts = nil
		want := c.shortage(podLabel(pods[i], "ns"), d)
		c.shortTexts = kept
		if got != want {
			t.Fatalf("step %d: kept %q, with none kept %q", step, got, want)
		}
		said[got] = true
		if n := c.firstFit(d); n >= 0 && d.set == nil {
			c.take(n, d.needs)
		}
	}
	if len(said) < 5 {
		t.Fatalf("only %d texts compared", len(said))
	}
}
