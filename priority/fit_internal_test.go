package priority

import (
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
		var pods []*Pod
		for i := range 30 {
			req := Resources{"cpu": int64(r.IntN(4)) * 1000, "memory": int64(r.IntN(4))}
			if r.IntN(4) == 0 {
				req["gpu"] = 1
			}
			pods = append(pods, &Pod{UID: strconv.Itoa(i), Request: req})
		}
		var ds dimSet
		demands := ds.demands(pods)
		c := newCapacity(nodes, &ds)

		// The plain matrix, in the table's node order.
		mirror := make([][]int64, len(c.nodes))
		for i := range mirror {
			mirror[i] = slices.Clone(c.tree[(c.size+i)*c.r : (c.size+i+1)*c.r])
		}
		fitsMirror := func(m [][]int64, i int, d demand) bool {
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
				got := c.placeOne(RoleOther, d, new([]int))
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
