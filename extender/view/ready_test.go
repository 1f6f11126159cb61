package view

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
)

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

func TestNextRecompute(t *testing.T) {
	last := time.Date(2026, 12, 7, 17, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		took time.Duration
		want time.Duration // after last
	}{
		{"first recompute", 0, recomputeGap},
		{"a quick one waits out the gap", time.Millisecond, recomputeGap},
		{"half the gap still waits the gap", recomputeGap / 2, recomputeGap},
		{"a long one rests as long as it took", 40 * time.Millisecond, 80 * time.Millisecond},
		{"a longer one rests maxRest", 150 * time.Millisecond, 150*time.Millisecond + maxRest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextRecompute(last, tc.took).Sub(last); got != tc.want {
				t.Errorf("nextRecompute after %v: %v after the last start, want %v", tc.took, got, tc.want)
			}
		})
	}
}
