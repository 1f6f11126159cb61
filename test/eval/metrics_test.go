package eval

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const m = time.Minute

func TestPercentileAndMean(t *testing.T) {
	for _, c := range []struct {
		xs         []float64
		q          float64
		want, mean float64
	}{
		{nil, 0.95, 0, 0},
		{[]float64{7}, 0.95, 7, 7},
		{[]float64{3, 1, 2}, 0.5, 2, 2},
		{[]float64{1, 2, 3, 4}, 0.5, 2, 2.5},
		{[]float64{1, 2, 3, 4}, 1, 4, 2.5},
		{[]float64{10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, 0.95, 19, 10.5},
	} {
		if got := Percentile(c.xs, c.q); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.xs, c.q, got, c.want)
		}
		if got := Mean(c.xs); got != c.mean {
			t.Errorf("Mean(%v) = %v, want %v", c.xs, got, c.mean)
		}
	}
}

func TestDeadlocks(t *testing.T) {
	// locked: partial jobs hold resources, others wait, nothing runs.
	locked := func(at time.Duration, binds int) Sample {
		return Sample{At: at, Binds: binds, Partial: 2, Pending: 1}
	}
	var stuck []Sample
	for i := range 10 {
		stuck = append(stuck, locked(time.Duration(i)*m, 5))
	}
	for _, c := range []struct {
		name    string
		samples []Sample
		want    int
	}{
		{"none", nil, 0},
		{"stuck for 9 minutes", stuck, 1},
		{"stuck shorter than the window", stuck[:5], 0},
		{"binds keep coming", []Sample{locked(0, 1), locked(2*m, 2), locked(4*m, 3), locked(6*m, 4), locked(8*m, 5)}, 0},
		{"a running job may still complete", func() []Sample {
			out := append([]Sample(nil), stuck...)
			for i := range out {
				out[i].Running = 1
			}
			return out
		}(), 0},
		{"one partial job alone is no deadlock", []Sample{{At: 0, Partial: 1}, {At: 10 * m, Partial: 1}}, 0},
		{"two episodes split by progress", append(append(append([]Sample(nil), stuck...), locked(10*m, 6)), locked(16*m, 6)), 2},
		{"a completion is progress", []Sample{locked(0, 1), locked(4*m, 1), {At: 5 * m, Binds: 1, Completions: 1, Partial: 2, Pending: 1}, locked(9*m, 1)}, 0},
		{"a pause in the locked state restarts the clock", []Sample{locked(0, 1), locked(4*m, 1), {At: 4*m + 30*time.Second, Binds: 1, Pending: 3}, locked(6*m, 1), locked(10*m, 1)}, 0},
	} {
		if got := Deadlocks(c.samples, 5*m); got != c.want {
			t.Errorf("%s: %d deadlocks, want %d", c.name, got, c.want)
		}
	}
}

// job3 is a job of 1 PS and 2 workers arriving at 0.
var job3 = Job{Name: "j", PS: 1, Workers: 2, Tier: TierGold, PriorityClass: "eval-high", Base: 10 * m}

func span(bound, end time.Duration, gpu int64) PodSpan {
	return PodSpan{Bound: bound, End: end, CPUMilli: 2000, GPU: gpu}
}

