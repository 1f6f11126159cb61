package eval

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// WriteCSV writes one row per job of run: its shape, user and priority, and its figures in
// simulated minutes (empty when the moment never came); last, the job's namespace (its
// user's), which with the job's name is its key.
func WriteCSV(w io.Writer, run Run) error {
	cw := csv.NewWriter(w)
	header := []string{"job", "user", "tier", "priority_class", "urgent", "ps", "workers", "arrival_min", "base_min",
		"wait_min", "wait_censored", "all_bound_min", "completed_min", "jct_min", "partial_min", "waste_gpu_min", "waste_cpu_min",
		"locality_node", "locality_rack", "run_factor", "restarts", "partial_at_end", "teardown_min", "teardown_gpu_min", "namespace"}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range run.Jobs {
		j := r.Job
		wait, cens := r.Wait(run.End)
		partial, gpu, cpu := r.Waste(run.End)
		teardown, tdGPU := r.Teardown(run.End)
		row := []string{j.Name, j.User, j.Tier, j.PriorityClass, strconv.FormatBool(j.Urgent),
			strconv.Itoa(j.PS), strconv.Itoa(j.Workers), num(Minutes(j.Arrival)), num(Minutes(j.Base)),
			num(Minutes(wait)), strconv.FormatBool(cens), moment(r.AllBound), moment(r.Completed), "",
			num(partial.Minutes()), num(gpu), num(cpu), "", "", "", strconv.Itoa(r.Restarts), strconv.FormatBool(r.PartialAtEnd()),
			num(teardown.Minutes()), num(tdGPU), j.Namespace()}
		if jct, ok := r.JCT(); ok {
			row[13] = num(Minutes(jct))
		}
		if len(r.Placement.Workers) > 0 {
			n, k := r.Placement.Locality()
			row[17], row[18], row[19] = num(n), num(k), num(r.Placement.RunFactor())
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

func moment(d time.Duration) string {
	if d == Never {
		return ""
	}
	return num(Minutes(d))
}

// IntervalsCSV is the file WriteIntervals is meant for, beside summary.md.
const IntervalsCSV = "intervals.csv"

// pairedFigures are the columns of the report's paired table.
var pairedFigures = []Figure{FigMeanWait, FigP95Wait, FigMeanJCT, FigMakespan, FigPreempted, FigLocalityNode}

// Markdown writes the comparison over seeds: the seeds, the run table (per figure the mean
// over the seeds ± the half-width of its 95% interval; the plain value on one seed), the mean
// wait by group, the mean wait on each seed (the spread behind the intervals), and every
// setup paired with the default one.
func Markdown(w io.Writer, c Comparison) error {
	var b strings.Builder
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	rule := func(n int) { b.WriteString("|" + strings.Repeat("---|", n) + "\n") }
	n := len(c.Seeds)
	seeds := make([]string, n)
	for i, s := range c.Seeds {
		seeds[i] = strconv.FormatUint(s, 10)
	}
	if n == 1 {
		fmt.Fprintf(&b, "Seed %s (n = 1): one run per setup, so no intervals.\n\n", seeds[0])
	} else {
		fmt.Fprintf(&b, "Seeds %s (n = %d): every setup ran each seed's workload. A cell is the mean over the seeds ± the half-width "+
			"of its 95%% confidence interval (Student's t, %d degrees of freedom; for a share, in percentage points); "+
			"a plain value was the same on every seed.\n\n",
			strings.Join(seeds, ", "), n, n-1)
	}

	row("setup", "completed", "mean wait", "p95 wait", "max wait", "mean JCT (done)", "makespan", "GPU util",
		"deadlocks", "partial at end", "partially placed jobs", "waste GPU·min", "preempted runs", "teardown GPU·min", "workers on PS node", "on PS node or rack")
	rule(16)
	for _, s := range c.Setups {
		censored := 0
		for _, sum := range s.PerSeed {
			censored += sum.Wait.Censored
		}
		row(s.Setup, completed(s), waitCell(cell(s, FigMeanWait), censored), cell(s, FigP95Wait), cell(s, FigMaxWait),
			jct(s), makespan(s), cell(s, FigUtilisation), cell(s, FigDeadlocks), cell(s, FigPartialEnd),
			cell(s, FigPartialJobs), cell(s, FigWasteGPU), cell(s, FigPreempted), cell(s, FigTeardownGPU), cell(s, FigLocalityNode), cell(s, FigLocalityRack))
	}

	b.WriteString("\nMean wait (arrival to all pods bound) by group, simulated minutes; jobs over all seeds; " +
		"`+n` = n jobs, over all seeds, never fully bound (their wait counts until the run's end):\n\n")
	cells := []string{"group", "jobs"}
	for _, s := range c.Setups {
		cells = append(cells, s.Setup)
	}
	row(cells...)
	rule(len(cells))
	for _, g := range GroupNames() {
		jobs := 0
		for i := range n {
			most := 0 // every setup ran the seed's workload: the same jobs
			for _, s := range c.Setups {
				if i < len(s.PerSeed) {
					most = max(most, s.PerSeed[i].Groups[g].N)
				}
			}
			jobs += most
		}
		if jobs == 0 {
			continue
		}
		cells := []string{g, strconv.Itoa(jobs)}
		for _, s := range c.Setups {
			censored := 0
			for _, sum := range s.PerSeed {
				censored += sum.Groups[g].Censored
			}
			cells = append(cells, waitCell(cell(s, GroupWait(g)), censored))
		}
		row(cells...)
	}

	if n >= 2 {
		b.WriteString("\nMean wait on each seed, simulated minutes (`+n` as above), the spread behind the intervals:\n\n")
		cells := []string{"setup"}
		for _, s := range seeds {
			cells = append(cells, "seed "+s)
		}
		row(cells...)
		rule(len(cells))
		for _, s := range c.Setups {
			cells := []string{s.Setup}
			for _, sum := range s.PerSeed {
				cells = append(cells, waitCell(f1(sum.Wait.Mean), sum.Wait.Censored))
			}
			row(cells...)
		}
	}

	b.WriteString("\n")
	base, ok := c.Base()
	switch {
	case !ok:
		fmt.Fprintf(&b, "%s did not run: no paired comparison.\n", c.Default)
	case n < 2:
		fmt.Fprintf(&b, "One seed: no paired comparison with %s (it needs two seeds or more).\n", c.Default)
	default:
		fmt.Fprintf(&b, "Paired with %s: on each seed, the setup's figure minus %s's; the mean difference [95%% interval] over the seeds, "+
			"lower or higher where the interval excludes 0, else no clear difference (shares in percentage points):\n\n", c.Default, c.Default)
		cells := []string{"setup"}
		for _, f := range pairedFigures {
			cells = append(cells, f.Name)
		}
		row(cells...)
		rule(len(cells))
		for _, s := range c.Setups {
			if s.Setup == c.Default {
				continue
			}
			cells := []string{s.Setup}
			for _, f := range pairedFigures {
				cells = append(cells, difference(f.Unit, s.PairedWith(base, f)))
			}
			row(cells...)
		}
	}
	writeFloors(&b, c)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteIntervals writes every figure of every setup (see Figures) as a CSV row: the mean over
// the seeds and its 95% interval, and the paired difference with the default setup and its
// interval. Shares are fractions; an empty cell has no value (under two seeds, no interval).
func WriteIntervals(w io.Writer, c Comparison) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"setup", "figure", "seeds", "mean", "half_width", "low", "high",
		"paired_with", "paired_seeds", "diff_mean", "diff_low", "diff_high", "direction"}); err != nil {
		return err
	}
	base, hasBase := c.Base()
	for _, s := range c.Setups {
		for _, f := range Figures() {
			iv := s.Across(f)
			row := append([]string{s.Setup, f.Name}, intervalColumns(iv)...)
			if hasBase && s.Setup != c.Default {
				diff := s.PairedWith(base, f)
				cols := intervalColumns(diff)
				row = append(row, c.Default, cols[0], cols[1], cols[3], cols[4], DirectionOf(diff).String())
			} else {
				row = append(row, "", "", "", "", "", "")
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// intervalColumns are n, mean, half-width, low and high, empty where there is no value.
func intervalColumns(iv Interval) []string {
	out := []string{strconv.Itoa(iv.N), "", "", "", ""}
	if iv.N > 0 {
		out[1] = num(iv.Mean)
	}
	if iv.Bounded() {
		out[2], out[3], out[4] = num(iv.HalfWidth), num(iv.Lo()), num(iv.Hi())
	}
	return out
}

// cell is f of s over the seeds: "mean ± half-width", the plain value on one seed, and how
// many seeds had it when some had not.
func cell(s SetupSeeds, f Figure) string {
	iv := s.Across(f)
	out := intervalCell(f.Unit, iv)
	if iv.N > 0 && iv.N < len(s.PerSeed) {
		out += fmt.Sprintf(" (%d/%d seeds)", iv.N, len(s.PerSeed))
	}
	return out
}

func intervalCell(u Unit, iv Interval) string {
	switch {
	case iv.N == 0:
		return "–"
	case !iv.Bounded() || iv.HalfWidth == 0: // one seed, or the same value on every seed
		return value(u, iv.Mean, false)
	}
	return value(u, iv.Mean, true) + " ± " + magnitude(u, iv.HalfWidth)
}

// difference is a paired difference: "mean [low, high] direction"; the plain difference
// without an interval.
func difference(u Unit, iv Interval) string {
	switch {
	case iv.N == 0:
		return "–"
	case !iv.Bounded():
		return signed(u, iv.Mean) + " (" + DirectionOf(iv).String() + ")"
	case iv.HalfWidth == 0 && iv.Mean == 0:
		return "the same on every seed"
	case iv.HalfWidth == 0:
		return fmt.Sprintf("%s on every seed, %s", signed(u, iv.Mean), DirectionOf(iv))
	}
	return fmt.Sprintf("%s [%s, %s] %s", signed(u, iv.Mean), signed(u, iv.Lo()), signed(u, iv.Hi()), DirectionOf(iv))
}

// value formats x in unit u; mean tells a mean over seeds, where a count gets a decimal.
func value(u Unit, x float64, mean bool) string {
	switch u {
	case UnitWholeMinutes:
		return f0(x)
	case UnitCount:
		if mean {
			return f1(x)
		}
		return f0(x)
	case UnitShare:
		return pct(x)
	}
	return f1(x)
}

// magnitude formats a half-width or a difference in unit u: a share in percentage points.
func magnitude(u Unit, x float64) string {
	if u == UnitShare {
		return f0(100 * x)
	}
	return value(u, x, true)
}

// signed is magnitude with its sign: "+1.5", "-0.3", "0.0" (never "-0.0").
func signed(u Unit, x float64) string {
	s := magnitude(u, x)
	if strings.Trim(s, "-0.") == "" {
		return strings.TrimPrefix(s, "-")
	}
	if x > 0 {
		return "+" + s
	}
	return s
}

func completed(s SetupSeeds) string {
	jobs := 0
	for _, sum := range s.PerSeed {
		jobs = max(jobs, sum.Jobs)
	}
	return fmt.Sprintf("%s/%d", cell(s, FigCompleted), jobs)
}

func jct(s SetupSeeds) string {
	if s.Across(FigMeanJCT).N == 0 {
		return "none done"
	}
	return cell(s, FigMeanJCT)
}

func waitCell(cell string, censored int) string {
	if censored > 0 {
		return fmt.Sprintf("%s +%d", cell, censored)
	}
	return cell
}

// makespan is the makespan's cell, telling how many seeds' runs stopped with jobs incomplete
// (their makespan is the run's end).
func makespan(s SetupSeeds) string {
	stopped, incomplete := 0, 0
	for _, sum := range s.PerSeed {
		if sum.Incomplete > 0 {
			stopped++
			incomplete += sum.Incomplete
		}
	}
	switch {
	case stopped == 0:
		return cell(s, FigMakespan)
	case len(s.PerSeed) == 1:
		return fmt.Sprintf("stopped at %s (%d incomplete)", cell(s, FigMakespan), incomplete)
	}
	return fmt.Sprintf("%s (%d/%d seeds stopped, %d incomplete)", cell(s, FigMakespan), stopped, len(s.PerSeed), incomplete)
}

func f0(x float64) string  { return strconv.FormatFloat(x, 'f', 0, 64) }
func f1(x float64) string  { return strconv.FormatFloat(x, 'f', 1, 64) }
func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 0, 64) + "%" }
