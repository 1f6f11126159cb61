//go:build e2e

package eval_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/eval"
	"github.com/cps-extender/cps-extender/test/eval/harness"
)

func TestMain(m *testing.M) { framework.Main(m) }

// starvationSlack is how long past the starvation bound a job may still wait: a starved job
// goes first but must wait until a running job frees room, at most the longest run (the
// longest base duration, all workers in another rack), plus 10 minutes (10 real seconds) for
// the handover and kube-scheduler's backoff.
var starvationSlack = time.Duration(float64(eval.Small().MaxDuration)*eval.FactorCrossRack) + 10*time.Minute

// TestEvalSmall replays the small workload (28 jobs on 16 nodes, opening with 5 jobs of 32
// workers on 128 GPUs) under plain kube-scheduler and under cps-extender (strict), each on its
// own control plane, and checks the paper's claims as inequalities between the two runs. The
// other setups (PriorityClasses, native gang, the other policies) run in `make eval` only, to
// keep this test within about three minutes.
func TestEvalSmall(t *testing.T) {
	work := eval.Generate(eval.Small())
	bin, err := framework.BuildExtender(t.TempDir()) // no race detector: the evaluation measures timing
	if err != nil {
		t.Fatal(err)
	}
	setups, err := harness.SetupsNamed("plain", "cps-strict")
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]eval.Summary{}
	var ordered []eval.Summary
	for _, s := range setups {
		t.Run(s.Name, func(t *testing.T) {
			run := harness.Run(t, s, work, harness.Options{ExtenderBin: bin, Logf: t.Logf})
			sums[s.Name] = eval.Summarize(run)
			ordered = append(ordered, sums[s.Name])
		})
	}
	if len(sums) != len(setups) {
		t.Fatal("a setup failed to run")
	}
	c, err := eval.Compare([]uint64{work.Params.Seed}, [][]eval.Summary{ordered}, harness.DefaultSetup)
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := eval.Markdown(&md, c); err != nil {
		t.Fatal(err)
	}
	t.Logf("small workload, simulated minutes:\n%s", md.String())

	plain, cps := sums["plain"], sums["cps-strict"]
	if cps.Deadlocks != 0 || cps.PartialEnd != 0 {
		t.Errorf("cps-extender: %d deadlocks and %d partially bound jobs at the end, want none", cps.Deadlocks, cps.PartialEnd)
	}
	if plain.Deadlocks == 0 && plain.PartialEnd == 0 {
		t.Errorf("plain kube-scheduler: no deadlock and no partially bound job at the end: the workload is not contended enough to show the claim")
	}
	if cps.Completed != cps.Jobs {
		t.Errorf("cps-extender completed %d of %d jobs", cps.Completed, cps.Jobs)
	}
	for _, g := range []string{"tier " + eval.TierGold, "urgent"} {
		if c, p := cps.Groups[g], plain.Groups[g]; c.N == 0 || c.Mean >= p.Mean {
			t.Errorf("%s: mean wait %.1f min with cps-extender (%d jobs), %.1f with plain kube-scheduler: want less", g, c.Mean, c.N, p.Mean)
		}
	}
	// Locality: the placement keeps gangs in a rack when one holds them. Under strict a job
	// is spread as soon as no rack has room, so the share moves with the run's timing: 97%,
	// 89% and 72% on a PS's node or rack in single runs here, 91% ± 15 over three seeds.
	// 0.65 leaves room for that, not for a placement blind to racks (53% before it, 32-38%
	// for plain kube-scheduler).
	if cps.LocalityNode <= plain.LocalityNode {
		t.Errorf("workers on a PS's node: %.2f with cps-extender, %.2f with plain kube-scheduler: want more", cps.LocalityNode, plain.LocalityNode)
	}
	if cps.LocalityRack < 0.65 || cps.LocalityRack <= plain.LocalityRack {
		t.Errorf("workers on a PS's node or rack: %.2f with cps-extender, %.2f with plain kube-scheduler: want >= 0.65 and more", cps.LocalityRack, plain.LocalityRack)
	}
	if limit := harness.StarvationBound + starvationSlack; time.Duration(cps.Wait.Max*float64(time.Minute)) > limit {
		t.Errorf("cps-extender: a job waited %.1f min, past the starvation bound %v plus slack %v", cps.Wait.Max, harness.StarvationBound, starvationSlack)
	}
}
