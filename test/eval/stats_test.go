package eval

import (
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestTQuantile975(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{
		{1, 12.706}, {2, 4.303}, {3, 3.182}, {4, 2.776}, {5, 2.571}, {10, 2.228}, {29, 2.045}, {30, 2.042},
		{31, 2.042}, {1000, 2.042}, // past the table: df = 30's value, on the wide side
	} {
		if got := tQuantile975(c.df); got != c.want {
			t.Errorf("t(0.975, %d) = %v, want %v", c.df, got, c.want)
		}
	}
	if got := tQuantile975(0); !math.IsNaN(got) {
		t.Errorf("t(0.975, 0) = %v, want NaN", got)
	}
	for i := 1; i < len(tQuantiles975); i++ {
		if tQuantiles975[i] >= tQuantiles975[i-1] || tQuantiles975[i] <= 1.96 {
			t.Errorf("t table at df %d: %v after %v, want falling towards 1.960", i+1, tQuantiles975[i], tQuantiles975[i-1])
		}
	}
}

func TestMeanInterval(t *testing.T) {
	for _, c := range []struct {
		name    string
		xs      []float64
		want    Interval
		bounded bool
	}{
		{"no value", nil, Interval{}, false},
		{"one value: no interval", []float64{5}, Interval{N: 1, Mean: 5}, false},
		{"two values: s = √2, t = 12.706", []float64{1, 3}, Interval{N: 2, Mean: 2, HalfWidth: 12.706}, true},
		{"three values: s = 2, t = 4.303", []float64{2, 4, 6}, Interval{N: 3, Mean: 4, HalfWidth: 4.303 * 2 / math.Sqrt(3)}, true},
		{"no spread", []float64{7, 7, 7}, Interval{N: 3, Mean: 7}, true},
		{"no spread, not even by rounding", []float64{0.1, 0.1, 0.1}, Interval{N: 3, Mean: 0.1}, true},
	} {
		got := MeanInterval(c.xs)
		if got.N != c.want.N || !near(got.Mean, c.want.Mean) || !near(got.HalfWidth, c.want.HalfWidth) || got.Bounded() != c.bounded {
			t.Errorf("%s: MeanInterval(%v) = %+v (bounded %v), want %+v (bounded %v)", c.name, c.xs, got, got.Bounded(), c.want, c.bounded)
		}
		if !near(got.Lo(), c.want.Mean-c.want.HalfWidth) || !near(got.Hi(), c.want.Mean+c.want.HalfWidth) {
			t.Errorf("%s: [%v, %v]", c.name, got.Lo(), got.Hi())
		}
	}
}

func TestDirectionOf(t *testing.T) {
	for _, c := range []struct {
		diff Interval
		want Direction
	}{
		{Interval{N: 1, Mean: -5}, NoInterval},
		{Interval{N: 3, Mean: -2, HalfWidth: 1}, Lower},
		{Interval{N: 3, Mean: 2, HalfWidth: 1}, Higher},
		{Interval{N: 3, Mean: -2, HalfWidth: 2.5}, NoClearDifference},
		{Interval{N: 3, Mean: -2, HalfWidth: 2}, NoClearDifference}, // touches 0: does not exclude it
		{Interval{N: 3}, NoClearDifference},                         // the same on every seed
		{Interval{N: 3, Mean: -3}, Lower},                           // always 3 lower: no spread, clear
	} {
		if got := DirectionOf(c.diff); got != c.want {
			t.Errorf("DirectionOf(%+v) = %v, want %v", c.diff, got, c.want)
		}
	}
}

// seedSummary is a summary with the figures the tests below read.
func seedSummary(setup string, meanWait float64, completed int, urgentJobs int) Summary {
	s := Summary{Setup: setup, Jobs: 10, Completed: completed, Wait: Stat{N: 10, Mean: meanWait}, Groups: map[string]Stat{}}
	if completed > 0 {
		s.MeanJCT = 2 * meanWait
	}
	if urgentJobs > 0 {
		s.Groups["urgent"] = Stat{N: urgentJobs, Mean: meanWait / 2}
	}
	return s
}

func TestAcrossAndPaired(t *testing.T) {
	base := SetupSeeds{Setup: "base", PerSeed: []Summary{
		seedSummary("base", 10, 10, 1), seedSummary("base", 20, 10, 1), seedSummary("base", 30, 10, 0)}}
	for _, c := range []struct {
		name    string
		perSeed []Summary
		figure  Figure
		across  Interval
		paired  Interval
		dir     Direction
	}{
		{
			// The seeds spread the setup's own mean widely, but it is always 2 ± 1 below the base.
			name:    "paired removes the workload's spread",
			perSeed: []Summary{seedSummary("a", 8, 10, 1), seedSummary("a", 19, 10, 1), seedSummary("a", 27, 10, 0)},
			figure:  FigMeanWait,
			across:  Interval{N: 3, Mean: 18, HalfWidth: 4.303 * math.Sqrt(91) / math.Sqrt(3)},
			paired:  Interval{N: 3, Mean: -2, HalfWidth: 4.303 / math.Sqrt(3)},
			dir:     NoClearDifference, // -2 ± 2.48 holds 0
		},
		{
			name:    "always 3 lower",
			perSeed: []Summary{seedSummary("a", 7, 10, 1), seedSummary("a", 17, 10, 1), seedSummary("a", 27, 10, 0)},
			figure:  FigMeanWait,
			across:  Interval{N: 3, Mean: 17, HalfWidth: 4.303 * 10 / math.Sqrt(3)},
			paired:  Interval{N: 3, Mean: -3},
			dir:     Lower,
		},
		{
			// Seed 1 completed nothing: no mean JCT there, left out rather than counted as 0.
			name:    "a seed without the figure",
			perSeed: []Summary{seedSummary("a", 12, 10, 1), seedSummary("a", 25, 0, 1), seedSummary("a", 34, 10, 0)},
			figure:  FigMeanJCT,
			across:  Interval{N: 2, Mean: 46, HalfWidth: 12.706 * math.Sqrt(2*22*22) / math.Sqrt(2)},
			paired:  Interval{N: 2, Mean: 6, HalfWidth: 12.706 * math.Sqrt(2*2*2) / math.Sqrt(2)},
			dir:     NoClearDifference,
		},
		{
			// The third seed's workload drew no urgent job.
			name:    "a group absent from a seed",
			perSeed: []Summary{seedSummary("a", 12, 10, 1), seedSummary("a", 24, 10, 1), seedSummary("a", 34, 10, 0)},
			figure:  FigUrgentWait,
			across:  Interval{N: 2, Mean: 9, HalfWidth: 12.706 * math.Sqrt(2*3*3) / math.Sqrt(2)},
			paired:  Interval{N: 2, Mean: 1.5, HalfWidth: 12.706 * 0.5},
			dir:     NoClearDifference,
		},
		{
			name:    "one seed: no interval",
			perSeed: []Summary{seedSummary("a", 12, 10, 1)},
			figure:  FigMeanWait,
			across:  Interval{N: 1, Mean: 12},
			paired:  Interval{N: 1, Mean: 2},
			dir:     NoInterval,
		},
	} {
		s := SetupSeeds{Setup: "a", PerSeed: c.perSeed}
		got := s.Across(c.figure)
		if got.N != c.across.N || !near(got.Mean, c.across.Mean) || !near(got.HalfWidth, c.across.HalfWidth) {
			t.Errorf("%s: Across(%s) = %+v, want %+v", c.name, c.figure.Name, got, c.across)
		}
		diff := s.PairedWith(base, c.figure)
		if diff.N != c.paired.N || !near(diff.Mean, c.paired.Mean) || !near(diff.HalfWidth, c.paired.HalfWidth) {
			t.Errorf("%s: PairedWith(%s) = %+v, want %+v", c.name, c.figure.Name, diff, c.paired)
		}
		if dir := DirectionOf(diff); dir != c.dir {
			t.Errorf("%s: %v, want %v", c.name, dir, c.dir)
		}
	}
}

func TestFigures(t *testing.T) {
	figs := Figures()
	if len(figs) != len(RunFigures)+len(GroupNames()) {
		t.Fatalf("%d figures, want %d run figures and one per group", len(figs), len(RunFigures))
	}
	names := map[string]bool{}
	for _, f := range figs {
		if names[f.Name] {
			t.Errorf("figure %q twice", f.Name)
		}
		names[f.Name] = true
	}
	if !names[FigUrgentWait.Name] {
		t.Errorf("no %q among %v", FigUrgentWait.Name, names)
	}
	s := Summarize(twoRuns()[0])
	for _, c := range []struct {
		figure Figure
		want   float64
	}{
		{FigCompleted, 2}, {FigMeanWait, s.Wait.Mean}, {FigMakespan, 15}, {FigUtilisation, s.Utilisation},
		{FigLocalityNode, 0.5}, {FigPreempted, 0}, {FigUrgentWait, 9}, {GroupWait("tier gold"), 0},
	} {
		if got, ok := c.figure.Of(s); !ok || !near(got, c.want) {
			t.Errorf("%s = %v (ok %v), want %v", c.figure.Name, got, ok, c.want)
		}
	}
	if _, ok := GroupWait("tier silver").Of(s); ok {
		t.Error("a group without jobs has a mean wait")
	}
}

func TestCompare(t *testing.T) {
	a0, b0 := seedSummary("a", 1, 1, 0), seedSummary("b", 2, 1, 0)
	a1, b1 := seedSummary("a", 3, 1, 0), seedSummary("b", 4, 1, 0)
	for _, c := range []struct {
		name    string
		seeds   []uint64
		perSeed [][]Summary
		err     string
	}{
		{"two seeds, two setups", []uint64{7, 8}, [][]Summary{{a0, b0}, {a1, b1}}, ""},
		{"a seed short of a setup", []uint64{7, 8}, [][]Summary{{a0, b0}, {a1}}, "seed 8 ran 1 setups"},
		{"setups in another order", []uint64{7, 8}, [][]Summary{{a0, b0}, {b1, a1}}, "seed 8 ran b where seed 7 ran a"},
		{"seeds and runs disagree", []uint64{7}, [][]Summary{{a0}, {a1}}, "1 seeds, 2 sets"},
	} {
		got, err := Compare(c.seeds, c.perSeed, "b")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got.Setups) != 2 || got.Setups[0].Setup != "a" || len(got.Setups[0].PerSeed) != 2 || got.Setups[0].PerSeed[1].Wait.Mean != 3 {
			t.Errorf("%s: %+v", c.name, got.Setups)
		}
		if base, ok := got.Base(); !ok || base.Setup != "b" {
			t.Errorf("%s: Base() = %v, %v; want b", c.name, base.Setup, ok)
		}
	}
	if _, ok := (Comparison{Setups: []SetupSeeds{{Setup: "a"}}, Default: "b"}).Base(); ok {
		t.Error("Base() found a default that did not run")
	}
}
