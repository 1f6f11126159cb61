// Package server is the extender's HTTP plumbing: routing, body limits, JSON errors, the
// access log, request metrics, health and readiness, /debug/queue, /debug/nodes, the queue
// page /ui and TLS certificates. It knows the verbs only as routes (wire.Route) and imports
// wire, metrics and the model.
package server

import (
	"bytes"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/extender/wire"
	"github.com/julienschmidt/httprouter"
	"go.uber.org/zap"
)

// ReadyChecker reports whether the extender can answer from a synced cluster view.
type ReadyChecker interface {
	Ready() bool
}

// Server serves the extender's routes, health, readiness, the queue page and the metrics.
type Server struct {
	log      *zap.Logger
	maxBytes int64
	ready    ReadyChecker
	queue    QueueSource
	layout   LayoutSource
	metrics  *metrics.Metrics
	access   Access
	router   *httprouter.Router
	// verbs lists the verbs served under each route prefix, for the 404 of an unknown verb.
	verbs map[string][]string
}

// Options are the dependencies of a Server.
type Options struct {
	Log             *zap.Logger
	MaxRequestBytes int64
	Ready           ReadyChecker
	// Routes are the verbs served, e.g. the kube-scheduler verbs and the Volcano verbs.
	Routes []wire.Route
	// Queue serves /debug/queue; nil leaves the endpoint out.
	Queue QueueSource
	// Layout serves /debug/nodes and, with Queue, the queue page /ui; nil leaves them out.
	Layout LayoutSource
	// Metrics counts requests and serves /metrics; nil leaves them out.
	Metrics *metrics.Metrics
	// HideMetrics counts requests in Metrics but serves no /metrics (the webhook's listener).
	HideMetrics bool
	// Access says who may call the routes, /debug/*, /ui and /metrics; /healthz and
	// /readyz are open. Its zero value lets callers in from loopback only.
	Access Access
	// MaxInFlight bounds the requests of one route served at once, MaxInFlightHeld those of
	// a Held route (bind); past the bound a request gets 429. 0: no bound.
	MaxInFlight, MaxInFlightHeld int
}

// New builds the HTTP handler of the extender.
func New(o Options) (*Server, error) {
	var missing []string
	if o.Log == nil {
		missing = append(missing, "Log")
	}
	if o.Ready == nil {
		missing = append(missing, "Ready")
	}
	if o.MaxRequestBytes <= 0 {
		missing = append(missing, "MaxRequestBytes")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("extender server: missing %s", strings.Join(missing, ", "))
	}
	access := o.Access
	for _, ways := range []*[]string{&access.Scheduler, &access.Volcano, &access.Admin} {
		if len(*ways) == 0 {
			*ways = []string{WayLoopback}
		}
	}
	s := &Server{log: o.Log, maxBytes: o.MaxRequestBytes, ready: o.Ready, queue: o.Queue, layout: o.Layout, metrics: o.Metrics, access: access, verbs: map[string][]string{}}
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	seen := map[string]bool{}
	for _, route := range o.Routes {
		if seen[route.Path] {
			return nil, fmt.Errorf("extender server: two routes for %s: give each part its own URL prefix", route.Path)
		}
		seen[route.Path] = true
		limit := o.MaxInFlight
		if route.Held {
			limit = o.MaxInFlightHeld
		}
		r.POST(route.Path, s.handle(route, limit))
		prefix, verb := path.Split(route.Path)
		s.verbs[prefix] = append(s.verbs[prefix], verb)
	}
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	admin := func(path string, h httprouter.Handle) {
		r.GET(path, func(w http.ResponseWriter, req *http.Request, p httprouter.Params) {
			s.guard("admin", func(w http.ResponseWriter, req *http.Request) { h(w, req, p) })(w, req)
		})
	}
	if s.queue != nil {
		admin("/debug/queue", s.debugQueue)
	}
	if s.layout != nil {
		admin("/debug/nodes", s.debugNodes)
		if s.queue != nil {
			if err := routeUI(admin); err != nil {
				return nil, err
			}
		}
	}
	if s.metrics != nil && !o.HideMetrics {
		metricsHandler := s.metrics.Handler()
		admin("/metrics", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) { metricsHandler.ServeHTTP(w, req) })
	}
	r.NotFound = http.HandlerFunc(s.notFound)
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		wire.WriteJSON(w, http.StatusMethodNotAllowed, wire.ErrorBody{Error: fmt.Sprintf("method %s is not allowed on %s", req.Method, req.URL.Path)})
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		// A panic is a bug of ours; answer 500 instead of dropping the connection.
		s.log.Error("handler panicked", zap.String("path", req.URL.Path), zap.Any("panic", v), zap.Stack("stack"))
		wire.WriteJSON(w, http.StatusInternalServerError, wire.ErrorBody{Error: "internal error"})
	}
	s.router = r
	return s, nil
}

