package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/test/eval"
	"github.com/cps-extender/cps-extender/test/eval/harness"
)

// seedRuns is a workload of one job on seed and a run of each setup on it, the job waiting
// wait minutes.
func seedRuns(seed uint64, wait time.Duration, setups ...string) seedRecord {
	p := eval.Small().Seeded(int(seed - eval.Small().Seed))
	job := eval.Job{Name: "job-000", User: "ana", Tier: eval.TierGold, PriorityClass: "eval-high", PS: 1, Workers: 2, Base: 5 * time.Minute}
	sr := seedRecord{Workload: eval.Workload{Params: p, Jobs: []eval.Job{job}}}
	for k, s := range setups {
		bound := wait + time.Duration(k)*time.Minute
		sr.Runs = append(sr.Runs, eval.Run{Setup: s, End: 30 * time.Minute, GPUs: 8,
			Jobs: []eval.JobRecord{{Job: job, AllBound: bound, Completed: bound + job.Base,
				Spans: []eval.PodSpan{{Pod: "ps-0", Node: "n0", Bound: bound, End: bound + job.Base}}}},
			Samples: []eval.Sample{{At: 0}, {At: bound, Binds: 3, Running: 1, UsefulGPU: 2}, {At: bound + job.Base, Binds: 3, Completions: 1}}})
	}
	return sr
}

func TestLoadRecord(t *testing.T) {
	one := seedRuns(8, time.Minute, "plain", harness.DefaultSetup)
	two := record{Seeds: []seedRecord{one, seedRuns(9, 2*time.Minute, "plain", harness.DefaultSetup)}, Took: time.Hour}
	marshal := func(v any) []byte {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	// The format before seeds: one workload and its runs at the top.
	old := marshal(struct {
		Workload eval.Workload
		Runs     []eval.Run
		Took     time.Duration
		Date     time.Time
	}{one.Workload, one.Runs, time.Minute, time.Date(2026, 12, 2, 1, 34, 0, 0, time.UTC)})
	for _, c := range []struct {
		name  string
		data  []byte
		seeds []uint64
		took  time.Duration
		err   string
	}{
		{"seeds", marshal(two), []uint64{8, 9}, time.Hour, ""},
		{"before seeds: one seed", old, []uint64{8}, time.Minute, ""},
		{"nothing run", []byte(`{"Took": 5}`), nil, 0, "no runs"},
		{"not JSON", []byte(`{`), nil, 0, "unexpected end"},
	} {
		rec, err := loadRecord(c.data)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var seeds []uint64
		for _, sr := range rec.Seeds {
			seeds = append(seeds, sr.Workload.Params.Seed)
			if len(sr.Runs) != 2 || sr.Runs[1].Setup != harness.DefaultSetup || len(sr.Workload.Jobs) != 1 {
				t.Errorf("%s: seed %d: %d runs, %d jobs", c.name, sr.Workload.Params.Seed, len(sr.Runs), len(sr.Workload.Jobs))
			}
		}
		if !slices.Equal(seeds, c.seeds) || rec.Took != c.took {
			t.Errorf("%s: seeds %v, took %v; want %v, %v", c.name, seeds, rec.Took, c.seeds, c.took)
		}
	}
}

func TestWrite(t *testing.T) {
	for _, c := range []struct {
		name  string
		rec   record
		files []string
		want  []string
	}{
		{
			name:  "one seed",
			rec:   record{Seeds: []seedRecord{seedRuns(8, time.Minute, "plain", harness.DefaultSetup)}},
			files: []string{"jobs-plain-seed8.csv", "jobs-" + harness.DefaultSetup + "-seed8.csv"},
			want:  []string{"1 jobs per seed", "1 seed;", "`make eval EVAL_SIZE=small EVAL_SEEDS=1 EVAL_SETUPS=plain," + harness.DefaultSetup + "`", "-seeds 1 -setups plain," + harness.DefaultSetup + "`", "Seed 8 (n = 1)", "One seed: no paired comparison"},
		},
		{
			name: "three seeds",
			rec: record{Seeds: []seedRecord{seedRuns(8, time.Minute, "plain", harness.DefaultSetup),
				seedRuns(9, 3*time.Minute, "plain", harness.DefaultSetup), seedRuns(10, 2*time.Minute, "plain", harness.DefaultSetup)}},
			files: []string{"jobs-plain-seed8.csv", "jobs-plain-seed9.csv", "jobs-" + harness.DefaultSetup + "-seed10.csv"},
			// plain binds a minute before the default setup on every seed.
			want: []string{"3 seeds;", "-seeds 3 -setups plain," + harness.DefaultSetup + "`", "Seeds 8, 9, 10 (n = 3)", "| seed 8 | seed 9 | seed 10 |",
				"Paired with " + harness.DefaultSetup, "| plain | -1.0 on every seed, lower |"},
		},
	} {
		dir := t.TempDir()
		if err := write(dir, c.rec); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, f := range append(c.files, "summary.md", eval.IntervalsCSV, eval.WaitCDFPNG, eval.UtilisationPNG, eval.LocalityPNG, eval.WaitsPNG) {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
		summary, err := os.ReadFile(filepath.Join(dir, "summary.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(string(summary), w) {
				t.Errorf("%s: summary.md lacks %q:\n%s", c.name, w, summary)
			}
		}
	}
}
