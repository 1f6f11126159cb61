// Package metrics holds the extender's Prometheus metrics. Every method is nil-safe. It imports only
// Prometheus and the priority model.
package metrics

import (
	"net/http"
	"slices"
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
	refused       *prometheus.CounterVec
	leader        prometheus.Gauge
	duration      *prometheus.HistogramVec
	decisions     *prometheus.CounterVec
	queueJobs     *prometheus.GaugeVec
	queueLength   prometheus.Gauge
	heldBinds     prometheus.Gauge
	bindWaiting   prometheus.Gauge
	bindFailures  prometheus.Counter
	waitingEvents *prometheus.CounterVec
	reloads       *prometheus.CounterVec
	nudges        *prometheus.CounterVec
	lifts         *prometheus.CounterVec
	preemptions   *prometheus.CounterVec
	evictedPods   *prometheus.CounterVec
	viewWaits     *prometheus.HistogramVec
	webhookOn     prometheus.Gauge
	recomputes    prometheus.Histogram
	informers     *informerCollector
	jobs          *jobMetrics
	// names are the metric names served, a histogram's as its series (see Names).
	names []string
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

// New creates the metrics and registers them with reg, which /metrics then serves
// (a private registry: tests stay isolated).
func New(reg *prometheus.Registry) *Metrics {
	m := &Metrics{gatherer: reg}
	m.requests = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_requests_total",
		Help: "Scheduler extender requests by verb and HTTP status code.",
	}, "verb", "code")
	m.refused = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_requests_refused_total",
		Help: "Requests refused by the access check, by kind of endpoint (scheduler, volcano, admin) and HTTP status code (401: no credential that lets the caller in, 403: a credential or an address that does not, 503: a token that could not be checked).",
	}, "kind", "code")
	m.leader = m.gauge(prometheus.GaugeOpts{
		Name: "cps_extender_leader",
		Help: "1 while this replica leads (holds the Lease): it alone evicts, nudges, lifts gates, writes the waiting Events and switches the webhook's calls; 0 while another does.",
	})
	m.duration = m.histogramVec(prometheus.HistogramOpts{
		Name: "cps_extender_request_duration_seconds",
		Help: "Latency of scheduler extender requests by verb (bind includes the time a bind is held).",
		// The hot path answers in well under a millisecond; held binds take seconds. 2 ms
		// is the filter and prioritize budget the load test checks.
		Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30},
	}, "verb")
	m.decisions = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_gate_decisions_total",
		Help: "Gate decisions: filter admitted/waiting; bind passed/gathered/refused/timeout/expired/cancelled/superseded/failed.",
	}, "verb", "outcome")
	m.queueJobs = m.gaugeVec(prometheus.GaugeOpts{
		Name: "cps_extender_queue_jobs",
		Help: "Jobs in the extender's view by state: waiting, admitted, running, unschedulable (cannot fit even with no other job's pods).",
	}, "state")
	m.queueLength = m.gauge(prometheus.GaugeOpts{
		Name: "cps_extender_queue_length",
		Help: "Jobs in the admission queue (admitted or waiting: neither running nor unschedulable).",
	})
	m.heldBinds = m.gauge(prometheus.GaugeOpts{
		Name: "cps_extender_held_binds",
		Help: "Bind requests held while their gang gathers.",
	})
	m.bindWaiting = m.gauge(prometheus.GaugeOpts{
		Name: "cps_extender_bind_requests_waiting",
		Help: "Bind requests the gate holds and has not answered yet: held while their gang gathers, or waiting for their gang's Bindings. Every one is answered: 0 while no gang gathers.",
	})
	m.bindFailures = m.counter(prometheus.CounterOpts{
		Name: "cps_extender_bind_failures_total",
		Help: "Binding calls to the API server that failed.",
	})
	m.waitingEvents = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_waiting_events_total",
		Help: "WaitingForTurn events on pods: sent, or suppressed by the per-pod rate limit.",
	}, "result")
	m.reloads = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_config_reloads_total",
		Help: "Config file changes seen: applied, or rejected as invalid.",
	}, "result")
	m.nudges = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_turn_nudges_total",
		Help: "Writes of the turn annotation on pods the filter had turned away, once their job's turn came: sent, skipped (not needed), failed.",
	}, "result")
	m.lifts = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_turn_gate_lifts_total",
		Help: "Lifts of the cps-extender.io/turn scheduling gate from pending pods whose job got the turn: sent, skipped (the turn passed, or the pod is gone), failed.",
	}, "result")
	m.preemptions = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_preemptions_total",
		Help: "Victim jobs of preemptions by result: evicted (every pod), refused (a PodDisruptionBudget refused it: nothing evicted, the job is protected), partial (refused after some pods passed: the rest get a PreemptionIncomplete Event, the job is protected like a refused one), failed (an API error).",
	}, "result")
	m.evictedPods = m.counterVec(prometheus.CounterOpts{
		Name: "cps_extender_evicted_pods_total",
		Help: "Pods evicted through the Eviction API, by reason (preempted: a whole gang evicted for a job of higher combined priority).",
	}, "reason")
	m.viewWaits = m.histogramVec(prometheus.HistogramOpts{
		Name: "cps_extender_filter_view_wait_seconds",
		Help: "Time the filter held kube-scheduler's scheduling cycle waiting for a newer view snapshot, by cause: unseen (the view had not seen the pod), gathering (the rest of its gang was being created), behind (the snapshot was older than the changes the view had).",
		// Bounded by ViewCatchUp (250 ms); a recompute takes milliseconds.
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5},
	}, "cause")
	m.recomputes = m.histogram(prometheus.HistogramOpts{
		Name:    "cps_extender_queue_recompute_seconds",
		Help:    "Time each recompute of the queue took (informer records to published snapshot): its count is how often the view recomputed, its sum the wall time spent doing so.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	m.webhookOn = m.gauge(prometheus.GaugeOpts{
		Name: "cps_extender_turn_gate_webhook_on",
		Help: "1 while the extender has the API server call the turn-gate webhook on pod creations (a job waits, or waited within webhook.offAfter), 0 while it has switched the calls off.",
	})
	m.informers = &informerCollector{
		syncedDesc: prometheus.NewDesc("cps_extender_informer_synced", "1 when the informer's cache has synced, by informer.", []string{"informer"}, nil),
		readyDesc: prometheus.NewDesc("cps_extender_ready",
			"1 when the extender is ready (as /readyz): its informers have synced, the queue is fresh and no watch has failed for long.", nil, nil),
		ageDesc: prometheus.NewDesc("cps_extender_snapshot_age_seconds",
			"Age of the queue the verbs answer from (it is recomputed on every change and every gate.recomputeInterval): a stuck recompute shows here.", nil, nil),
	}
	m.names = append(m.names, "cps_extender_informer_synced", "cps_extender_ready", "cps_extender_snapshot_age_seconds")
	m.jobs = newJobMetrics(m)
	reg.MustRegister(m.requests, m.refused, m.leader, m.duration, m.decisions, m.queueJobs, m.queueLength, m.heldBinds,
		m.bindWaiting, m.bindFailures, m.waitingEvents, m.reloads, m.nudges, m.lifts, m.preemptions, m.evictedPods, m.viewWaits, m.recomputes, m.webhookOn, m.informers)
	m.jobs.register(reg)
	for _, state := range []priority.JobPhase{priority.PhaseWaiting, priority.PhaseAdmitted, priority.PhaseRunning, priority.PhaseUnschedulable, priority.PhasePreempting} {
		m.queueJobs.WithLabelValues(phaseLabel(state))
	}
	slices.Sort(m.names)
	return m
}

