package eval

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"
)

// figures are the numbers of one synthetic run, for threeSeeds.
type figures struct {
	wait, p95, jct float64
	censored       int
	completed      int
	makespan       time.Duration
	restarts       int
	node, rack     float64
	urgentJobs     int
	urgentWait     float64
	urgentCensored int
}

func (f figures) summary(setup string) Summary {
	s := Summary{Setup: setup, Jobs: 120, Completed: f.completed, Incomplete: 120 - f.completed,
		Wait:    Stat{N: 120, Censored: f.censored, Mean: f.wait, P95: f.p95, Max: f.p95 + 5},
		MeanJCT: f.jct, Makespan: f.makespan, Restarts: f.restarts, LocalityNode: f.node, LocalityRack: f.rack,
		Utilisation: 0.5, Groups: map[string]Stat{"tier gold": {N: 20, Mean: f.wait + 1}}}
	if f.urgentJobs > 0 {
		s.Groups["urgent"] = Stat{N: f.urgentJobs, Censored: f.urgentCensored, Mean: f.urgentWait}
	}
	return s
}

// threeSeeds is a synthetic evaluation of three setups on seeds 2020-2022: plain stops with
// jobs unbound; cps-strict waits exactly one minute longer than cps-reserve on every seed,
// while the seeds spread both; seed 2022 drew no urgent job.
func threeSeeds() Comparison {
	seeds := []uint64{2020, 2021, 2022}
	plain := []figures{
		{wait: 50, p95: 170, censored: 30, completed: 0, makespan: 195 * m, node: 0.04, rack: 0.2, urgentJobs: 9, urgentWait: 90, urgentCensored: 5},
		{wait: 60, p95: 175, censored: 36, completed: 84, jct: 33, makespan: 200 * m, node: 0.05, rack: 0.2, urgentJobs: 7, urgentWait: 80, urgentCensored: 3},
		{wait: 58, p95: 160, censored: 33, completed: 87, jct: 31, makespan: 190 * m, node: 0.03, rack: 0.2},
	}
	reserve := []figures{
		{wait: 5, p95: 20, completed: 120, jct: 22, makespan: 95 * m, restarts: 0, node: 0.6, rack: 0.8, urgentJobs: 9, urgentWait: 1.5},
		{wait: 6, p95: 24, completed: 120, jct: 23, makespan: 100 * m, restarts: 1, node: 0.6, rack: 0.8, urgentJobs: 7, urgentWait: 2},
		{wait: 7, p95: 28, completed: 120, jct: 24, makespan: 105 * m, restarts: 2, node: 0.6, rack: 0.8},
	}
	perSeed := make([][]Summary, len(seeds))
	for i := range seeds {
		strict := reserve[i]
		strict.wait++
		strict.restarts = 0
		strict.node -= 0.1
		perSeed[i] = []Summary{plain[i].summary("plain"), strict.summary("cps-strict"), reserve[i].summary("cps-reserve")}
	}
	c, err := Compare(seeds, perSeed, "cps-reserve")
	if err != nil {
		panic(err)
	}
	return c
}

func TestMarkdownSeeds(t *testing.T) {
	var md bytes.Buffer
	if err := Markdown(&md, threeSeeds()); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", md.String())
	for _, want := range []string{
		"Seeds 2020, 2021, 2022 (n = 3)", "Student's t, 2 degrees of freedom",
		// 6 ± 4.303·1/√3; 120 on every seed is a plain value; plain completed nothing on
		// seed 2020, so its mean JCT is over two seeds.
		"| cps-reserve | 120/120 | 6.0 ± 2.5 | 24.0 ± 9.9 | 29.0 ± 9.9 | 23.0 ± 2.5 | 100 ± 12 | 50% | 0 | 0 | 0 | 0 | 1.0 ± 2.5 | 0 | 60% | 80% |",
		"| plain | 57.0 ± 122.7/120 | 56.0 ± 13.1 +99 |",
		"| 32.0 ± 12.7 (2/3 seeds) | 195 ± 12 (3/3 seeds stopped, 189 incomplete) |",
		"| 4% ± 2 | 20% |",
		// Groups: 16 urgent jobs over the seeds; seed 2022 has none.
		"| urgent | 16 | 85.0 ± 63.5 (2/3 seeds) +8 | 1.8 ± 3.2 (2/3 seeds) | 1.8 ± 3.2 (2/3 seeds) |",
		"| tier gold | 60 |",
		"| setup | seed 2020 | seed 2021 | seed 2022 |", "| plain | 50.0 +30 | 60.0 +36 | 58.0 +33 |", "| cps-strict | 6.0 | 7.0 | 8.0 |",
		"Paired with cps-reserve:",
		"| setup | mean wait | p95 wait | mean JCT | makespan | preempted runs | workers on PS node |",
		"| cps-strict | +1.0 on every seed, higher | the same on every seed | the same on every seed | the same on every seed | -1.0 [-3.5, +1.5] no clear difference | -10 on every seed, lower |",
		"| plain | +50.0 [+38.6, +61.4] higher | +144.3 [+117.8, +170.9] higher | +8.5 [-10.6, +27.6] no clear difference |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(md.String(), "| cps-reserve | +") {
		t.Error("the default setup is paired with itself")
	}
}

