package eval

import (
	"math"
	"testing"
	"time"
)

var racks = map[string]string{"n0": "r0", "n1": "r0", "n2": "r1", "n3": "r1"}

func TestWorkerFactorOrdering(t *testing.T) {
	p := Placement{PS: []string{"n0"}, RackOf: racks}
	sameNode, sameRack, crossRack := p.WorkerFactor("n0"), p.WorkerFactor("n1"), p.WorkerFactor("n2")
	if !(sameNode < sameRack && sameRack < crossRack) {
		t.Errorf("factors same node %v, same rack %v, cross rack %v: want strictly increasing", sameNode, sameRack, crossRack)
	}
}

func TestRunFactorAndLocality(t *testing.T) {
	for _, c := range []struct {
		name               string
		p                  Placement
		factor, node, rack float64
	}{
		{"all beside the PS", Placement{PS: []string{"n0"}, Workers: []string{"n0", "n0"}}, 1, 1, 1},
		{"one per distance", Placement{PS: []string{"n0"}, Workers: []string{"n0", "n1", "n2"}}, (1 + 1.15 + 1.4) / 3, 1.0 / 3, 2.0 / 3},
		{"nearest of two PS", Placement{PS: []string{"n0", "n2"}, Workers: []string{"n3", "n2"}}, (1.15 + 1) / 2, 0.5, 1},
		{"all cross rack", Placement{PS: []string{"n0"}, Workers: []string{"n2", "n3"}}, 1.4, 0, 0},
		{"no workers", Placement{PS: []string{"n0"}}, 1, 0, 0},
		{"no PS bound", Placement{Workers: []string{"n0"}}, 1.4, 0, 0},
	} {
		c.p.RackOf = racks
		if got := c.p.RunFactor(); math.Abs(got-c.factor) > 1e-9 {
			t.Errorf("%s: RunFactor %v, want %v", c.name, got, c.factor)
		}
		node, rack := c.p.Locality()
		if math.Abs(node-c.node) > 1e-9 || math.Abs(rack-c.rack) > 1e-9 {
			t.Errorf("%s: Locality %v/%v, want %v/%v", c.name, node, rack, c.node, c.rack)
		}
		if got, want := c.p.RunTime(10*time.Minute), time.Duration(float64(10*time.Minute)*c.factor); got != want {
			t.Errorf("%s: RunTime %v, want %v", c.name, got, want)
		}
	}
}
