// Package metrics holds the extender's Prometheus metrics. Every method is nil-safe. It imports only
// Prometheus and the priority model.
package metrics

import (
	"net/http"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cps-extender/cps-extender/priority"
)

// Metrics are the extender's Prometheus metrics, served on /metrics. Every method is
// nil-safe, so parts built without metrics (unit tests) need no stub. Labels take only
// bounded values (verbs, outcomes, phases, informer names), never pod or job names.
type Metrics struct {
	gatherer      prometheus.Gatherer
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	decisions     *prometheus.CounterVec
	queueJobs     *prometheus.GaugeVec
	queueLength   prometheus.Gauge
	heldBinds     prometheus.Gauge
	bindFailures  prometheus.Counter
	waitingEvents *prometheus.CounterVec
	reloads       *prometheus.CounterVec
	nudges        *prometheus.CounterVec
	informers     *informerCollector
}

// The results counted by cps_extender_turn_nudges_total.
const (
	NudgeSent    = "sent"    // the pod's TurnAnnotation was written
	NudgeSkipped = "skipped" // not needed: back in the filter by itself, bound, gone, or turned away again
	NudgeFailed  = "failed"  // the write failed (retried a few times)
)

// The gate outcomes counted by cps_extender_gate_decisions_total.
const (
	// filter
	OutcomeAdmitted = "admitted" // the pod may be placed (its job has the turn, runs, or it is in no job)
	OutcomeWaiting  = "waiting"  // the pod's job waits for its turn
	// bind
	OutcomePassed     = "passed"     // bound at once: no job, or the job already runs
	OutcomeGathered   = "gathered"   // held, then bound with its gang
	OutcomeRefused    = "refused"    // the job does not have the turn
	OutcomeTimeout    = "timeout"    // held, and the gang failed: no new member for a hold timeout
	OutcomeExpired    = "expired"    // held a hold timeout while the gang still grew: the scheduler retries it
	OutcomeCancelled  = "cancelled"  // held, and the scheduler dropped the request
	OutcomeSuperseded = "superseded" // held, and a newer bind of the same pod replaced it
	OutcomeFailed     = "failed"     // the Binding failed (or its PS did)
)

// NewMetrics creates the metrics and registers them with reg, which /metrics then serves
// (a private registry: tests stay isolated).
func New(reg *prometheus.Registry) *Metrics {
	m := &Metrics{
		gatherer: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cps_extender_requests_total",
			Help: "Scheduler extender requests by verb and HTTP status code.",
		}, []string{"verb", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cps_extender_request_duration_seconds",
			Help: "Latency of scheduler extender requests by verb (bind includes the time a bind is held).",
			// The hot path answers in well under a millisecond; held binds take seconds. 2 ms
			// is the filter and prioritize budget the load test checks.
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30},
		}, []string{"verb"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cps_extender_gate_decisions_total",
			Help: "Gate decisions: filter admitted/waiting; bind passed/gathered/refused/timeout/expired/cancelled/superseded/failed.",
		}, []string{"verb", "outcome"}),
		queueJobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cps_extender_queue_jobs",
			Help: "Jobs in the extender's view by state: waiting, admitted, running, unschedulable (cannot fit even with no other job's pods).",
		}, []string{"state"}),
		queueLength: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cps_extender_queue_length",
			Help: "Jobs in the admission queue (admitted or waiting: neither running nor unschedulable).",
		}),
		heldBinds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cps_extender_held_binds",
			Help: "Bind requests held while their gang gathers.",
		}),
		bindFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cps_extender_bind_failures_total",
			Help: "Binding calls to the API server that failed.",
		}),
		waitingEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cps_extender_waiting_events_total",
			Help: "WaitingForTurn events on pods: sent, or suppressed by the per-pod rate limit.",
		}, []string{"result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cps_extender_config_reloads_total",
			Help: "Config file changes seen: applied, or rejected as invalid.",
		}, []string{"result"}),
		nudges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cps_extender_turn_nudges_total",
			Help: "Writes of the turn annotation on pods the filter had turned away, once their job's turn came: sent, skipped (not needed), failed.",
		}, []string{"result"}),
		informers: &informerCollector{desc: prometheus.NewDesc("cps_extender_informer_synced",
			"1 when the informer's cache has synced, by informer.", []string{"informer"}, nil)},
	}
	reg.MustRegister(m.requests, m.duration, m.decisions, m.queueJobs, m.queueLength, m.heldBinds,
		m.bindFailures, m.waitingEvents, m.reloads, m.nudges, m.informers)
	for _, state := range []priority.JobPhase{priority.PhaseWaiting, priority.PhaseAdmitted, priority.PhaseRunning, priority.PhaseUnschedulable} {
		m.queueJobs.WithLabelValues(phaseLabel(state))
	}
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

func (m *Metrics) ObserveRequest(verb string, code int, took time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(verb, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(verb).Observe(took.Seconds())
}

func (m *Metrics) GateDecision(verb, outcome string) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(verb, outcome).Inc()
}

func (m *Metrics) BindFailed() {
	if m == nil {
		return
	}
	m.bindFailures.Inc()
}

func (m *Metrics) WaitingEvent(sent bool) {
	if m == nil {
		return
	}
	result := "suppressed"
	if sent {
		result = "sent"
	}
	m.waitingEvents.WithLabelValues(result).Inc()
}

func (m *Metrics) TurnNudge(result string) {
	if m == nil {
		return
	}
	m.nudges.WithLabelValues(result).Inc()
}

func (m *Metrics) ConfigReload(applied bool) {
	if m == nil {
		return
	}
	result := "rejected"
	if applied {
		result = "applied"
	}
	m.reloads.WithLabelValues(result).Inc()
}

// ObserveQueue sets the queue gauges from a computed snapshot.
func (m *Metrics) ObserveQueue(q *priority.Queue, held int) {
	if m == nil || q == nil {
		return
	}
	counts := map[priority.JobPhase]int{priority.PhaseWaiting: 0, priority.PhaseAdmitted: 0, priority.PhaseRunning: len(q.Running),
		priority.PhaseUnschedulable: len(q.Unschedulable)}
	for _, d := range q.Order {
		counts[d.Phase]++
	}
	for phase, n := range counts {
		m.queueJobs.WithLabelValues(phaseLabel(phase)).Set(float64(n))
	}
	m.queueLength.Set(float64(q.Len()))
	m.heldBinds.Set(float64(held))
}

func phaseLabel(p priority.JobPhase) string {
	switch p {
	case priority.PhaseWaiting:
		return "waiting"
	case priority.PhaseAdmitted:
		return "admitted"
	case priority.PhaseUnschedulable:
		return "unschedulable"
	default:
		return "running"
	}
}

// InformerStatus reports, by informer name, whether each informer's cache has synced.
type InformerStatus interface {
	InformersSynced() map[string]bool
}

// WatchInformers reports the sync state of src's informers as cps_extender_informer_synced,
// read at every scrape.
func (m *Metrics) WatchInformers(src InformerStatus) {
	if m == nil {
		return
	}
	m.informers.src.Store(&src)
}

// informerCollector reads the informers' sync state when scraped.
type informerCollector struct {
	desc *prometheus.Desc
	src  atomic.Pointer[InformerStatus]
}

func (c *informerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *informerCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src.Load()
	if src == nil {
		return
	}
	synced := (*src).InformersSynced()
	names := make([]string, 0, len(synced))
	for name := range synced {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := 0.0
		if synced[name] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}