func TestWaste(t *testing.T) {
	for _, c := range []struct {
		name        string
		rec         JobRecord
		end         time.Duration
		partial     time.Duration
		gpu, cpuMin float64
		atEnd       bool
		// teardown and teardownGPU are what Teardown reports.
		teardown    time.Duration
		teardownGPU float64
	}{
		{"bound whole at once", JobRecord{Job: job3, Spans: []PodSpan{span(m, Never, 0), span(m, Never, 1), span(m, Never, 1)}, AllBound: m, Completed: 11 * m}, 20 * m, 0, 0, 0, false, 0, 0},
		{"PS first, workers 2 minutes later", JobRecord{Job: job3, Spans: []PodSpan{span(m, 13*m, 0), span(3*m, 13*m, 1), span(3*m, 13*m, 1)}, AllBound: 3 * m, Completed: 13 * m}, 20 * m, 2 * m, 0, 4, false, 0, 0},
		{"half placed until the end", JobRecord{Job: job3, Spans: []PodSpan{span(0, Never, 0), span(2*m, Never, 1)}, AllBound: Never, Completed: Never}, 10 * m, 10 * m, 8, 2*10 + 2*8, true, 0, 0},
		{"the completion's deletes do not count", JobRecord{Job: job3, Spans: []PodSpan{span(0, 10*m, 0), span(0, 10*m+30*time.Second, 1), span(0, 11*m, 1)}, AllBound: 0, Completed: 10 * m}, 20 * m, 0, 0, 0, false, 0, 0},
		{"a preempted worker", JobRecord{Job: job3, Spans: []PodSpan{span(0, Never, 0), span(0, Never, 1), span(0, 5*m, 1), span(8*m, Never, 1)}, AllBound: 0, Completed: 30 * m, Restarts: 1}, 40 * m, 3 * m, 3, 12, false, 0, 0},
		// PS gone at 5m, a worker at 5m30s, the other at 6m; all three back at 8m: the minute
		// the run took to go is a teardown, not a partial placement.
		{"a preempted run going whole", JobRecord{Job: job3, Spans: []PodSpan{span(0, 5*m, 0), span(0, 5*m+30*time.Second, 1), span(0, 6*m, 1),
			span(8*m, Never, 0), span(8*m, Never, 1), span(8*m, Never, 1)}, AllBound: 0, Completed: 30 * m, Restarts: 1}, 40 * m, 0, 0, 0, false, m, 1.5},
		// The same, but a worker is bound again at 5m45s before the last old one goes at 6m:
		// all of it was a partial placement.
		{"a fall refilled before it empties", JobRecord{Job: job3, Spans: []PodSpan{span(0, 5*m, 0), span(0, 5*m+30*time.Second, 1), span(0, 6*m, 1),
			span(5*m+45*time.Second, Never, 1), span(8*m, Never, 0), span(8*m, Never, 1)}, AllBound: 0, Completed: 30 * m, Restarts: 1}, 40 * m, 3 * m, 2*0.5 + 1*0.25 + 2*0.25 + 1*2, 2*2*0.5 + 2*0.25 + 2*2*0.25 + 2*2, false, 0, 0},
	} {
		partial, gpu, cpu := c.rec.Waste(c.end)
		if td, tdGPU := c.rec.Teardown(c.end); td != c.teardown || math.Abs(tdGPU-c.teardownGPU) > 1e-9 {
			t.Errorf("%s: Teardown = %v, %v GPU·min; want %v, %v", c.name, td, tdGPU, c.teardown, c.teardownGPU)
		}
		if partial != c.partial || math.Abs(gpu-c.gpu) > 1e-9 || math.Abs(cpu-c.cpuMin) > 1e-9 {
			t.Errorf("%s: Waste = %v, %v GPU·min, %v CPU·min; want %v, %v, %v", c.name, partial, gpu, cpu, c.partial, c.gpu, c.cpuMin)
		}
		if got := c.rec.PartialAtEnd(); got != c.atEnd {
			t.Errorf("%s: PartialAtEnd = %v, want %v", c.name, got, c.atEnd)
		}
	}
}

func TestUtilisation(t *testing.T) {
	samples := []Sample{{At: 0, UsefulGPU: 0}, {At: m, UsefulGPU: 8}, {At: 3 * m, UsefulGPU: 4}}
	// 1 minute at 0, 2 at 8/8, 1 at 4/8 over 4 minutes: (0 + 2 + 0.5) / 4.
	if got := Utilisation(samples, 8, 4*m); math.Abs(got-0.625) > 1e-9 {
		t.Errorf("Utilisation = %v, want 0.625", got)
	}
	if got := Utilisation(samples, 8, 2*m); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("Utilisation until 2m = %v, want 0.5", got)
	}
}

// twoRuns is a synthetic comparison: setup "good" runs both jobs whole, "bad" half-places the
// second and deadlocks.
func twoRuns() []Run {
	urgent := Job{Name: "u", PS: 1, Workers: 2, Tier: TierBronze, PriorityClass: UrgentClass.Name, Urgent: true, Arrival: m, Base: 5 * m}
	pl := Placement{PS: []string{"n0"}, Workers: []string{"n0", "n2"}, RackOf: racks}
	good := Run{Setup: "good", End: 20 * m, GPUs: 8, Jobs: []JobRecord{
		{Job: job3, Spans: []PodSpan{span(0, 10*m, 0), span(0, 10*m, 1), span(0, 10*m, 1)}, AllBound: 0, Completed: 10 * m, Placement: pl},
		{Job: urgent, Spans: []PodSpan{span(10*m, 15*m, 0), span(10*m, 15*m, 1), span(10*m, 15*m, 1)}, AllBound: 10 * m, Completed: 15 * m, Placement: pl},
	}, Samples: []Sample{{At: 0, Binds: 3, Running: 1, UsefulGPU: 2}, {At: 10 * m, Binds: 6, Completions: 1, Running: 1, UsefulGPU: 2}, {At: 15 * m, Binds: 6, Completions: 2}}}
	bad := Run{Setup: "bad", End: 20 * m, GPUs: 8, Stuck: true, Jobs: []JobRecord{
		{Job: job3, Spans: []PodSpan{span(0, Never, 0), span(0, Never, 1)}, AllBound: Never, Completed: Never, Placement: Placement{PS: []string{"n0"}, Workers: []string{"n2"}, RackOf: racks}},
		{Job: urgent, Spans: []PodSpan{span(m, Never, 0), span(m, Never, 1)}, AllBound: Never, Completed: Never},
	}}
	for at := time.Duration(0); at <= 20*m; at += m {
		bad.Samples = append(bad.Samples, Sample{At: at, Binds: 4, Partial: 2, UsedGPU: 2})
	}
	return []Run{good, bad}
}