// ServeHTTP serves one request. Every request is logged at debug level, and an error answer
// of a verb at warn level with its context.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.router.ServeHTTP(rec, r)
	if rec.verb == "" { // a verb's route logs its own request
		s.logRequest(r, rec, "", wire.Note{}, time.Since(start))
	}
}

// handle wraps one route: readiness check where it needs the view, then the verb's own
// decode-decide-encode; the verb's request is counted and timed in the metrics and logged
// (verb, pod, decision, duration).
func (s *Server) handle(route wire.Route, limit int) httprouter.Handle {
	var slots chan struct{}
	if limit > 0 {
		slots = make(chan struct{}, limit)
	}
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		start := time.Now()
		rec, _ := w.(*statusRecorder)
		if rec == nil {
			rec = &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		}
		rec.verb = route.Verb
		var note wire.Note
		if status, msg := s.access.allow(r, route.Kind); status != 0 {
			s.metrics.ObserveRefused(route.Kind, status)
			wire.WriteJSON(rec, status, wire.ErrorBody{Error: msg})
			note.Decision = "refused"
		} else if !take(slots) {
			rec.Header().Set("Retry-After", "1")
			wire.WriteJSON(rec, http.StatusTooManyRequests, wire.ErrorBody{Error: fmt.Sprintf("%s: %d requests are being served already; retry", route.Verb, limit)})
		} else {
			if route.NeedsView && !s.ready.Ready() {
				wire.WriteJSON(rec, http.StatusServiceUnavailable, wire.ErrorBody{Error: "extender is not ready: its cluster view is not synced, or stale"})
			} else {
				note = route.Handler(rec, r, wire.Call{MaxBytes: s.maxBytes, Detailed: s.log.Core().Enabled(zap.DebugLevel)})
			}
			if slots != nil {
				<-slots
			}
		}
		took := time.Since(start)
		s.metrics.ObserveRequest(route.Verb, rec.status, took)
		s.logRequest(r, rec, route.Verb, note, took)
	}
}

// logRequest writes the access log line of one request.
func (s *Server) logRequest(r *http.Request, rec *statusRecorder, verb string, note wire.Note, took time.Duration) {
	level := zap.DebugLevel
	if rec.status >= http.StatusBadRequest && verb != "" {
		level = zap.WarnLevel
	}
	if ce := s.log.Check(level, "request"); ce != nil {
		fields := []zap.Field{zap.String("verb", verb), zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", rec.status), zap.String("pod", note.Pod), zap.String("decision", note.Decision), zap.Duration("duration", took)}
		if rec.errBody != nil {
			fields = append(fields, zap.ByteString("error", bytes.TrimSpace(rec.errBody)))
		}
		ce.Write(fields...)
	}
}

// take takes a slot of slots, without waiting; a nil slots has room for all.
func take(slots chan struct{}) bool {
	if slots == nil {
		return true
	}
	select {
	case slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	msg := fmt.Sprintf("no such endpoint %s %s", r.Method, r.URL.Path)
	if prefix, verb := path.Split(r.URL.Path); len(s.verbs[prefix]) > 0 {
		msg = fmt.Sprintf("unknown verb %q: known verbs are %s", verb, strings.Join(s.verbs[prefix], ", "))
	}
	wire.WriteJSON(w, http.StatusNotFound, wire.ErrorBody{Error: msg})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	if !s.ready.Ready() {
		status := "cluster view not synced"
		if r, ok := s.ready.(interface{ NotReadyReason() string }); ok {
			if why := r.NotReadyReason(); why != "" {
				status = why
			}
		}
		wire.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": status})
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// maxLoggedErrorBytes bounds how much of an error answer the access log repeats.
const maxLoggedErrorBytes = 512

// statusRecorder keeps the status of the answer, and the start of its body when it is an
// error (the {"error": ...} that names the problem), for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	errBody []byte
	verb    string // set by a route's handler: the request was a verb's
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status >= http.StatusBadRequest && len(r.errBody) < maxLoggedErrorBytes {
		r.errBody = append(r.errBody, b[:min(len(b), maxLoggedErrorBytes-len(r.errBody))]...)
	}
	return r.ResponseWriter.Write(b)
}
