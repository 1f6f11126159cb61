package view

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"
)

// watchFailingAfter is how long an informer's list and watch may keep failing before the
// view reports itself not ready: a cut connection to the API server is retried within a
// second or two, and the view answers from its cache meanwhile.
const watchFailingAfter = 10 * time.Second

// watchHealth follows the informers' list and watch errors. An informer fails from its
// first error until it has listed or watched anything since (its last synced resource
// version moved), which its reflector does as soon as the API server answers again.
type watchHealth struct {
	log *zap.Logger
	now func() time.Time

	mu      sync.Mutex
	failing map[string]watchFailure // by informer name
}

type watchFailure struct {
	since time.Time
	rv    string // the informer's last synced resource version at its first error
	inf   versioned
}

// versioned is the part of an informer that says whether it has heard from the API server.
type versioned interface{ LastSyncResourceVersion() string }

func newWatchHealth(log *zap.Logger, now func() time.Time) *watchHealth {
	return &watchHealth{log: log, now: now, failing: map[string]watchFailure{}}
}

// follow installs the error handler on an informer that has not started.
func (h *watchHealth) follow(name string, inf cache.SharedIndexInformer) {
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err) // its log line, as without a handler
		h.failed(name, inf, err)
	}); err != nil {
		h.log.Error("setting an informer's watch error handler", zap.String("informer", name), zap.Error(err))
	}
}

// failed notes a list or watch error of an informer.
func (h *watchHealth) failed(name string, inf versioned, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.failing[name]; !ok {
		h.failing[name] = watchFailure{since: h.now(), rv: inf.LastSyncResourceVersion(), inf: inf}
		h.log.Warn("informer list and watch failing; the view answers from its cache", zap.String("informer", name), zap.Error(err))
	}
}

// stale names an informer that has failed for longer than watchFailingAfter ("" for none),
// and forgets those that recovered.
func (h *watchHealth) stale() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	worst := ""
	for name, f := range h.failing {
		if f.inf.LastSyncResourceVersion() != f.rv {
			delete(h.failing, name)
			h.log.Info("informer list and watch recovered", zap.String("informer", name), zap.Duration("after", now.Sub(f.since)))
			continue
		}
		if now.Sub(f.since) > watchFailingAfter {
			worst = name
		}
	}
	return worst
}
