// Command eval is `make eval`: for each of -seeds seeds it generates the workload (seed i
// draws with the size's seed + i) and replays it under each scheduler setup (harness.Setups:
// plain kube-scheduler, PriorityClasses, native gang scheduling with and without its rack
// constraint, cps-extender under each policy and without preemption), each on its own fresh
// local control plane, and writes per-job CSVs per seed,
// summary.md with 95% intervals over the seeds, intervals.csv and the PNG plots into a new
// folder under results/eval/.
//
//	CPS_CONTROLPLANE_BIN=$(test/tools/build-controlplane.sh | tail -n1) go run ./test/eval/cmd/eval [-size small|medium|large] [-seeds 3] [-setups a,b] [-docs docs/eval/medium]
//	go run ./test/eval/cmd/eval -again results/eval/<folder> [-docs ...]   # summary and plots again from runs.json
//
// Progress goes to stdout; the framework's messages to eval.log in the results folder.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/eval"
	"github.com/cps-extender/cps-extender/test/eval/harness"
)

func main() {
	size := flag.String("size", "medium", "workload: small, medium or large")
	seeds := flag.Int("seeds", 3, "run every setup on this many workloads, seeded from the size's seed upwards (1: the size's seed alone)")
	setups := flag.String("setups", "", "comma-separated setups (default: all)")
	out := flag.String("out", "results/eval", "results folder; each run writes a timestamped folder in it")
	docs := flag.String("docs", "", "also copy summary.md and the plots into this folder (e.g. docs/eval)")
	again := flag.String("again", "", "write summary.md and the plots of an earlier results folder again from its runs.json, running nothing")
	flag.Parse()
	var err error
	if *again != "" {
		err = rewrite(*again, *docs)
	} else {
		err = run(*size, *seeds, *setups, *out, *docs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}

func run(size string, seeds int, setupList, out, docs string) error {
	if seeds < 1 {
		return fmt.Errorf("-seeds %d: want 1 or more", seeds)
	}
	params, err := eval.Sized(size)
	if err != nil {
		return fmt.Errorf("-size: %w", err)
	}
	chosen := harness.Setups
	if setupList != "" {
		if chosen, err = harness.SetupsNamed(strings.Split(setupList, ",")...); err != nil {
			return err
		}
	}
	framework.KillAllOnSignal()
	dir := filepath.Join(out, time.Now().UTC().Format("20060102-150405")+"-"+size)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "eval.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	binDir, err := os.MkdirTemp("", "cps-eval-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	fmt.Printf("building cps-extender...\n")
	bin, err := framework.BuildExtender(binDir) // no race detector: the evaluation measures timing
	if err != nil {
		return err
	}
	opts := harness.Options{ExtenderBin: bin, Logf: func(format string, args ...any) {
		fmt.Printf("  "+format+"\n", args...)
	}}
	rec := record{}
	began := time.Now()
	for i := range seeds {
		work := eval.Generate(params.Seeded(i))
		seed := fmt.Sprintf("seed %d (%d/%d)", work.Params.Seed, i+1, seeds)
		var runs []eval.Run
		for _, s := range chosen {
			fmt.Printf("%s, %s: %d jobs on %d nodes...\n", seed, s.Name, len(work.Jobs), params.Nodes)
			t := &tb{name: fmt.Sprintf("seed%d/%s", work.Params.Seed, s.Name), log: logFile}
			r, err := runSetup(t, s, work, opts)
			if err != nil {
				kept := ""
				if i > 0 {
					kept = fmt.Sprintf("; -again %s writes the summary of the %d seeds done", dir, i)
				}
				return fmt.Errorf("%s, %s: %w (log %s%s)", seed, s.Name, err, logFile.Name(), kept)
			}
			fmt.Printf("%s, %s: ended at %.0f simulated minutes (timed out %v, stuck %v)\n", seed, s.Name, eval.Minutes(r.End), r.TimedOut, r.Stuck)
			runs = append(runs, r)
		}
		// Saved after every seed: a failure on a later seed keeps the earlier ones for -again.
		rec.Seeds = append(rec.Seeds, seedRecord{Workload: work, Runs: runs})
		rec.Took, rec.Date = time.Since(began), time.Now().UTC()
		if err := saveRuns(dir, rec); err != nil {
			return err
		}
	}
	if err := write(dir, rec); err != nil {
		return err
	}
	fmt.Printf("results in %s\n", dir)
	return publish(dir, docs)
}

// record is runs.json: everything a results folder's summary and plots are made from.
type record struct {
	// Seeds are the workloads and their runs, one per seed in run order.
	Seeds []seedRecord
	Took  time.Duration
	Date  time.Time
}

// seedRecord is one seed's workload and the run of every setup on it.
type seedRecord struct {
	Workload eval.Workload
	Runs     []eval.Run
}

// loadRecord reads runs.json, either format: the current one, or the one before seeds (a
// single Workload and its Runs), read as one seed so that earlier results folders can be
// written again.
func loadRecord(data []byte) (record, error) {
	var file struct {
		record
		Workload *eval.Workload
		Runs     []eval.Run
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return record{}, err
	}
	rec := file.record
	if len(rec.Seeds) == 0 && file.Workload != nil {
		rec.Seeds = []seedRecord{{Workload: *file.Workload, Runs: file.Runs}}
	}
	if len(rec.Seeds) == 0 {
		return record{}, errors.New("no runs")
	}
	return rec, nil
}

func saveRuns(dir string, rec record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "runs.json"), data, 0o644)
}