// Names lists the names of the series the extender's own metrics serve, sorted: a
// histogram's _bucket, _sum and _count (the Go runtime and process collectors main adds are
// not among them). The dashboard and alert rules in deploy/monitoring name only these.
func (m *Metrics) Names() []string { return slices.Clone(m.names) }

func (m *Metrics) counterVec(opts prometheus.CounterOpts, labels ...string) *prometheus.CounterVec {
	m.names = append(m.names, opts.Name)
	return prometheus.NewCounterVec(opts, labels)
}

func (m *Metrics) counter(opts prometheus.CounterOpts) prometheus.Counter {
	m.names = append(m.names, opts.Name)
	return prometheus.NewCounter(opts)
}

func (m *Metrics) gauge(opts prometheus.GaugeOpts) prometheus.Gauge {
	m.names = append(m.names, opts.Name)
	return prometheus.NewGauge(opts)
}

func (m *Metrics) gaugeVec(opts prometheus.GaugeOpts, labels ...string) *prometheus.GaugeVec {
	m.names = append(m.names, opts.Name)
	return prometheus.NewGaugeVec(opts, labels)
}

func (m *Metrics) histogramVec(opts prometheus.HistogramOpts, labels ...string) *prometheus.HistogramVec {
	m.names = append(m.names, opts.Name+"_bucket", opts.Name+"_sum", opts.Name+"_count")
	return prometheus.NewHistogramVec(opts, labels)
}

