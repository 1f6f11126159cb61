package sources

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
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