func TestMarkdownWithoutDefault(t *testing.T) {
	c := threeSeeds()
	c.Default = "cps-besteffort"
	var md bytes.Buffer
	if err := Markdown(&md, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "cps-besteffort did not run: no paired comparison.") || strings.Contains(md.String(), "Paired with") {
		t.Errorf("without the default setup:\n%s", md.String())
	}
}

func TestSigned(t *testing.T) {
	for _, c := range []struct {
		unit Unit
		x    float64
		want string
	}{
		{UnitMinutes, 1.25, "+1.2"}, {UnitMinutes, -1.25, "-1.2"}, {UnitMinutes, -0.01, "0.0"}, {UnitMinutes, 0.01, "0.0"},
		{UnitShare, 0.052, "+5"}, {UnitShare, -0.004, "0"}, {UnitWholeMinutes, -12.4, "-12"}, {UnitCount, 2, "+2.0"},
	} {
		if got := signed(c.unit, c.x); got != c.want {
			t.Errorf("signed(%v, %v) = %q, want %q", c.unit, c.x, got, c.want)
		}
	}
}

func TestWriteIntervals(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteIntervals(&buf, threeSeeds()); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + 3*len(Figures()); len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	find := func(setup, figure string) []string {
		for _, r := range rows {
			if r[0] == setup && r[1] == figure {
				return r
			}
		}
		t.Fatalf("no row for %s %s", setup, figure)
		return nil
	}
	for _, c := range []struct {
		setup, figure string
		want          string
	}{
		{"cps-strict", "mean wait", "cps-strict,mean wait,3,7.000,2.484,4.516,9.484,cps-reserve,3,1.000,1.000,1.000,higher"},
		{"cps-reserve", "mean wait", "cps-reserve,mean wait,3,6.000,2.484,3.516,8.484,,,,,,"},
		{"plain", "mean JCT", "plain,mean JCT,2,32.000,12.706,19.294,44.706,cps-reserve,2,8.500,-10.559,27.559,no clear difference"},
		{"plain", "wait gang 3-5", "plain,wait gang 3-5,0,,,,,cps-reserve,0,,,,no interval"},
	} {
		if got := strings.Join(find(c.setup, c.figure), ","); got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.setup, c.figure, got, c.want)
		}
	}
}

func TestMarkdownFloors(t *testing.T) {
	c := threeSeeds()
	c.Floors = &Floors{Rivals: []string{"cps-strict", "plain", "absent"}, Gangs: []string{"cps-strict", "cps-reserve"}, MaxWait: []float64{30, 20, 40}}
	c.Setups[1].PerSeed[1].Deadlocks = 1 // cps-strict on seed 2021
	var md bytes.Buffer
	if err := Markdown(&md, c); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", md.String())
	for _, want := range []string{
		"Floors of cps-reserve, the default",
		"| completed >= cps-strict's | 120 | 120 | yes (3/3 seeds; paired: no clear difference) |",
		// cps-strict waits a minute longer on every seed.
		"| mean wait <= cps-strict's | 6.0 | 7.0 | yes (3/3 seeds; paired: lower) |",
		"| p95 wait <= plain's | 24.0 | 168.3 | yes (3/3 seeds; paired: lower) |",
		// plain completed nothing on seed 2020: JCT is compared on the other two seeds only.
		"| mean JCT <= plain's | 23.5 | 32.0 | yes (2/2 seeds; paired: no clear difference) |",
		"| makespan <= cps-strict's | 100 | 100 | yes (3/3 seeds; paired: no clear difference) |",
		// max waits 25, 29, 33 (p95 + 5): seed 2021's 29 is past its 20.
		"| max wait <= starvation bound + longest run, each seed | 25.0, 29.0, 33.0 | 30, 20, 40 | no (2/3 seeds) |",
		"| 0 deadlocks, partially placed jobs and waste: cps-strict, cps-reserve | 1 runs with any | 0 | no (2/3 seeds) |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if strings.Contains(md.String(), "absent") {
		t.Error("a rival that did not run has a floor row")
	}

	// Bounds for two seeds of three: the floor says it was not checked.
	c.Floors.MaxWait = c.Floors.MaxWait[:2]
	md.Reset()
	if err := Markdown(&md, c); err != nil {
		t.Fatal(err)
	}
	if want := "| max wait <= starvation bound + longest run, each seed | – | – | not checked: 2 bounds for 3 seeds |"; !strings.Contains(md.String(), want) {
		t.Errorf("summary lacks %q", want)
	}
}

func TestLongestRun(t *testing.T) {
	w := Workload{Jobs: []Job{{Base: 10 * time.Minute}, {Base: 20 * time.Minute}, {Base: 5 * time.Minute}}}
	if got, want := w.LongestRun(), time.Duration(float64(20*time.Minute)*FactorCrossRack); got != want {
		t.Errorf("LongestRun = %v, want %v", got, want)
	}
}
