package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cps-extender/cps-extender/priority"
)

// jobMetrics are the metrics of whole jobs, the ones users and SREs ask about first (as
// Kueue's admission_wait_time_seconds and pending workloads): how long jobs wait for their turn
// and until their gang is bound, by tier and PriorityClass; how many wait, by phase and tier;
// how long gangs take to gather at bind; and how many gatherings time out, by gang size.
type jobMetrics struct {
	admissionWait *prometheus.HistogramVec
	boundWait     *prometheus.HistogramVec
	pending       *prometheus.GaugeVec
	starved       prometheus.Gauge
	gather        *prometheus.HistogramVec
	holdTimeouts  *prometheus.CounterVec

	// The label values are bounded: the tiers come from the config, the PriorityClasses from
	// the cluster; past a few dozen of either the rest count as "other".
	tiers, classes boundedLabel

	mu sync.Mutex
	// pendingSet is every phase/tier pair set so far: one that has no job now is set to 0
	// rather than dropped, so that its series does not vanish from dashboards.
	pendingSet map[[2]string]bool
}

// Label values are capped at these many distinct values each.
const (
	maxTierLabels  = 16
	maxClassLabels = 32
	// OtherLabel stands for the values past the cap.
	OtherLabel = "other"
	// NoneLabel is the PriorityClass of pods that name none.
	NoneLabel = "none"
)

// gangSizes are the buckets of cps_extender_hold_timeouts_total's size label, by the gang's
// minimum: small gangs fail for other reasons than large ones.
var gangSizes = []struct {
	upTo  int
	label string
}{{2, "1-2"}, {8, "3-8"}, {32, "9-32"}, {128, "33-128"}, {0, "129+"}}

// waitBuckets reach from a second to a day: jobs wait for their turn minutes to hours.
var waitBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400}

func newJobMetrics(m *Metrics) *jobMetrics {
	j := &jobMetrics{
		admissionWait: m.histogramVec(prometheus.HistogramOpts{
			Name:    "cps_extender_job_admission_wait_seconds",
			Help:    "Time from a job's creation until it first got the turn (admitted), by tier and PriorityClass.",
			Buckets: waitBuckets,
		}, "tier", "priority_class"),
		boundWait: m.histogramVec(prometheus.HistogramOpts{
			Name:    "cps_extender_job_bound_wait_seconds",
			Help:    "Time from a job's creation until its gang was bound (at least its minimum of pods: Running), by tier and PriorityClass.",
			Buckets: waitBuckets,
		}, "tier", "priority_class"),
		pending: m.gaugeVec(prometheus.GaugeOpts{
			Name: "cps_extender_pending_jobs",
			Help: "Jobs not yet running, by phase (waiting, admitted, unschedulable) and tier.",
		}, "phase", "tier"),
		starved: m.gauge(prometheus.GaugeOpts{
			Name: "cps_extender_starved_jobs",
			Help: "Jobs in the queue that have waited longer than model.starvationBound.",
		}),
		gather: m.histogramVec(prometheus.HistogramOpts{
			Name:    "cps_extender_gang_gather_seconds",
			Help:    "Time from a gang's first held bind until its minimum had reached bind and it was released.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 20, 30, 60},
		}),
		holdTimeouts: m.counterVec(prometheus.CounterOpts{
			Name: "cps_extender_hold_timeouts_total",
			Help: "Gangs that did not gather at bind within gate.holdTimeout (nothing of them bound; they cool down), by gang size (minimum members).",
		}, "size"),
		tiers:      boundedLabel{max: maxTierLabels},
		classes:    boundedLabel{max: maxClassLabels},
		pendingSet: map[[2]string]bool{},
	}
	for _, b := range gangSizes {
		j.holdTimeouts.WithLabelValues(b.label)
	}
	j.gather.WithLabelValues()
	return j
}

func (j *jobMetrics) register(reg *prometheus.Registry) {
	reg.MustRegister(j.admissionWait, j.boundWait, j.pending, j.starved, j.gather, j.holdTimeouts)
}

// JobAdmitted records that a job got the turn for the first time, waited after its creation.
func (m *Metrics) JobAdmitted(tier, priorityClass string, waited time.Duration) {
	if m == nil {
		return
	}
	m.jobs.admissionWait.WithLabelValues(m.jobs.tiers.value(tier), m.jobs.classes.value(priorityClass)).Observe(waited.Seconds())
}

// JobBound records that a job's gang was bound (the job runs), waited after its creation.
func (m *Metrics) JobBound(tier, priorityClass string, waited time.Duration) {
	if m == nil {
		return
	}
	m.jobs.boundWait.WithLabelValues(m.jobs.tiers.value(tier), m.jobs.classes.value(priorityClass)).Observe(waited.Seconds())
}

// Pending counts the jobs of one phase and tier that do not run yet.
type Pending struct {
	Phase priority.JobPhase
	Tier  string
}

// PendingJobs sets cps_extender_pending_jobs from counts and cps_extender_starved_jobs.
func (m *Metrics) PendingJobs(counts map[Pending]int, starved int) {
	if m == nil {
		return
	}
	j := m.jobs
	values := map[[2]string]float64{}
	for k, n := range counts {
		values[[2]string{phaseLabel(k.Phase), j.tiers.value(k.Tier)}] += float64(n)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for k := range j.pendingSet {
		if _, ok := values[k]; !ok {
			values[k] = 0
		}
	}
	for k, v := range values {
		j.pendingSet[k] = true
		j.pending.WithLabelValues(k[0], k[1]).Set(v)
	}
	j.starved.Set(float64(starved))
}

// GangGathered records how long a gang took to gather at bind.
func (m *Metrics) GangGathered(took time.Duration) {
	if m == nil {
		return
	}
	m.jobs.gather.WithLabelValues().Observe(took.Seconds())
}

// HoldTimeout counts a gang that failed to gather, by its minimum member count.
func (m *Metrics) HoldTimeout(minMember int) {
	if m == nil {
		return
	}
	m.jobs.holdTimeouts.WithLabelValues(GangSizeLabel(minMember)).Inc()
}

// GangSizeLabel is the size bucket of a gang of minMember pods: "1-2", "3-8", "9-32",
// "33-128" or "129+".
func GangSizeLabel(minMember int) string {
	for _, b := range gangSizes {
		if b.upTo == 0 || minMember <= b.upTo {
			return b.label
		}
	}
	return strconv.Itoa(minMember) // not reached: the last bucket has no bound
}

// boundedLabel lets through the first max distinct values of a label and maps the rest to
// OtherLabel, so that a cluster with many PriorityClasses cannot grow the series without end.
type boundedLabel struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool
}

func (b *boundedLabel) value(v string) string {
	if v == "" {
		return NoneLabel
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[v] {
		return v
	}
	if len(b.seen) >= b.max {
		return OtherLabel
	}
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[v] = true
	return v
}
