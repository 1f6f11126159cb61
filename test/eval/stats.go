package eval

import (
	"fmt"
	"math"
)

// tQuantiles975 holds Student's t quantiles t_{0.975,df} for df = 1..30 (index df-1): the
// standard two-sided 95% critical values found in any table of the t distribution (e.g. the
// NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2), to three decimals.
var tQuantiles975 = [30]float64{
	12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
}

// tQuantile975 is t_{0.975,df}, the factor of a two-sided 95% interval with df >= 1 degrees
// of freedom. Past the table it keeps df = 30's value: slightly wide (the limit is 1.960),
// never too narrow, and an evaluation of over 31 seeds is not in sight.
func tQuantile975(df int) float64 {
	if df < 1 {
		return math.NaN()
	}
	return tQuantiles975[min(df, len(tQuantiles975))-1]
}

// Interval is a mean over N values with the half-width of its two-sided 95% confidence
// interval by Student's t (df = N-1). Under two values there is no interval: HalfWidth is 0
// and Bounded is false.
type Interval struct {
	N         int
	Mean      float64
	HalfWidth float64
}

// Bounded tells whether the interval exists (two values or more).
func (iv Interval) Bounded() bool { return iv.N >= 2 }

// Lo is the interval's lower end.
func (iv Interval) Lo() float64 { return iv.Mean - iv.HalfWidth }

// Hi is the interval's upper end.
func (iv Interval) Hi() float64 { return iv.Mean + iv.HalfWidth }

// MeanInterval is the mean of xs with its 95% confidence interval, t_{0.975,n-1}·s/√n where s
// is the sample standard deviation. The seeds are few, so the normal's 1.96 would be far too
// narrow (t is 4.303 for three seeds).
func MeanInterval(xs []float64) Interval {
	iv := Interval{N: len(xs), Mean: Mean(xs)}
	if iv.N < 2 {
		return iv
	}
	if same(xs) { // exactly 0 wide, not a rounding error's width: the report says "the same on every seed"
		iv.Mean = xs[0]
		return iv
	}
	squares := 0.0
	for _, x := range xs {
		squares += (x - iv.Mean) * (x - iv.Mean)
	}
	sd := math.Sqrt(squares / float64(iv.N-1))
	iv.HalfWidth = tQuantile975(iv.N-1) * sd / math.Sqrt(float64(iv.N))
	return iv
}