// rewrite writes the summary and plots of a results folder again from its runs.json.
func rewrite(dir, docs string) error {
	data, err := os.ReadFile(filepath.Join(dir, "runs.json"))
	if err != nil {
		return err
	}
	rec, err := loadRecord(data)
	if err != nil {
		return fmt.Errorf("%s/runs.json: %w", dir, err)
	}
	if err := write(dir, rec); err != nil {
		return err
	}
	return publish(dir, docs)
}

// publish copies the summary and plots into docs, when set.
func publish(dir, docs string) error {
	if docs != "" {
		if err := copyFiles(dir, docs, "summary.md", eval.WaitCDFPNG, eval.UtilisationPNG, eval.LocalityPNG, eval.WaitsPNG); err != nil {
			return err
		}
		fmt.Printf("copied the summary and plots to %s\n", docs)
	}
	return nil
}

// runSetup runs one setup, turning a fatal error into an error, and always stops what the
// setup started.
func runSetup(t *tb, s harness.Setup, work eval.Workload, opts harness.Options) (run eval.Run, err error) {
	defer t.runCleanups()
	defer func() {
		if v := recover(); v != nil {
			f, ok := v.(fatal)
			if !ok {
				panic(v)
			}
			err = errors.New(f.msg)
		}
	}()
	return harness.Run(t, s, work, opts), nil
}

// write writes the per-job CSVs of every seed, summary.md, intervals.csv and the plots.
func write(dir string, rec record) error {
	seeds := make([]uint64, len(rec.Seeds))
	runs := make([][]eval.Run, len(rec.Seeds))
	sums := make([][]eval.Summary, len(rec.Seeds))
	for i, sr := range rec.Seeds {
		seeds[i], runs[i] = sr.Workload.Params.Seed, sr.Runs
		for _, r := range sr.Runs {
			sums[i] = append(sums[i], eval.Summarize(r))
			name := fmt.Sprintf("jobs-%s-seed%d.csv", r.Setup, seeds[i])
			if err := writeFile(filepath.Join(dir, name), func(f *os.File) error { return eval.WriteCSV(f, r) }); err != nil {
				return err
			}
		}
	}
	c, err := eval.Compare(seeds, sums, harness.DefaultSetup)
	if err != nil {
		return err
	}
	c.Floors = floors(rec)
	params := rec.Seeds[0].Workload.Params
	err = writeFile(filepath.Join(dir, "summary.md"), func(f *os.File) error {
		fmt.Fprintf(f, "# Evaluation: %s workload\n\n", params.Name)
		fmt.Fprintf(f, "%s; %d jobs per seed, %d nodes in %d racks (%d GPUs), %d %s; all setups run one after another on %s, %s in all.\n\n",
			rec.Date.Format("2006-01-02 15:04 UTC"), len(rec.Seeds[0].Workload.Jobs), params.Nodes, params.Racks,
			params.Nodes*eval.NodeGPU, len(seeds), plural(len(seeds), "seed"), "fresh local control planes", rec.Took.Round(time.Second))
		makeArgs, runArgs := "", ""
		if len(rec.Seeds[0].Runs) < len(harness.Setups) {
			var names []string
			for _, r := range rec.Seeds[0].Runs {
				names = append(names, r.Setup)
			}
			list := strings.Join(names, ",")
			makeArgs, runArgs = " EVAL_SETUPS="+list, " -setups "+list
		}
		fmt.Fprintf(f, "Made by `make eval EVAL_SIZE=%s EVAL_SEEDS=%d%s` (`go run ./test/eval/cmd/eval -size %s -seeds %d%s`). Times in simulated minutes (one per real second).\n\n",
			params.Name, len(seeds), makeArgs, params.Name, len(seeds), runArgs)
		return eval.Markdown(f, c)
	})
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, eval.IntervalsCSV), func(f *os.File) error { return eval.WriteIntervals(f, c) }); err != nil {
		return err
	}
	return eval.Plots(dir, runs, c)
}

// writeFile creates path and writes it with fill, closing it either way.
func writeFile(path string, fill func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func copyFiles(from, to string, names ...string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, n), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// floors are the bars of the default setup: no longer waits or runs than the rivals, no wait
// past the starvation bound plus the seed's longest run, and no deadlock, partial placement
// or waste under any cps-extender setup. The bound is this build's harness.StarvationBound:
// runs.json does not record the one its runs had.
func floors(rec record) *eval.Floors {
	fl := &eval.Floors{Rivals: harness.Rivals}
	for _, s := range harness.Setups {
		if s.Extender() {
			fl.Gangs = append(fl.Gangs, s.Name)
		}
	}
	for _, sr := range rec.Seeds {
		fl.MaxWait = append(fl.MaxWait, eval.Minutes(harness.StarvationBound+sr.Workload.LongestRun()))
	}
	return fl
}
