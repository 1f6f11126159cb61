package eval

import (
	"math"
	"sort"
	"time"
)

// Never marks a moment that did not happen (a job never fully bound, never completed).
const Never time.Duration = -1

// PodSpan is one incarnation of a pod on a node, in simulated time from the run's start: bound
// at Bound, gone at End (Never: still there when the run ended).
type PodSpan struct {
	Pod      string // namespace/name
	Node     string
	Bound    time.Duration
	End      time.Duration
	CPUMilli int64
	GPU      int64
}

// JobRecord is what happened to one job in a run, in simulated time from the run's start.
type JobRecord struct {
	Job   Job
	Spans []PodSpan
	// AllBound is the first time every pod of the job was bound (Never if that never happened).
	AllBound time.Duration
	// Completed is when the job finished (Never: it did not finish before the run ended).
	Completed time.Duration
	// Placement is where the pods were when the job (last) started running.
	Placement Placement
	// Restarts counts runs cut short because a pod was preempted.
	Restarts int
}

// Sample is the cluster's state at one moment of a run, as the harness saw it.
type Sample struct {
	At time.Duration
	// Binds and Completions are cumulative counts: progress is a change in either.
	Binds       int
	Completions int
	// Pending jobs have arrived and have no pod bound; Partial jobs some but not all; Running
	// jobs all (and are counting down their run time).
	Pending int
	Partial int
	Running int
	// UsedGPU is the GPUs held by bound pods; UsefulGPU only those of running jobs.
	UsedGPU   int
	UsefulGPU int
}

// Run is the record of one setup's run.
type Run struct {
	Setup string
	// End is when the run stopped; TimedOut tells whether the deadline stopped it and Stuck
	// whether it stopped because nothing could progress any more.
	End      time.Duration
	TimedOut bool
	Stuck    bool
	GPUs     int
	Jobs     []JobRecord
	Samples  []Sample
}

// Wait is the time from arrival until every pod was bound; for a job never fully bound it is
// the time until the run's end, and censored is true (a lower bound).
func (r JobRecord) Wait(end time.Duration) (wait time.Duration, censored bool) {
	if r.AllBound == Never {
		return end - r.Job.Arrival, true
	}
	return r.AllBound - r.Job.Arrival, false
}

// JCT is the job completion time, arrival to completion; ok is false for an unfinished job.
func (r JobRecord) JCT() (jct time.Duration, ok bool) {
	if r.Completed == Never {
		return 0, false
	}
	return r.Completed - r.Job.Arrival, true
}

// Waste is the time during which the job had some but not all pods bound, and the GPU- and
// CPU-time its bound pods held meanwhile (resources held without running), up to its
// completion or else the run's end. A teardown is left out: from a pod of a whole job going
// (preempted) until none is bound, when no pod is bound again meanwhile; the job is being
// stopped, not placed, and how long that takes is the pods' deletion, the same under every
// scheduler. Teardown reports it.
func (r JobRecord) Waste(end time.Duration) (partial time.Duration, gpuMin, cpuMin float64) {
	w := r.waste(end)
	return w.partial, w.gpuMin, w.cpuMin
}

// Teardown is the time the job's preempted runs took to go, from their first pod going
// until none was bound, and the GPU-time their bound pods held meanwhile (see Waste).
func (r JobRecord) Teardown(end time.Duration) (time.Duration, float64) {
	w := r.waste(end)
	return w.teardown, w.teardownGPUMin
}

// partTime is time with some but not all of a job's pods bound, and what they held.
type partTime struct {
	partial        time.Duration
	gpuMin, cpuMin float64
	// teardown and teardownGPUMin are the part of it while a preempted run went.
	teardown       time.Duration
	teardownGPUMin float64
}

func (r JobRecord) waste(end time.Duration) partTime {
	stop := end
	if r.Completed != Never {
		stop = r.Completed
	}
	type event struct {
		at       time.Duration
		pods     int
		cpu, gpu int64
	}
	var events []event
	for _, s := range r.Spans {
		if s.Bound >= stop {
			continue
		}
		events = append(events, event{s.Bound, 1, s.CPUMilli, s.GPU})
		if s.End != Never && s.End < stop {
			events = append(events, event{s.End, -1, -s.CPUMilli, -s.GPU})
		}
	}
	sort.SliceStable(events, func(a, b int) bool { return events[a].at < events[b].at })
	size := r.Job.Size()
	var out, going partTime // going: the current fall from whole, not yet known to be a teardown
	falling := false
	settle := func(teardown bool) {
		if teardown {
			out.teardown += going.partial
			out.teardownGPUMin += going.gpuMin
		} else {
			out.partial += going.partial
			out.gpuMin += going.gpuMin
			out.cpuMin += going.cpuMin
		}
		going, falling = partTime{}, false
	}
	bound, cpu, gpu := 0, int64(0), int64(0)
	for i, e := range events {
		if e.pods < 0 && bound == size {
			falling = true
		}
		bound += e.pods
		cpu += e.cpu
		gpu += e.gpu
		switch {
		case falling && e.pods > 0:
			settle(false) // bound again before it emptied: partly placed, not stopped
		case falling && bound == 0:
			settle(true)
		}
		next := stop
		if i+1 < len(events) {
			next = events[i+1].at
		}
		if bound > 0 && bound < size && next > e.at {
			at := &out
			if falling {
				at = &going
			}
			d := next - e.at
			at.partial += d
			at.gpuMin += float64(gpu) * d.Minutes()
			at.cpuMin += float64(cpu) / 1000 * d.Minutes()
		}
	}
	settle(false) // still partly bound at the completion or the run's end
	return out
}

// PartialAt reports whether the job had some but not all pods bound at the end.
func (r JobRecord) PartialAtEnd() bool {
	bound := 0
	for _, s := range r.Spans {
		if s.End == Never {
			bound++
		}
	}
	return r.Completed == Never && bound > 0 && bound < r.Job.Size()
}

// Deadlocks counts deadlock episodes in samples: stretches of at least window in which
// nothing was bound and nothing completed, no job was running (so nothing could complete and
// free resources), and a partially bound job held resources while at least one other job
// waited. An episode ends with the next progress.
func Deadlocks(samples []Sample, window time.Duration) int {
	episodes := 0
	var since time.Duration = Never // start of the current stretch without progress, in deadlock state
	counted := false
	for i, s := range samples {
		progress := i > 0 && (s.Binds != samples[i-1].Binds || s.Completions != samples[i-1].Completions)
		locked := s.Partial >= 1 && s.Partial+s.Pending >= 2 && s.Running == 0
		if progress || !locked {
			since, counted = Never, false
			if !locked {
				continue
			}
		}
		if since == Never {
			since = s.At
		}
		if !counted && s.At-since >= window {
			episodes++
			counted = true
		}
	}
	return episodes
}

// Percentile is the nearest-rank q-quantile (0 < q <= 1) of xs; 0 for no values.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// Mean is the arithmetic mean of xs; 0 for no values.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Utilisation is the time-weighted mean of UsefulGPU/gpus over the samples up to until
// (each sample holds until the next one).
func Utilisation(samples []Sample, gpus int, until time.Duration) float64 {
	if gpus == 0 || len(samples) == 0 {
		return 0
	}
	var area, span float64
	for i, s := range samples {
		if s.At >= until {
			break
		}
		next := until
		if i+1 < len(samples) && samples[i+1].At < until {
			next = samples[i+1].At
		}
		d := (next - s.At).Seconds()
		area += float64(s.UsefulGPU) / float64(gpus) * d
		span += d
	}
	if span == 0 {
		return 0
	}
	return area / span
}
