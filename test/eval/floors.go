package eval

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Floors are the bars the default setup must clear, checked in the summary over the seeds.
type Floors struct {
	// Rivals are the setups the default's mean wait, p95 wait, mean JCT and makespan must
	// not exceed, as means over the seeds.
	Rivals []string
	// Gangs are the setups that must never deadlock, leave a job partially placed or waste
	// capacity, on any seed.
	Gangs []string
	// MaxWait is, for each seed, the longest wait the default may give a job: the starvation
	// bound plus the seed's longest run (see Workload.LongestRun), in simulated minutes.
	MaxWait []float64
}

// LongestRun is the run time of the workload's longest job at the slowest placement factor.
func (w Workload) LongestRun() time.Duration {
	var longest time.Duration
	for _, j := range w.Jobs {
		longest = max(longest, j.Base)
	}
	return time.Duration(float64(longest) * FactorCrossRack)
}

// floorFigures are the figures the default must not lose on against a rival.
var floorFigures = []Figure{FigMeanWait, FigP95Wait, FigMeanJCT, FigMakespan}

// writeFloors adds the floors table to b: one row per floor, with the default's figure, what
// it is held to, and whether it is met; "met" compares means over the seeds and says on how
// many seeds the default also did as well.
func writeFloors(b *strings.Builder, c Comparison) {
	fl := c.Floors
	if fl == nil {
		return
	}
	base, ok := c.Base()
	if !ok {
		return
	}
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	n := len(c.Seeds)
	fmt.Fprintf(b, "\nFloors of %s, the default (means over the seeds; \"on k/%d seeds\" counts the seeds where it held too):\n\n", c.Default, n)
	row("floor", c.Default, "bar", "met")
	b.WriteString("|---|---|---|---|\n")
	met := func(ok bool, seedsOK int) string {
		word := "no"
		if ok {
			word = "yes"
		}
		return fmt.Sprintf("%s (on %d/%d seeds)", word, seedsOK, n)
	}
	for _, f := range floorFigures {
		for _, name := range fl.Rivals {
			rival, found := c.setup(name)
			if !found {
				continue
			}
			ours, theirs := base.Across(f), rival.Across(f)
			if ours.N == 0 || theirs.N == 0 {
				continue
			}
			seedsOK := 0
			for i := range min(len(base.PerSeed), len(rival.PerSeed)) {
				x, okX := f.Of(base.PerSeed[i])
				y, okY := f.Of(rival.PerSeed[i])
				if okX && okY && x <= y {
					seedsOK++
				}
			}
			row(f.Name+" <= "+name+"'s", value(f.Unit, ours.Mean, n > 1), value(f.Unit, theirs.Mean, n > 1), met(ours.Mean <= theirs.Mean, seedsOK))
		}
	}
	if len(fl.MaxWait) == len(base.PerSeed) && n > 0 {
		var waits, bars []string
		seedsOK := 0
		for i, sum := range base.PerSeed {
			waits, bars = append(waits, f1(sum.Wait.Max)), append(bars, f0(fl.MaxWait[i]))
			if sum.Wait.Max <= fl.MaxWait[i] {
				seedsOK++
			}
		}
		row("max wait <= starvation bound + longest run, each seed", strings.Join(waits, ", "), strings.Join(bars, ", "), met(seedsOK == n, seedsOK))
	}
	var gangs []string
	bad, seedsOK := 0, 0
	for i := range n {
		clean := true
		for _, name := range fl.Gangs {
			s, found := c.setup(name)
			if !found || i >= len(s.PerSeed) {
				continue
			}
			sum := s.PerSeed[i]
			if sum.Deadlocks+sum.PartialJobs > 0 || sum.WasteGPUMin > 0 {
				clean = false
				bad++
			}
		}
		if clean {
			seedsOK++
		}
	}
	for _, name := range fl.Gangs {
		if _, found := c.setup(name); found {
			gangs = append(gangs, name)
		}
	}
	if len(gangs) > 0 {
		row("0 deadlocks, partially placed jobs and waste: "+strings.Join(gangs, ", "), strconv.Itoa(bad)+" runs with any", "0", met(bad == 0, seedsOK))
	}
}

// setup returns the named setup's summaries.
func (c Comparison) setup(name string) (SetupSeeds, bool) {
	for _, s := range c.Setups {
		if s.Setup == name {
			return s, true
		}
	}
	return SetupSeeds{}, false
}
