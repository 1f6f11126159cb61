package view

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/cps-extender/cps-extender/priority"
)

// TestInternRequests: equal requests come back as one shared map, different ones as their
// own, and a full table starts afresh without changing any answer.
func TestInternRequests(t *testing.T) {
	same := func(a, b priority.Resources) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	x := newViewIndex()
	a := x.intern(priority.Resources{"cpu": 1000, "memory": 2 << 30})
	tests := []struct {
		name   string
		req    priority.Resources
		shared bool
	}{
		{"equal", priority.Resources{"memory": 2 << 30, "cpu": 1000}, true},
		{"more cpu", priority.Resources{"cpu": 1001, "memory": 2 << 30}, false},
		{"one more resource", priority.Resources{"cpu": 1000, "memory": 2 << 30, "nvidia.com/gpu": 1}, false},
		{"a name that runs into its value", priority.Resources{"cpu1": 000, "memory": 2 << 30}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := x.intern(tt.req)
			if !reflect.DeepEqual(got, tt.req) {
				t.Fatalf("intern changed the request: %v, want %v", got, tt.req)
			}
			if same(got, a) != tt.shared {
				t.Errorf("shared with the first = %t, want %t", same(got, a), tt.shared)
			}
		})
	}
	for i := range maxInternedRequests {
		x.intern(priority.Resources{"cpu": int64(10000 + i)})
	}
	if len(x.requests) > maxInternedRequests {
		t.Errorf("%d interned requests, want at most %d", len(x.requests), maxInternedRequests)
	}
	if got := x.intern(priority.Resources{"cpu": 1000, "memory": 2 << 30}); !reflect.DeepEqual(got, a) {
		t.Errorf("after the reset: %v, want %v", got, a)
	}
}

// TestPodRecordSize holds a pod record to the 256-byte size class: one record a pod, at
// 100k pods each size class up is 3.2 MB more.
func TestPodRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(podRecord{}); got > 256 {
		t.Errorf("a podRecord is %d bytes, past the 256-byte size class", got)
	}
}