func (m *Metrics) histogram(opts prometheus.HistogramOpts) prometheus.Histogram {
	m.names = append(m.names, opts.Name+"_bucket", opts.Name+"_sum", opts.Name+"_count")
	return prometheus.NewHistogram(opts)
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

// Leader reports whether this replica leads.
func (m *Metrics) Leader(leading bool) {
	if m == nil {
		return
	}
	if leading {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// ObserveRefused counts a request the access check refused.
func (m *Metrics) ObserveRefused(kind string, code int) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(kind, strconv.Itoa(code)).Inc()
}

func (m *Metrics) GateDecision(verb, outcome string) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(verb, outcome).Inc()
}

// BindWaiting adds delta to the bind requests the gate holds unanswered (+1 when one is
// held, -1 when it is answered).
func (m *Metrics) BindWaiting(delta int) {
	if m == nil {
		return
	}
	m.bindWaiting.Add(float64(delta))
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

// TurnLift counts one lift of the turn gate by result (NudgeSent, NudgeSkipped,
// NudgeFailed).
func (m *Metrics) TurnLift(result string) {
	if m == nil {
		return
	}
	m.lifts.WithLabelValues(result).Inc()
}

// TurnGateWebhookOn reports whether the API server is to call the turn-gate webhook.
func (m *Metrics) TurnGateWebhookOn(on bool) {
	if m == nil {
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	m.webhookOn.Set(v)
}

// TurnNudge counts one nudge by result.
func (m *Metrics) TurnNudge(result string) {
	if m == nil {
		return
	}
	m.nudges.WithLabelValues(result).Inc()
}

// The causes of cps_extender_filter_view_wait_seconds.
const (
	ViewWaitUnseen    = "unseen"
	ViewWaitGathering = "gathering"
	ViewWaitBehind    = "behind"
)

// ViewWait observes how long the filter waited for a newer snapshot, by cause.
func (m *Metrics) ViewWait(cause string, took time.Duration) {
	if m == nil {
		return
	}
	m.viewWaits.WithLabelValues(cause).Observe(took.Seconds())
}

// Recomputed observes how long one recompute of the queue took.
func (m *Metrics) Recomputed(took time.Duration) {
	if m == nil {
		return
	}
	m.recomputes.Observe(took.Seconds())
}

// The results counted by cps_extender_preemptions_total.
const (
	PreemptionEvicted = "evicted"
	PreemptionRefused = "refused"
	PreemptionPartial = "partial"
	PreemptionFailed  = "failed"
)

// Preemption counts one victim job's eviction by result.
func (m *Metrics) Preemption(result string) {
	if m == nil {
		return
	}
	m.preemptions.WithLabelValues(result).Inc()
}

// PodsEvicted counts evicted pods by reason.
func (m *Metrics) PodsEvicted(reason string, n int) {
	if m == nil {
		return
	}
	m.evictedPods.WithLabelValues(reason).Add(float64(n))
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
		priority.PhaseUnschedulable: len(q.Unschedulable), priority.PhasePreempting: 0}
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
	case priority.PhasePreempting:
		return "preempting"
	default:
		return "running"
	}
}

// InformerStatus reports, by informer name, whether each informer's cache has synced.
type InformerStatus interface {
	InformersSynced() map[string]bool
}

// ReadyStatus reports whether the extender is ready (as /readyz).
type ReadyStatus interface {
	Ready() bool
}

// SnapshotAger is a ReadyStatus that also tells how old its queue is (false before the
// first): cps_extender_snapshot_age_seconds.
type SnapshotAger interface {
	SnapshotAge() (time.Duration, bool)
}

// WatchReady reports src's readiness as cps_extender_ready, read at every scrape.
func (m *Metrics) WatchReady(src ReadyStatus) {
	if m == nil {
		return
	}
	m.informers.ready.Store(&src)
}

// WatchInformers reports the sync state of src's informers as cps_extender_informer_synced,
// read at every scrape.
func (m *Metrics) WatchInformers(src InformerStatus) {
	if m == nil {
		return
	}
	m.informers.src.Store(&src)
}

// informerCollector reads the informers' sync state and the readiness when scraped.
type informerCollector struct {
	syncedDesc, readyDesc, ageDesc *prometheus.Desc
	src                            atomic.Pointer[InformerStatus]
	ready                          atomic.Pointer[ReadyStatus]
}

func (c *informerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.syncedDesc
	ch <- c.readyDesc
	ch <- c.ageDesc
}

func (c *informerCollector) Collect(ch chan<- prometheus.Metric) {
	if ready := c.ready.Load(); ready != nil {
		v := 0.0
		if (*ready).Ready() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.readyDesc, prometheus.GaugeValue, v)
		if aged, ok := (*ready).(SnapshotAger); ok {
			if age, known := aged.SnapshotAge(); known {
				ch <- prometheus.MustNewConstMetric(c.ageDesc, prometheus.GaugeValue, age.Seconds())
			}
		}
	}
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
		ch <- prometheus.MustNewConstMetric(c.syncedDesc, prometheus.GaugeValue, v, name)
	}
}
