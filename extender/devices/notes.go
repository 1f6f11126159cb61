package devices

import (
	"math/bits"

	resourceapi "k8s.io/api/resource/v1"
)

// note is a set of the DRA features a pod's claims use that the count does not model
// (docs/known-limits.md): where one is set the count is approximate, and the job's
// sentence says it may not fit.
type note uint16

// The features, in the order their phrases are written.
const (
	noteConstraints note = 1 << iota
	noteAll
	noteFirstAvailable
	noteCapacity
	noteShared
	noteCounters
	noteTaints
	noteRemote
	noteTwoClasses
	noteSelectorShare
	noteUnevaluable
)

// notePhrases are the notes' phrases by bit, as the sentence writes them after "may not
// fit: ".
var notePhrases = [...]string{
	"DRA constraints between requests",
	"allocationMode All counted as one device",
	"firstAvailable alternatives after the first",
	"consumable device capacity",
	"shared devices (allowMultipleAllocations)",
	"partitioned devices' shared counters",
	"device taints",
	"network-attached devices",
	"devices two DeviceClasses accept",
	"devices a request's selectors pick that other requests of its class may take",
	"device selectors that cannot be evaluated",
}

// phrases lists the phrases of the notes set, in a fixed order; nil when none is.
func (n note) phrases() []string {
	if n == 0 {
		return nil
	}
	out := make([]string, 0, bits.OnesCount16(uint16(n)))
	for i, p := range notePhrases {
		if n&(1<<i) != 0 {
			out = append(out, p)
		}
	}
	return out
}

// deviceNote is what a device brings to the notes of the classes that accept it.
func deviceNote(s *resourceapi.ResourceSlice, d *resourceapi.Device) note {
	var n note
	if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
		n |= noteShared
	}
	if len(d.ConsumesCounters) > 0 {
		n |= noteCounters
	}
	if len(d.Taints) > 0 {
		n |= noteTaints
	}
	if nodeOf(s, d) == "" {
		n |= noteRemote
	}
	return n
}

// requestNote is what a request asks that the count does not model, from its spec alone.
func requestNote(r resourceapi.DeviceRequest) note {
	var n note
	switch {
	case r.Exactly != nil:
		e := r.Exactly
		if e.AdminAccess != nil && *e.AdminAccess {
			return 0
		}
		if e.AllocationMode == resourceapi.DeviceAllocationModeAll {
			n |= noteAll
		}
		if e.Capacity != nil {
			n |= noteCapacity
		}
	case len(r.FirstAvailable) > 0:
		s := r.FirstAvailable[0]
		if len(r.FirstAvailable) > 1 {
			n |= noteFirstAvailable
		}
		if s.AllocationMode == resourceapi.DeviceAllocationModeAll {
			n |= noteAll
		}
		if s.Capacity != nil {
			n |= noteCapacity
		}
	}
	return n
}