func TestSummarize(t *testing.T) {
	runs := twoRuns()
	good, bad := Summarize(runs[0]), Summarize(runs[1])
	if good.Completed != 2 || good.Deadlocks != 0 || good.PartialEnd != 0 || good.PartialJobs != 0 || good.Makespan != 15*m || good.Incomplete != 0 {
		t.Errorf("good: %+v", good)
	}
	if w := good.Groups["urgent"]; w.N != 1 || w.Mean != 9 || w.Censored != 0 {
		t.Errorf("good urgent wait: %+v, want 9 minutes", w)
	}
	if math.Abs(good.MeanJCT-12) > 1e-9 || math.Abs(good.LocalityNode-0.5) > 1e-9 || math.Abs(good.LocalityRack-0.5) > 1e-9 {
		t.Errorf("good: JCT %v, locality %v/%v; want 12, 0.5/0.5", good.MeanJCT, good.LocalityNode, good.LocalityRack)
	}
	if bad.Completed != 0 || bad.Deadlocks != 1 || bad.PartialEnd != 2 || bad.PartialJobs != 2 || bad.Incomplete != 2 || bad.Makespan != 20*m {
		t.Errorf("bad: %+v", bad)
	}
	if w := bad.Groups["tier gold"]; w.N != 1 || w.Censored != 1 || w.Mean != 20 {
		t.Errorf("bad gold wait: %+v, want 20 minutes censored", w)
	}
	if bad.LocalityNode != 0 || bad.LocalityRack != 0 {
		t.Errorf("bad locality %v/%v, want 0/0 (the one bound worker is in another rack)", bad.LocalityNode, bad.LocalityRack)
	}
}

func TestReport(t *testing.T) {
	runs := twoRuns()
	c, err := Compare([]uint64{8}, [][]Summary{{Summarize(runs[0]), Summarize(runs[1])}}, "good")
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := Markdown(&md, c); err != nil {
		t.Fatal(err)
	}
	// One seed: plain values, as before there were seeds.
	for _, want := range []string{"Seed 8 (n = 1)", "| good | 2/2 |", "| bad | 0/2 |", "stopped at 20 (2 incomplete)", "| urgent | 1 | 9.0 | 19.0 +1 |", "| tier gold | 1 |",
		"One seed: no paired comparison with good"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, runs[1]); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][0] != "job" || rows[1][10] != "true" || rows[1][13] != "" || rows[1][21] != "true" ||
		rows[0][24] != "namespace" || rows[1][24] != NamespaceOf(rows[1][1]) {
		t.Errorf("csv rows: %q", rows)
	}

	for _, seeds := range [][]uint64{{8}, {8, 9, 10}} {
		perSeed := make([][]Run, len(seeds))
		for i := range seeds {
			perSeed[i] = runs
		}
		checkPlots(t, perSeed, seeds)
	}
}

// checkPlots draws the plots of runs on seeds and checks they are readable PNGs.
func checkPlots(t *testing.T, runs [][]Run, seeds []uint64) {
	t.Helper()
	sums := make([][]Summary, len(runs))
	for i, seed := range runs {
		for _, r := range seed {
			sums[i] = append(sums[i], Summarize(r))
		}
	}
	c, err := Compare(seeds, sums, "good")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Plots(dir, runs, c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{WaitCDFPNG, UtilisationPNG, LocalityPNG, WaitsPNG} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
			t.Errorf("%s: %v, too small to read", name, b)
		}
	}
}

func TestCDF(t *testing.T) {
	got := CDF([]float64{3, 1})
	if len(got) != 3 || got[0].Y != 0 || got[1].X != 1 || got[1].Y != 0.5 || got[2].X != 3 || got[2].Y != 1 {
		t.Errorf("CDF = %v", got)
	}
}
