// Command eval is `make eval`: it replays one generated workload under each scheduler setup
// (plain kube-scheduler, PriorityClasses, native gang scheduling, cps-extender strict /
// reserve / besteffort), each on its own fresh local control plane, and writes per-job CSVs,
// summary.md and the PNG plots into a new folder under results/eval/.
//
//	CPS_CONTROLPLANE_BIN=$(test/tools/build-controlplane.sh | tail -n1) go run ./test/eval/cmd/eval [-size small|medium] [-setups a,b] [-docs docs/eval/medium]
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
	size := flag.String("size", "medium", "workload: small or medium")
	setups := flag.String("setups", "", "comma-separated setups (default: all)")
	out := flag.String("out", "results/eval", "results folder; each run writes a timestamped folder in it")
	docs := flag.String("docs", "", "also copy summary.md and the plots into this folder (e.g. docs/eval)")
	again := flag.String("again", "", "write summary.md and the plots of an earlier results folder again from its runs.json, running nothing")
	flag.Parse()
	var err error
	if *again != "" {
		err = rewrite(*again, *docs)
	} else {
		err = run(*size, *setups, *out, *docs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}

func run(size, setupList, out, docs string) error {
	var params eval.Params
	switch size {
	case "small":
		params = eval.Small()
	case "medium":
		params = eval.Medium()
	default:
		return fmt.Errorf("-size %q: want small or medium", size)
	}
	chosen := harness.Setups
	if setupList != "" {
		var err error
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
	work := eval.Generate(params)
	opts := harness.Options{ExtenderBin: bin, Logf: func(format string, args ...any) {
		fmt.Printf("  "+format+"\n", args...)
	}}
	var runs []eval.Run
	began := time.Now()
	for _, s := range chosen {
		fmt.Printf("%s: %d jobs on %d nodes...\n", s.Name, len(work.Jobs), params.Nodes)
		t := &tb{name: s.Name, log: logFile}
		r, err := runSetup(t, s, work, opts)
		if err != nil {
			return fmt.Errorf("%s: %w (log %s)", s.Name, err, logFile.Name())
		}
		fmt.Printf("%s: ended at %.0f simulated minutes (timed out %v, stuck %v)\n", s.Name, eval.Minutes(r.End), r.TimedOut, r.Stuck)
		runs = append(runs, r)
	}
	rec := record{Workload: work, Runs: runs, Took: time.Since(began), Date: time.Now().UTC()}
	if err := saveRuns(dir, rec); err != nil {
		return err
	}
	if err := write(dir, rec); err != nil {
		return err
	}
	fmt.Printf("results in %s\n", dir)
	return publish(dir, docs)
}

// record is runs.json: everything a results folder's summary and plots are made from.
type record struct {
	Workload eval.Workload
	Runs     []eval.Run
	Took     time.Duration
	Date     time.Time
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
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
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

// write writes the per-job CSVs, summary.md and the plots.
func write(dir string, rec record) error {
	work, runs := rec.Workload, rec.Runs
	sums := make([]eval.Summary, len(runs))
	for i, r := range runs {
		sums[i] = eval.Summarize(r)
		f, err := os.Create(filepath.Join(dir, "jobs-"+r.Setup+".csv"))
		if err != nil {
			return err
		}
		if err := eval.WriteCSV(f, r); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	f, err := os.Create(filepath.Join(dir, "summary.md"))
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "# Evaluation: %s workload\n\n", work.Params.Name)
	fmt.Fprintf(f, "%s; %d jobs, %d nodes in %d racks (%d GPUs), seed %d; all setups run one after another on %s, %s in all.\n\n",
		rec.Date.Format("2006-01-02 15:04 UTC"), len(work.Jobs), work.Params.Nodes, work.Params.Racks,
		work.Params.Nodes*eval.NodeGPU, work.Params.Seed, "fresh local control planes", rec.Took.Round(time.Second))
	target := map[string]string{"small": "make eval-small", "medium": "make eval"}[work.Params.Name]
	fmt.Fprintf(f, "Made by `%s` (`go run ./test/eval/cmd/eval -size %s`). Times in simulated minutes (one per real second).\n\n", target, work.Params.Name)
	c, err := eval.Compare([]uint64{work.Params.Seed}, [][]eval.Summary{sums}, harness.DefaultSetup)
	if err != nil {
		f.Close()
		return err
	}
	if err := eval.Markdown(f, c); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return eval.Plots(dir, [][]eval.Run{runs}, c)
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
