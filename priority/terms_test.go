package priority_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cps-extender/cps-extender/priority"
)

var approx = cmpopts.EquateApprox(0, 1e-9)

func TestTerms(t *testing.T) {
	m := priority.DefaultModel()
	m.UserTiers = map[string]string{"alice": "gold", "carol": "silver", "dave": "vanished"}
	workers := func(n int) []*podB {
		out := make([]*podB, n)
		for i := range out {
			out[i] = mkPod("w"+string(rune('a'+i)), priority.RoleWorker, i)
		}
		return out
	}
	n6 := math.Log(7) / math.Log(65)
	tests := []struct {
		name  string
		model *priority.Model // nil: m
		job   *priority.Job
		now   time.Time
		want  priority.Terms
	}{
		{
			name: "gold user, mid priority, no wait, 6-pod gang",
			job:  ptr(mkJob("ns/a").user("alice").prio(500000).pods(workers(6)...).obj()),
			now:  t0,
			want: priority.Terms{User: 1, Job: 0.5, Wait: 0, Parallelism: n6},
		},
		{
			name: "silver user",
			job:  ptr(mkJob("ns/a").user("carol").pods(workers(6)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.6, Parallelism: n6},
		},
		{
			name: "unknown user gets the default tier",
			job:  ptr(mkJob("ns/a").user("mallory").pods(workers(6)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Parallelism: n6},
		},
		{
			name: "user mapped to a missing tier gets the default tier",
			job:  ptr(mkJob("ns/a").user("dave").pods(workers(6)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Parallelism: n6},
		},
		{
			name:  "missing default tier gives 0",
			model: &priority.Model{Tiers: map[string]float64{"gold": 1}, DefaultTier: "none", PriorityCeiling: 10, Tau: time.Minute, MaxGang: 64},
			job:   ptr(mkJob("ns/a").user("x").pods(workers(1)...).obj()),
			now:   t0,
			want:  priority.Terms{User: 0, Parallelism: math.Log(2) / math.Log(65)},
		},
		{
			name: "priority below floor clamps to 0",
			job:  ptr(mkJob("ns/a").prio(-5).pods(workers(1)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Job: 0, Parallelism: math.Log(2) / math.Log(65)},
		},
		{
			name: "priority above ceiling clamps to 1",
			job:  ptr(mkJob("ns/a").prio(2000000000).pods(workers(1)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Job: 1, Parallelism: math.Log(2) / math.Log(65)},
		},
		{
			name: "urgent counts as the ceiling",
			job:  ptr(mkJob("ns/a").prio(0).urgent().pods(workers(1)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Job: 1, Parallelism: math.Log(2) / math.Log(65)},
		},
		{
			name:  "floor and ceiling span the int32 range without overflow",
			model: &priority.Model{PriorityFloor: math.MinInt32, PriorityCeiling: math.MaxInt32, MaxGang: 1, Tau: time.Minute},
			job:   ptr(mkJob("ns/a").prio(0).pods(workers(1)...).obj()),
			now:   t0,
			want:  priority.Terms{Job: float64(-math.MinInt32) / (float64(math.MaxInt32) - float64(math.MinInt32)), Parallelism: 1},
		},
		{
			name: "waited one tau",
			job:  ptr(mkJob("ns/a").pods(workers(1)...).obj()),
			now:  t0.Add(10 * time.Minute),
			want: priority.Terms{User: 0.3, Wait: 1 - math.Exp(-1), Parallelism: math.Log(2) / math.Log(65)},
		},
		{
			name: "waited 5m",
			job:  ptr(mkJob("ns/a").pods(workers(1)...).obj()),
			now:  t0.Add(5 * time.Minute),
			want: priority.Terms{User: 0.3, Wait: 1 - math.Exp(-0.5), Parallelism: math.Log(2) / math.Log(65)},
		},
		{
			name: "created in the future: wait clamps to 0",
			job:  ptr(mkJob("ns/a").pods(workers(1)...).obj()),
			now:  t0.Add(-time.Hour),
			want: priority.Terms{User: 0.3, Wait: 0, Parallelism: math.Log(2) / math.Log(65)},
		},
		{
			name: "unknown creation time counts as no wait",
			job:  ptr(mkJob("ns/a").created(time.Time{}).pods(workers(1)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Wait: 0, Parallelism: math.Log(2) / math.Log(65)},
		},
		{
			name: "gang of maxGang has N 1",
			job:  ptr(mkJob("ns/a").pods(workers(64)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Parallelism: 1},
		},
		{
			name: "gang above maxGang clamps to 1",
			job:  ptr(mkJob("ns/a").min(500).pods(workers(2)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Parallelism: 1},
		},
		{
			name: "n is the larger of min and pods",
			job:  ptr(mkJob("ns/a").min(6).pods(workers(2)...).obj()),
			now:  t0,
			want: priority.Terms{User: 0.3, Parallelism: n6},
		},
		{
			name: "no pods: N is 0",
			job:  ptr(mkJob("ns/a").obj()),
			now:  t0,
			want: priority.Terms{User: 0.3},
		},
		{
			name:  "invalid tau and maxGang give limits, not NaN",
			model: &priority.Model{PriorityCeiling: 1, Tau: 0, MaxGang: 0},
			job:   ptr(mkJob("ns/a").pods(workers(3)...).obj()),
			now:   t0.Add(time.Second),
			want:  priority.Terms{Wait: 1, Parallelism: 1},
		},
		{name: "nil job", job: nil, now: t0, want: priority.Terms{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := m
			if tt.model != nil {
				model = *tt.model
			}
			got := model.Terms(tt.job, tt.now)
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("Terms() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCombined(t *testing.T) {
	def := priority.DefaultModel()
	tests := []struct {
		name    string
		weights priority.Weights
		terms   priority.Terms
		want    float64
	}{
		{"default weights", def.Weights, priority.Terms{User: 1, Job: 0.5, Wait: 0.1, Parallelism: 0.4}, 0.3 + 0.15 + 0.02 + 0.08},
		{"all ones give 1", def.Weights, priority.Terms{User: 1, Job: 1, Wait: 1, Parallelism: 1}, 1},
		{"all zeros give 0", def.Weights, priority.Terms{}, 0},
		{"only wait counts", priority.Weights{Wait: 1}, priority.Terms{User: 1, Job: 1, Wait: 0.25, Parallelism: 1}, 0.25},
		{"NaN weight gives 0, not NaN", priority.Weights{User: math.NaN()}, priority.Terms{User: 1}, 0},
		{"infinite weight gives 0", priority.Weights{User: math.Inf(1)}, priority.Terms{User: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := def
			m.Weights = tt.weights
			if diff := cmp.Diff(tt.want, m.Combined(tt.terms), approx); diff != "" {
				t.Errorf("Combined() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWaited(t *testing.T) {
	j := mkJob("ns/a").obj()
	if got := j.Waited(t0.Add(90 * time.Second)); got != 90*time.Second {
		t.Errorf("Waited = %v, want 1m30s", got)
	}
	if got := j.Waited(t0.Add(-time.Second)); got != 0 {
		t.Errorf("Waited before creation = %v, want 0", got)
	}
}

// TestReadmeExample pins the worked example in README.md.
func TestReadmeExample(t *testing.T) {
	m := priority.DefaultModel()
	m.UserTiers["alice"] = "gold"
	j := mkJob("ml/resnet").user("alice").prio(500000).created(t0.Add(-5*time.Minute)).
		gang(2, res(2000, 8*gi), 4, res(4000, 16*gi)).obj()
	terms := m.Terms(&j, t0)
	want := priority.Terms{User: 1, Job: 0.5, Wait: 0.3934693402873666, Parallelism: 0.46615467690039275}
	if diff := cmp.Diff(want, terms, approx); diff != "" {
		t.Errorf("Terms (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(0.6219248034375519, m.Combined(terms), approx); diff != "" {
		t.Errorf("Combined (-want +got):\n%s", diff)
	}
}
