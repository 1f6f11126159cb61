package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRuntimeMetrics: /metrics serves, beside the Go collector's defaults, the live heap
// and the GC limiter's last cycle, which sizing a memory limit reads.
func TestRuntimeMetrics(t *testing.T) {
	rec := httptest.NewRecorder()
	newMetrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, name := range []string{"go_gc_heap_live_bytes ", "go_gc_limiter_last_enabled_gc_cycle ", "go_memstats_heap_inuse_bytes ", "go_gc_gomemlimit_bytes "} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("/metrics has no %s", strings.TrimSpace(name))
		}
	}
}
