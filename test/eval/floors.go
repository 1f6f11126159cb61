package eval

import (
	"fmt"
	"math"
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

// floorFigures are the figures the default must not lose on against a rival; more is
// better for the first (completed jobs), less for the rest.
var floorFigures = []Figure{FigCompleted, FigMeanWait, FigP95Wait, FigMeanJCT, FigMakespan}

// writeFloors adds the floors table to b: one row per floor, with the default's figure, what
// it is held to, and whether it is met. A rival is compared on the seeds where both have the
// figure: "met" compares the means over those seeds, says on how many of them the default
// did as well, and gives the paired comparison's verdict (lower, higher or no clear
// difference).
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
	fmt.Fprintf(b, "\nFloors of %s, the default: each rival's figure against the default's, means over the seeds where both have it; \"k/m seeds\" counts the seeds where the default did as well:\n\n", c.Default)
	row("floor", c.Default, "bar", "met")
	b.WriteString("|---|---|---|---|\n")
	word := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	for k, f := range floorFigures {
		more := k == 0
		for _, name := range fl.Rivals {
			rival, found := c.setup(name)
			if !found {
				continue
			}
			var ours, theirs []float64
			seedsOK := 0
			for i := range min(len(base.PerSeed), len(rival.PerSeed)) {
				x, okX := f.Of(base.PerSeed[i])
				y, okY := f.Of(rival.PerSeed[i])
				if !okX || !okY {
					continue
				}
				ours, theirs = append(ours, x), append(theirs, y)
				if more && x >= y || !more && x <= y {
					seedsOK++
				}
			}
			if len(ours) == 0 {
				row(f.Name+" vs "+name+"'s", "–", "–", "not checked: no seed where both have it")
				continue
			}
			x, y := MeanInterval(ours).Mean, MeanInterval(theirs).Mean
			sign, met := "<=", x <= y
			if more {
				sign, met = ">=", x >= y
			}
			verdict := fmt.Sprintf("%s (%d/%d seeds", word(met), seedsOK, len(ours))
			if diff := base.PairedWith(rival, f); diff.Bounded() {
				verdict += "; paired: " + DirectionOf(diff).String()
			}
			row(f.Name+" "+sign+" "+name+"'s", value(f.Unit, x, x != math.Round(x)), value(f.Unit, y, y != math.Round(y)), verdict+")")
		}
	}
	const maxWaitFloor = "max wait <= starvation bound + longest run, each seed"
	if len(fl.MaxWait) != len(base.PerSeed) {
		row(maxWaitFloor, "–", "–", fmt.Sprintf("not checked: %d bounds for %d seeds", len(fl.MaxWait), len(base.PerSeed)))
	} else if n > 0 {
		var waits, bars []string
		seedsOK := 0
		for i, sum := range base.PerSeed {
			waits, bars = append(waits, f1(sum.Wait.Max)), append(bars, f0(fl.MaxWait[i]))
			if sum.Wait.Max <= fl.MaxWait[i] {
				seedsOK++
			}
		}
		row(maxWaitFloor, strings.Join(waits, ", "), strings.Join(bars, ", "), fmt.Sprintf("%s (%d/%d seeds)", word(seedsOK == n), seedsOK, n))
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
		row("0 deadlocks, partially placed jobs and waste: "+strings.Join(gangs, ", "), strconv.Itoa(bad)+" runs with any", "0", fmt.Sprintf("%s (%d/%d seeds)", word(bad == 0), seedsOK, n))
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
