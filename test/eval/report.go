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
// simulated minutes (empty when the moment never came).
func WriteCSV(w io.Writer, run Run) error {
	cw := csv.NewWriter(w)
	header := []string{"job", "user", "tier", "priority_class", "urgent", "ps", "workers", "arrival_min", "base_min",
		"wait_min", "wait_censored", "all_bound_min", "completed_min", "jct_min", "partial_min", "waste_gpu_min", "waste_cpu_min",
		"locality_node", "locality_rack", "run_factor", "restarts", "partial_at_end"}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range run.Jobs {
		j := r.Job
		wait, cens := r.Wait(run.End)
		partial, gpu, cpu := r.Waste(run.End)
		row := []string{j.Name, j.User, j.Tier, j.PriorityClass, strconv.FormatBool(j.Urgent),
			strconv.Itoa(j.PS), strconv.Itoa(j.Workers), num(Minutes(j.Arrival)), num(Minutes(j.Base)),
			num(Minutes(wait)), strconv.FormatBool(cens), moment(r.AllBound), moment(r.Completed), "",
			num(partial.Minutes()), num(gpu), num(cpu), "", "", "", strconv.Itoa(r.Restarts), strconv.FormatBool(r.PartialAtEnd())}
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

// Markdown writes the comparison of the summaries, side by side: the run table, then the
// waits by group (mean / p95 in simulated minutes).
func Markdown(w io.Writer, sums []Summary) error {
	var b strings.Builder
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	rule := func(n int) { b.WriteString("|" + strings.Repeat("---|", n) + "\n") }

	row("setup", "completed", "mean wait", "p95 wait", "max wait", "mean JCT (done)", "makespan", "GPU util",
		"deadlocks", "partial at end", "partially placed jobs", "waste GPU·min", "preempted runs", "workers on PS node", "on PS node or rack")
	rule(15)
	for _, s := range sums {
		row(s.Setup, fmt.Sprintf("%d/%d", s.Completed, s.Jobs), waitCell(s.Wait.Mean, s.Wait.Censored), f1(s.Wait.P95), f1(s.Wait.Max),
			jct(s), makespan(s), pct(s.Utilisation), strconv.Itoa(s.Deadlocks), strconv.Itoa(s.PartialEnd),
			strconv.Itoa(s.PartialJobs), f0(s.WasteGPUMin), strconv.Itoa(s.Restarts), pct(s.LocalityNode), pct(s.LocalityRack))
	}
	b.WriteString("\nWait (arrival to all pods bound), mean / p95, simulated minutes; `+n` = n jobs never fully bound (their wait counts until the run's end):\n\n")
	cells := []string{"group", "jobs"}
	for _, s := range sums {
		cells = append(cells, s.Setup)
	}
	row(cells...)
	rule(len(cells))
	for _, g := range GroupNames() {
		n := 0
		for _, s := range sums {
			n = max(n, s.Groups[g].N)
		}
		if n == 0 {
			continue
		}
		cells := []string{g, strconv.Itoa(n)}
		for _, s := range sums {
			st := s.Groups[g]
			cells = append(cells, fmt.Sprintf("%s / %s", waitCell(st.Mean, st.Censored), f1(st.P95)))
		}
		row(cells...)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func jct(s Summary) string {
	if s.Completed == 0 {
		return "none done"
	}
	return f1(s.MeanJCT)
}

func waitCell(mean float64, censored int) string {
	if censored > 0 {
		return fmt.Sprintf("%s +%d", f1(mean), censored)
	}
	return f1(mean)
}

func makespan(s Summary) string {
	if s.Incomplete > 0 {
		return fmt.Sprintf("stopped at %s (%d incomplete)", f0(Minutes(s.Makespan)), s.Incomplete)
	}
	return f0(Minutes(s.Makespan))
}

func f0(x float64) string  { return strconv.FormatFloat(x, 'f', 0, 64) }
func f1(x float64) string  { return strconv.FormatFloat(x, 'f', 1, 64) }
func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 0, 64) + "%" }
