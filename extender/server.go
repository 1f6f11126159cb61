package extender

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/extender/wire"
	"github.com/julienschmidt/httprouter"
	"go.uber.org/zap"
)

// The kube-scheduler extender verbs served under the URL prefix.
const (
	VerbFilter     = "filter"
	VerbPrioritize = "prioritize"
	VerbBind       = "bind"
	VerbPreempt    = "preempt"
)

// ReadyChecker reports whether the extender can answer from a synced cluster view.
type ReadyChecker interface {
	Ready() bool
}

// Server serves the extender verbs, health and readiness.
type Server struct {
	log      *zap.Logger
	prefix   string
	maxBytes int64
	ready    ReadyChecker
	sched    *SchedulerVerbs
	queue    QueueSource
	metrics  *metrics.Metrics
	router   *httprouter.Router
}

// ServerOptions are the dependencies of a Server.
type ServerOptions struct {
	Log             *zap.Logger
	URLPrefix       string
	MaxRequestBytes int64
	Ready           ReadyChecker
	Scheduler       *SchedulerVerbs
	// Queue serves /debug/queue; nil leaves the endpoint out.
	Queue QueueSource
	// Volcano serves Volcano's extender verbs under its own prefix; nil leaves them out.
	Volcano *VolcanoVerbs
	// Metrics counts requests and serves /metrics; nil leaves them out.
	Metrics *metrics.Metrics
}

// NewServer builds the HTTP handler of the extender.
func NewServer(o ServerOptions) (*Server, error) {
	var missing []string
	if o.Log == nil {
		missing = append(missing, "Log")
	}
	if o.Ready == nil {
		missing = append(missing, "Ready")
	}
	if o.Scheduler == nil {
		missing = append(missing, "Scheduler")
	}
	if o.MaxRequestBytes <= 0 {
		missing = append(missing, "MaxRequestBytes")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("extender server: missing %s", strings.Join(missing, ", "))
	}
	if o.Volcano != nil && o.Volcano.URLPrefix() == o.URLPrefix {
		return nil, fmt.Errorf("extender server: the Volcano verbs need a URL prefix other than %q", o.URLPrefix)
	}
	s := &Server{log: o.Log, prefix: o.URLPrefix, maxBytes: o.MaxRequestBytes, ready: o.Ready, sched: o.Scheduler, queue: o.Queue, metrics: o.Metrics}
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.POST(s.prefix+"/"+VerbFilter, s.handle(VerbFilter, s.sched.filter))
	r.POST(s.prefix+"/"+VerbPrioritize, s.handle(VerbPrioritize, s.sched.prioritize))
	r.POST(s.prefix+"/"+VerbBind, s.handle(VerbBind, s.sched.bind))
	r.POST(s.prefix+"/"+VerbPreempt, s.handle(VerbPreempt, s.sched.preempt))
	if o.Volcano != nil {
		// The Volcano path decides from Volcano's own payloads, not the informers: it answers
		// from the start (an onSessionOpen that fails would switch the extender off for
		// that session).
		o.Volcano.Register(r, s.handleAlways)
	}
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	if s.queue != nil {
		r.GET("/debug/queue", s.debugQueue)
	}
	if s.metrics != nil {
		r.Handler(http.MethodGet, "/metrics", s.metrics.Handler())
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

// ServeHTTP serves one request. A verb's request is counted and timed in the metrics and
// logged at debug level (verb, pod, decision, duration); an error answer is logged at warn
// level with its context.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &requestInfo{detailed: s.log.Core().Enabled(zap.DebugLevel)}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.router.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info)))
	took := time.Since(start)
	if info.verb != "" {
		s.metrics.ObserveRequest(info.verb, rec.status, took)
	}
	level := zap.DebugLevel
	if rec.status >= http.StatusBadRequest && info.verb != "" {
		level = zap.WarnLevel
	}
	if ce := s.log.Check(level, "request"); ce != nil {
		fields := []zap.Field{zap.String("verb", info.verb), zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", rec.status), zap.String("pod", info.pod), zap.String("decision", info.decision), zap.Duration("duration", took)}
		if rec.errBody != nil {
			fields = append(fields, zap.ByteString("error", bytes.TrimSpace(rec.errBody)))
		}
		ce.Write(fields...)
	}
}

// handle wraps one verb: readiness check, then the verb's own decode-check-decide-encode.
func (s *Server) handle(verb string, fn func(w http.ResponseWriter, r *http.Request, maxBytes int64)) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		noteVerb(r.Context(), verb)
		if !s.ready.Ready() {
			wire.WriteJSON(w, http.StatusServiceUnavailable, wire.ErrorBody{Error: "extender is not ready: cluster view not synced yet"})
			return
		}
		fn(w, r, s.maxBytes)
	}
}

// handleAlways wraps a verb that needs no synced cluster view.
func (s *Server) handleAlways(verb string, fn func(w http.ResponseWriter, r *http.Request, maxBytes int64)) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		noteVerb(r.Context(), "volcano/"+verb)
		fn(w, r, s.maxBytes)
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	msg := fmt.Sprintf("no such endpoint %s %s", r.Method, r.URL.Path)
	if verb, ok := strings.CutPrefix(r.URL.Path, s.prefix+"/"); ok && !strings.Contains(verb, "/") {
		msg = fmt.Sprintf("unknown verb %q: known verbs are %s, %s, %s, %s", verb, VerbFilter, VerbPrioritize, VerbBind, VerbPreempt)
	}
	wire.WriteJSON(w, http.StatusNotFound, wire.ErrorBody{Error: msg})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	if !s.ready.Ready() {
		wire.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "cluster view not synced"})
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// requestInfo collects what a handler decided, for the access log and the metrics.
type requestInfo struct {
	verb     string
	pod      string
	decision string
	// detailed is true when the access log prints successful requests (debug level).
	detailed bool
}

type requestInfoKey struct{}

// noteDecision records the pod and decision of the request for the access log.
func noteDecision(ctx context.Context, pod, decision string) {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		info.pod, info.decision = pod, decision
	}
}

// noteDecisionOf is noteDecision for filter and prioritize, which answer every pod
// attempt: describe formats the pod and decision only when the access log will print them.
func noteDecisionOf(ctx context.Context, describe func() (pod, decision string)) {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok && info.detailed {
		info.pod, info.decision = describe()
	}
}

// noteVerb records which verb serves the request.
func noteVerb(ctx context.Context, verb string) {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		info.verb = verb
	}
}

// maxLoggedErrorBytes bounds how much of an error answer the access log repeats.
const maxLoggedErrorBytes = 512

// statusRecorder keeps the status of the answer, and the start of its body when it is an
// error (the {"error": ...} that names the problem), for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	errBody []byte
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
