package view

import (
	"maps"
	"testing"

	"github.com/cps-extender/cps-extender/priority"
)

// TestUseSumsMatchAPass checks the sums kept pod by pod against subtracting the pods that
// remain one at a time, as a pass over them does: a resource stays named while a pod asks
// for it, even at zero, and pod slots come off only a node that lists them.
func TestUseSumsMatchAPass(t *testing.T) {
	cpu1 := priority.Resources{"cpu": 1000}
	zeroGPU := priority.Resources{"cpu": 500, "example.com/gpu": 0}
	cases := []struct {
		name        string
		allocatable priority.Resources
		add, remove []priority.Resources
	}{
		{"one pod", priority.Resources{"cpu": 4000, "pods": 110}, []priority.Resources{cpu1}, nil},
		{"added and taken out", priority.Resources{"cpu": 4000, "pods": 110}, []priority.Resources{cpu1, zeroGPU}, []priority.Resources{cpu1}},
		{"a zero request named until its pod goes", priority.Resources{"cpu": 4000}, []priority.Resources{zeroGPU, cpu1}, []priority.Resources{zeroGPU}},
		{"no pod slots listed", priority.Resources{"cpu": 4000}, []priority.Resources{cpu1, cpu1}, nil},
		{"over the node", priority.Resources{"cpu": 1500, "pods": 1}, []priority.Resources{cpu1, cpu1}, nil},
		{"no allocatable", nil, []priority.Resources{cpu1}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s useSums
			pods := int64(0)
			remaining := append([]priority.Resources(nil), tc.add...)
			for _, r := range tc.add {
				s, pods = s.add(r, 1), pods+1
			}
			for _, r := range tc.remove {
				s, pods = s.add(r, -1), pods-1
				for i := range remaining {
					if maps.Equal(remaining[i], r) {
						remaining = append(remaining[:i], remaining[i+1:]...)
						break
					}
				}
			}
			want := tc.allocatable
			owned := false
			for _, r := range remaining {
				if want == nil {
					want, owned = priority.Resources{}, true
				}
				subtract(&want, &owned, r)
			}
			if got := s.from(tc.allocatable, pods); !maps.Equal(got, want) {
				t.Errorf("from the sums: %v, from a pass over the pods: %v", got, want)
			}
		})
	}
}
