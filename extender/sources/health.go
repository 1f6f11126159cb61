package sources

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"
)

// WatchFailingAfter is how long an informer's list and watch may keep failing before the
// view reports itself not ready: a cut connection to the API server is retried within a
// second or two, and the view answers from its cache meanwhile.
const WatchFailingAfter = 10 * time.Second

// Health follows the informers' list and watch errors. An informer fails from its
// first error until it has listed or watched anything since (its last synced resource
// version moved), which its reflector does as soon as the API server answers again.
type Health struct {
	log *zap.Logger
	now func() time.Time

	mu      sync.Mutex
	failing map[string]watchFailure // by informer name
	server  *probed                 // the API server's probe (see probe); written under mu
}

type watchFailure struct {
	since time.Time
	rv    string // the informer's last synced resource version at its first error
	inf   versioned
}

// versioned is the part of an informer that says whether it has heard from the API server.
type versioned interface{ LastSyncResourceVersion() string }

// NewHealth follows no informer yet; now is the clock.
func NewHealth(log *zap.Logger, now func() time.Time) *Health {
	return &Health{log: log, now: now, failing: map[string]watchFailure{}, server: &probed{}}
}

// Follow installs the error handler on an informer that has not started.
func (h *Health) Follow(name string, inf cache.SharedIndexInformer) {
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err) // its log line, as without a handler
		h.failed(name, inf, err)
	}); err != nil {
		h.log.Error("setting an informer's watch error handler", zap.String("informer", name), zap.Error(err))
	}
}

// failed notes a list or watch error of an informer.
func (h *Health) failed(name string, inf versioned, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.failing[name]; !ok {
		h.failing[name] = watchFailure{since: h.now(), rv: inf.LastSyncResourceVersion(), inf: inf}
		h.log.Warn("informer list and watch failing; the view answers from its cache", zap.String("informer", name), zap.Error(err))
	}
}

// probeEvery is how often the view asks the API server whether it is there.
const probeEvery = 2 * time.Second

// apiServer is the name under which an API server that does not answer is stale.
const apiServer = "API server"

// Probe asks the API server's /readyz every probeEvery until ctx ends, and counts an
// API server that does not answer as a failing list and watch: a reflector whose
// connection is refused retries inside its watch, without telling its error handler, so
// an API server gone for good would otherwise leave the view looking fresh.
func (h *Health) Probe(ctx context.Context, ask func(ctx context.Context) (string, error)) {
	var rv uint64 // a "resource version" that moves with every answer
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, probeEvery)
		_, err := ask(pctx)
		cancel()
		if err == nil {
			rv++
			h.answered(rv)
		} else if ctx.Err() == nil {
			h.failed(apiServer, h.server, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// answered notes that the API server answered its probe.
func (h *Health) answered(rv uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.server.rv = strconv.FormatUint(rv, 10)
}

// probed is the API server's probe as a versioned source: its version moves with every answer.
type probed struct{ rv string }

func (p *probed) LastSyncResourceVersion() string { return p.rv }

// Stale names an informer that has failed for longer than WatchFailingAfter ("" for none),
// and forgets those that recovered.
func (h *Health) Stale() string {
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
		if now.Sub(f.since) > WatchFailingAfter {
			worst = name
		}
	}
	return worst
}
