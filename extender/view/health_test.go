package view

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
)

type fakeVersioned struct{ rv string }

func (f *fakeVersioned) LastSyncResourceVersion() string { return f.rv }

// TestWatchHealth: an informer whose list and watch fail is stale only after
// WatchFailingAfter, and healthy again once it has heard from the API server.
func TestWatchHealth(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := NewHealth(zap.NewNop(), func() time.Time { return now })
	pods := &fakeVersioned{rv: "100"}
	if got := h.Stale(); got != "" {
		t.Fatalf("Stale() = %q before any error", got)
	}
	h.failed("pods", pods, errors.New("connection refused"))
	now = now.Add(WatchFailingAfter - time.Second)
	h.failed("pods", pods, errors.New("connection refused")) // a retry: still since the first
	if got := h.Stale(); got != "" {
		t.Errorf("Stale() = %q %v after the first error, want \"\"", got, WatchFailingAfter-time.Second)
	}
	now = now.Add(2 * time.Second)
	if got := h.Stale(); got != "pods" {
		t.Errorf("Stale() = %q past WatchFailingAfter, want pods", got)
	}
	pods.rv = "107" // listed again
	if got := h.Stale(); got != "" {
		t.Errorf("Stale() = %q after the informer heard from the API server again", got)
	}
	h.failed("pods", pods, errors.New("connection refused"))
	if got := h.Stale(); got != "" {
		t.Errorf("Stale() = %q at a new first error", got)
	}
}

// TestReadyTellsTheTruth: ready once synced with a queue, not ready when the queue is older
// than staleAfter (a stuck recompute), ready again with a fresh one.
func TestReadyTellsTheTruth(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cfg := config.DefaultConfig()
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: cfg, Now: func() time.Time { return now }})
	if c.Ready() || c.NotReadyReason() != "cluster view not synced" {
		t.Fatalf("ready before the first queue: %v %q", c.Ready(), c.NotReadyReason())
	}
	c.recompute(now)
	c.ready.Store(true)
	if !c.Ready() {
		t.Fatalf("not ready with a fresh queue: %q", c.NotReadyReason())
	}
	now = now.Add(c.staleAfter() + time.Second)
	if c.Ready() || c.NotReadyReason() != "the queue is stale: last computed 11s ago" {
		t.Errorf("ready %v (%q) with a queue %v old", c.Ready(), c.NotReadyReason(), c.staleAfter()+time.Second)
	}
	if age, ok := c.SnapshotAge(); !ok || age != c.staleAfter()+time.Second {
		t.Errorf("SnapshotAge = %v %v", age, ok)
	}
	c.recompute(now)
	if !c.Ready() {
		t.Errorf("not ready after a recompute: %q", c.NotReadyReason())
	}
}
