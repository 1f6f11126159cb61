package eval

import "time"

// Worker slowdown factors by distance to the nearest PS of the job (see the package doc).
const (
	FactorSameNode  = 1.00
	FactorSameRack  = 1.15
	FactorCrossRack = 1.40
)

// Placement is where a job's pods went: node names of its parameter servers and workers, and
// the rack of every node.
type Placement struct {
	PS      []string
	Workers []string
	RackOf  map[string]string
}

// WorkerFactor is one worker's slowdown: FactorSameNode on a node with a PS of its job,
// FactorSameRack in a rack with one, FactorCrossRack otherwise.
func (p Placement) WorkerFactor(node string) float64 {
	sameRack := false
	for _, ps := range p.PS {
		if ps == node {
			return FactorSameNode
		}
		if r, ok := p.RackOf[ps]; ok && r == p.RackOf[node] {
			sameRack = true
		}
	}
	if sameRack {
		return FactorSameRack
	}
	return FactorCrossRack
}

// RunFactor is the job's slowdown: the mean of its workers' factors (asynchronous training:
// the job advances at the sum of its workers' rates). A job without workers runs at 1.
func (p Placement) RunFactor() float64 {
	if len(p.Workers) == 0 {
		return 1
	}
	sum := 0.0
	for _, w := range p.Workers {
		sum += p.WorkerFactor(w)
	}
	return sum / float64(len(p.Workers))
}

// RunTime is base scaled by the placement's RunFactor.
func (p Placement) RunTime(base time.Duration) time.Duration {
	return time.Duration(float64(base) * p.RunFactor())
}

// Locality is the share of workers on a PS's node (node) and on a PS's node or rack (rack);
// both 0 for a job without workers.
func (p Placement) Locality() (node, rack float64) {
	if len(p.Workers) == 0 {
		return 0, 0
	}
	n, r := 0, 0
	for _, w := range p.Workers {
		switch p.WorkerFactor(w) {
		case FactorSameNode:
			n++
			r++
		case FactorSameRack:
			r++
		}
	}
	return float64(n) / float64(len(p.Workers)), float64(r) / float64(len(p.Workers))
}
