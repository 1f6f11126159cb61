package eval

import (
	"time"
)

// DeadlockWindow is how long a run must make no progress, in the deadlock state, for
// Deadlocks to count an episode (simulated time: 5 real seconds).
const DeadlockWindow = 5 * time.Minute

// Stat is a wait statistic in simulated minutes over N jobs, Censored of which never got
// fully bound (their wait, until the run's end, is a lower bound).
type Stat struct {
	N        int
	Censored int
	Mean     float64
	P95      float64
	Max      float64
}

// Summary is one setup's figures.
type Summary struct {
	Setup      string
	Jobs       int
	Completed  int
	PartialEnd int // jobs partly bound when the run ended
	Wait       Stat
	// Groups holds the wait by report group (see GroupNames).
	Groups map[string]Stat
	// MeanJCT is over completed jobs, in minutes.
	MeanJCT float64
	// PartialJobs counts jobs that were partly bound for longer than PartialGrace in all;
	// PartialMin, WasteGPUMin and WasteCPUMin add up their partial time and the GPU- and
	// CPU-minutes held meanwhile.
	PartialJobs int
	PartialMin  float64
	WasteGPUMin float64
	// TeardownGPUMin adds up the GPU-minutes held while preempted runs went (see
	// JobRecord.Teardown): not waste of a placement, but not free either.
	TeardownGPUMin float64
	WasteCPUMin    float64
	Deadlocks      int
	Restarts       int
	// LocalityNode and LocalityRack are the shares of bound workers on a PS's node, and on a
	// PS's node or rack: placed as when the job started, or as at the run's end for a job
	// that never ran.
	LocalityNode float64
	LocalityRack float64
	// Makespan is the last completion when every job completed; else the run's end and
	// Incomplete > 0.
	Makespan    time.Duration
	Incomplete  int
	Utilisation float64
}

// PartialGrace is how long a job may be partly bound without counting as partially placed:
// a gang's pods bind one after another, and the Bindings of a released gang land over up to
// ~0.7 real seconds on a loaded 2-core machine. One simulated minute is one real second.
const PartialGrace = time.Minute

// GroupNames lists the report groups in order: tiers, priority groups, gang-size buckets.
func GroupNames() []string {
	out := make([]string, 0, 10)
	for _, t := range Tiers {
		out = append(out, "tier "+t)
	}
	out = append(out, "urgent")
	for _, c := range PriorityClasses {
		out = append(out, c.Name)
	}
	return append(out, "gang 3-5", "gang 6-12", "gang 13-36")
}

// groupsOf lists the report groups a job belongs to.
func groupsOf(j Job) []string {
	return []string{"tier " + j.Tier, j.ClassOf(), j.SizeBucket()}
}

// Summarize computes a run's figures.
func Summarize(run Run) Summary {
	s := Summary{Setup: run.Setup, Jobs: len(run.Jobs), Groups: map[string]Stat{}}
	waits := map[string][]float64{}
	censored := map[string]int{}
	var all, jcts []float64
	allCensored := 0
	workers, nearNode, nearRack := 0, 0.0, 0.0
	lastDone := time.Duration(0)
	for _, r := range run.Jobs {
		w, cens := r.Wait(run.End)
		m := Minutes(w)
		all = append(all, m)
		for _, g := range groupsOf(r.Job) {
			waits[g] = append(waits[g], m)
			if cens {
				censored[g]++
			}
		}
		if cens {
			allCensored++
		}
		if jct, ok := r.JCT(); ok {
			s.Completed++
			jcts = append(jcts, Minutes(jct))
			lastDone = max(lastDone, r.Completed)
		}
		if r.PartialAtEnd() {
			s.PartialEnd++
		}
		partial, gpu, cpu := r.Waste(run.End)
		if partial > PartialGrace {
			s.PartialJobs++
			s.PartialMin += partial.Minutes()
			s.WasteGPUMin += gpu
			s.WasteCPUMin += cpu
		}
		_, tdGPU := r.Teardown(run.End)
		s.TeardownGPUMin += tdGPU
		s.Restarts += r.Restarts
		if len(r.Placement.Workers) > 0 {
			n, k := r.Placement.Locality()
			c := len(r.Placement.Workers)
			workers += c
			nearNode += n * float64(c)
			nearRack += k * float64(c)
		}
	}
	s.Wait = stat(all, allCensored)
	for g, xs := range waits {
		s.Groups[g] = stat(xs, censored[g])
	}
	s.MeanJCT = Mean(jcts)
	if workers > 0 {
		s.LocalityNode, s.LocalityRack = nearNode/float64(workers), nearRack/float64(workers)
	}
	s.Incomplete = s.Jobs - s.Completed
	s.Makespan = lastDone
	if s.Incomplete > 0 {
		s.Makespan = run.End
	}
	s.Deadlocks = Deadlocks(run.Samples, DeadlockWindow)
	s.Utilisation = Utilisation(run.Samples, run.GPUs, s.Makespan)
	return s
}

func stat(xs []float64, censored int) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	mx := 0.0
	for _, x := range xs {
		mx = max(mx, x)
	}
	return Stat{N: len(xs), Censored: censored, Mean: Mean(xs), P95: Percentile(xs, 0.95), Max: mx}
}