func same(xs []float64) bool {
	for _, x := range xs {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// Direction is what a paired difference's interval says against 0.
type Direction int

const (
	// NoInterval: under two pairs, nothing can be said.
	NoInterval Direction = iota
	// NoClearDifference: the interval holds 0.
	NoClearDifference
	// Lower: the whole interval is below 0.
	Lower
	// Higher: the whole interval is above 0.
	Higher
)

// String names the direction as the report writes it.
func (d Direction) String() string {
	switch d {
	case NoClearDifference:
		return "no clear difference"
	case Lower:
		return "lower"
	case Higher:
		return "higher"
	}
	return "no interval"
}

// DirectionOf reads a difference's interval: lower or higher when it excludes 0.
func DirectionOf(diff Interval) Direction {
	switch {
	case !diff.Bounded():
		return NoInterval
	case diff.Hi() < 0:
		return Lower
	case diff.Lo() > 0:
		return Higher
	}
	return NoClearDifference
}

// Unit is how a figure is measured, for the report's formatting.
type Unit int

const (
	// UnitMinutes is simulated minutes, shown to a tenth.
	UnitMinutes Unit = iota
	// UnitWholeMinutes is simulated minutes or GPU·minutes large enough to show whole.
	UnitWholeMinutes
	// UnitCount is a number of jobs, runs or episodes: whole on one seed, a tenth as a mean.
	UnitCount
	// UnitShare is a fraction in [0, 1], shown in percent (its intervals and differences in
	// percentage points).
	UnitShare
)

// Figure is one number of a Summary, compared across seeds.
type Figure struct {
	Name string
	Unit Unit
	// Of reads the figure from a run's summary; ok is false when the run has none (a mean
	// JCT with no job done, a group with no job in the seed's workload), and that seed is
	// left out of the figure's mean rather than counted as 0.
	Of func(Summary) (value float64, ok bool)
}

func always(name string, unit Unit, of func(Summary) float64) Figure {
	return Figure{Name: name, Unit: unit, Of: func(s Summary) (float64, bool) { return of(s), true }}
}

// The figures of a run, in the order of the report's run table.
var (
	FigCompleted      = always("completed", UnitCount, func(s Summary) float64 { return float64(s.Completed) })
	FigMeanWait       = always("mean wait", UnitMinutes, func(s Summary) float64 { return s.Wait.Mean })
	FigP95Wait        = always("p95 wait", UnitMinutes, func(s Summary) float64 { return s.Wait.P95 })
	FigMaxWait        = always("max wait", UnitMinutes, func(s Summary) float64 { return s.Wait.Max })
	FigMeanJCT        = Figure{Name: "mean JCT", Unit: UnitMinutes, Of: func(s Summary) (float64, bool) { return s.MeanJCT, s.Completed > 0 }}
	FigMakespan       = always("makespan", UnitWholeMinutes, func(s Summary) float64 { return Minutes(s.Makespan) })
	FigUtilisation    = always("GPU util", UnitShare, func(s Summary) float64 { return s.Utilisation })
	FigDeadlocks      = always("deadlocks", UnitCount, func(s Summary) float64 { return float64(s.Deadlocks) })
	FigPartialEnd     = always("partial at end", UnitCount, func(s Summary) float64 { return float64(s.PartialEnd) })
	FigPartialJobs    = always("partially placed jobs", UnitCount, func(s Summary) float64 { return float64(s.PartialJobs) })
	FigPartialMinutes = always("partial minutes", UnitWholeMinutes, func(s Summary) float64 { return s.PartialMin })
	FigWasteGPU       = always("waste GPU·min", UnitWholeMinutes, func(s Summary) float64 { return s.WasteGPUMin })
	FigTeardownGPU    = always("teardown GPU·min", UnitWholeMinutes, func(s Summary) float64 { return s.TeardownGPUMin })
	FigPreempted      = always("preempted runs", UnitCount, func(s Summary) float64 { return float64(s.Restarts) })
	FigLocalityNode   = always("workers on PS node", UnitShare, func(s Summary) float64 { return s.LocalityNode })
	FigLocalityRack   = always("on PS node or rack", UnitShare, func(s Summary) float64 { return s.LocalityRack })
	// FigUrgentWait is the urgent jobs' mean wait, the claim urgency is about.
	FigUrgentWait = GroupWait("urgent")
)

// RunFigures lists the figures of a run (not by group), in report order.
var RunFigures = []Figure{FigCompleted, FigMeanWait, FigP95Wait, FigMaxWait, FigMeanJCT, FigMakespan, FigUtilisation,
	FigDeadlocks, FigPartialEnd, FigPartialJobs, FigPartialMinutes, FigWasteGPU, FigTeardownGPU, FigPreempted, FigLocalityNode, FigLocalityRack}

// GroupWait is the mean wait of a report group's jobs (see GroupNames); a seed whose workload
// has no job of the group has no value.
func GroupWait(group string) Figure {
	return Figure{Name: "wait " + group, Unit: UnitMinutes, Of: func(s Summary) (float64, bool) {
		st := s.Groups[group]
		return st.Mean, st.N > 0
	}}
}

// Figures lists every figure: the run's, then each report group's mean wait.
func Figures() []Figure {
	out := append([]Figure(nil), RunFigures...)
	for _, g := range GroupNames() {
		out = append(out, GroupWait(g))
	}
	return out
}

// SetupSeeds is one setup's summaries, one per seed in the order of Comparison.Seeds.
type SetupSeeds struct {
	Setup   string
	PerSeed []Summary
}

// Values lists f on each seed that has it.
func (s SetupSeeds) Values(f Figure) []float64 {
	var xs []float64
	for _, sum := range s.PerSeed {
		if x, ok := f.Of(sum); ok {
			xs = append(xs, x)
		}
	}
	return xs
}

// Across is f's mean over the seeds with its 95% interval; N counts the seeds that have f.
func (s SetupSeeds) Across(f Figure) Interval { return MeanInterval(s.Values(f)) }

// PairedWith is the mean of the per-seed differences f(s) - f(base) with its 95% interval,
// over the seeds where both have f. Both ran the same workload on a seed, so pairing takes
// the workload's share out of the spread: a difference can be clear when the two setups'
// own intervals overlap.
func (s SetupSeeds) PairedWith(base SetupSeeds, f Figure) Interval {
	var diffs []float64
	for i := range min(len(s.PerSeed), len(base.PerSeed)) {
		x, okX := f.Of(s.PerSeed[i])
		y, okY := f.Of(base.PerSeed[i])
		if okX && okY {
			diffs = append(diffs, x-y)
		}
	}
	return MeanInterval(diffs)
}

// Comparison is an evaluation over seeds: every setup's summary on every seed.
type Comparison struct {
	// Seeds are the workload seeds, in run order.
	Seeds []uint64
	// Setups are in report order.
	Setups []SetupSeeds
	// Default names the setup the others are paired with.
	Default string
	// Floors, when set, are checked in the summary.
	Floors *Floors
}

// Compare groups per-seed summaries by setup: perSeed[i] holds the summaries of the runs on
// seeds[i], one per setup. Every seed must have run the same setups in the same order, or
// the pairing by seed would compare different things. def names the setup to pair with.
func Compare(seeds []uint64, perSeed [][]Summary, def string) (Comparison, error) {
	if len(seeds) != len(perSeed) {
		return Comparison{}, fmt.Errorf("%d seeds, %d sets of runs", len(seeds), len(perSeed))
	}
	c := Comparison{Seeds: seeds, Default: def}
	for i, sums := range perSeed {
		if i == 0 {
			for _, s := range sums {
				c.Setups = append(c.Setups, SetupSeeds{Setup: s.Setup})
			}
		}
		if len(sums) != len(c.Setups) {
			return Comparison{}, fmt.Errorf("seed %d ran %d setups, seed %d ran %d", seeds[i], len(sums), seeds[0], len(c.Setups))
		}
		for k, s := range sums {
			if s.Setup != c.Setups[k].Setup {
				return Comparison{}, fmt.Errorf("seed %d ran %s where seed %d ran %s", seeds[i], s.Setup, seeds[0], c.Setups[k].Setup)
			}
			c.Setups[k].PerSeed = append(c.Setups[k].PerSeed, s)
		}
	}
	return c, nil
}

// Base returns the default setup's summaries; ok is false when it did not run.
func (c Comparison) Base() (base SetupSeeds, ok bool) { return c.setup(c.Default) }
