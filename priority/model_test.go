package priority_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

func TestDefaultModel(t *testing.T) {
	m := priority.DefaultModel()
	want := priority.Model{
		Weights:         priority.Weights{User: 0.3, Job: 0.3, Wait: 0.2, Parallelism: 0.2},
		Tiers:           map[string]float64{"gold": 1.0, "silver": 0.6, "bronze": 0.3},
		UserTiers:       map[string]string{},
		DefaultTier:     "bronze",
		PriorityFloor:   0,
		PriorityCeiling: 1000000,
		Tau:             10 * time.Minute,
		MaxGang:         64,
		StarvationBound: 30 * time.Minute,
		Policy:          priority.PolicyReserve,
		TurnHold:        10 * time.Second,
		SpreadAfter:     5 * time.Minute,
		ReserveAfter:    10 * time.Minute,

		Preemption:       priority.PreemptUrgent,
		PreemptionMargin: 0.1,
		MinRunTime:       10 * time.Minute,
		ArrivalWindow:    5 * time.Second,
		MaxPreemptions:   4,
		PreemptionWindow: 10 * time.Minute,
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("DefaultModel() (-want +got):\n%s", diff)
	}
	if errs := m.Validate(); len(errs) != 0 {
		t.Errorf("DefaultModel().Validate() = %v, want no errors", errs)
	}
	// Each call has its own maps: a caller's change must not leak into the next model.
	m.Tiers["gold"] = 0
	m.UserTiers["alice"] = "gold"
	if again := priority.DefaultModel(); again.Tiers["gold"] != 1 || len(again.UserTiers) != 0 {
		t.Errorf("DefaultModel() shares maps between calls: %v %v", again.Tiers, again.UserTiers)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *priority.Model)
		want   []string
	}{
		{name: "defaults are valid", modify: func(*priority.Model) {}, want: nil},
		{
			name: "weights within tolerance of 1",
			modify: func(m *priority.Model) {
				m.Weights = priority.Weights{User: 0.1, Job: 0.2, Wait: 0.3, Parallelism: 0.4}
			},
			want: nil,
		},
		{
			name:   "weights sum below 1",
			modify: func(m *priority.Model) { m.Weights.Parallelism = 0.1 },
			want:   []string{"model.weights: sum to 0.9, want 1"},
		},
		{
			name:   "negative weight",
			modify: func(m *priority.Model) { m.Weights.User, m.Weights.Job = -0.1, 0.7 },
			want:   []string{"model.weights.user: -0.1, want a number >= 0"},
		},
		{
			name:   "NaN weight",
			modify: func(m *priority.Model) { m.Weights.Wait = math.NaN() },
			want:   []string{"model.weights.wait: NaN, want a number >= 0", "model.weights: sum to NaN, want 1"},
		},
		{
			name:   "tier outside [0,1]",
			modify: func(m *priority.Model) { m.Tiers["gold"] = 1.5; m.Tiers["lead"] = -1 },
			want:   []string{"model.tiers.gold: 1.5, want a number in [0,1]", "model.tiers.lead: -1, want a number in [0,1]"},
		},
		{
			name:   "default tier missing",
			modify: func(m *priority.Model) { m.DefaultTier = "tin" },
			want:   []string{`model.defaultTier: "tin" is not in model.tiers`},
		},
		{
			name: "user tier unknown",
			modify: func(m *priority.Model) {
				m.UserTiers = map[string]string{"zed": "platinum", "alice": "gold", "amy": "iron"}
			},
			want: []string{`model.userTiers.amy: tier "iron" is not in model.tiers`, `model.userTiers.zed: tier "platinum" is not in model.tiers`},
		},
		{
			name:   "ceiling equal to floor",
			modify: func(m *priority.Model) { m.PriorityFloor, m.PriorityCeiling = 100, 100 },
			want:   []string{"model.priorityCeiling: 100, want more than model.priorityFloor (100)"},
		},
		{
			name:   "zero tau",
			modify: func(m *priority.Model) { m.Tau = 0 },
			want:   []string{"model.tau: 0s, want a duration > 0"},
		},
		{
			name:   "maxGang zero",
			modify: func(m *priority.Model) { m.MaxGang = 0 },
			want:   []string{"model.maxGang: 0, want >= 1"},
		},
		{
			name:   "negative starvation bound",
			modify: func(m *priority.Model) { m.StarvationBound = -time.Minute },
			want:   []string{"model.starvationBound: -1m0s, want a duration > 0"},
		},
		{
			name:   "negative turn hold",
			modify: func(m *priority.Model) { m.TurnHold = -time.Second },
			want:   []string{"model.turnHold: -1s, want a duration >= 0"},
		},
		{
			name:   "negative spread-after",
			modify: func(m *priority.Model) { m.SpreadAfter = -time.Minute },
			want:   []string{"model.spreadAfter: -1m0s, want a duration >= 0"},
		},
		{
			name:   "negative reserve-after",
			modify: func(m *priority.Model) { m.ReserveAfter = -time.Minute },
			want:   []string{"model.reserveAfter: -1m0s, want a duration >= 0"},
		},
		{
			name:   "unknown policy",
			modify: func(m *priority.Model) { m.Policy = "fifo" },
			want:   []string{`model.policy: "fifo", want one of strict, reserve, besteffort, backfill`},
		},
		{
			name: "preemption keys out of range",
			modify: func(m *priority.Model) {
				m.Preemption, m.PreemptionMargin, m.MinRunTime, m.MaxPreemptions, m.PreemptionWindow = "always", 2, -time.Minute, -1, 0
				m.UrgentMinRunTime, m.ArrivalWindow = -time.Second, -time.Second
			},
			want: []string{
				`model.preemption: "always", want one of off, urgent, priority`,
				"model.preemptionMargin: 2, want a number in [0,1]",
				"model.minRunTime: -1m0s, want a duration >= 0",
				"model.urgentMinRunTime: -1s, want a duration >= 0",
				"model.arrivalWindow: -1s, want a duration >= 0",
				"model.maxPreemptions: -1, want >= 0",
				"model.preemptionWindow: 0s, want a duration > 0",
			},
		},
		{
			name: "every problem at once",
			modify: func(m *priority.Model) {
				*m = priority.Model{
					Weights:     priority.Weights{User: -1, Job: 0.5},
					Tiers:       map[string]float64{"x": 2},
					UserTiers:   map[string]string{"u": "y"},
					DefaultTier: "",
				}
			},
			want: []string{
				"model.weights.user: -1, want a number >= 0",
				"model.weights: sum to -0.5, want 1",
				"model.tiers.x: 2, want a number in [0,1]",
				`model.defaultTier: "" is not in model.tiers`,
				`model.userTiers.u: tier "y" is not in model.tiers`,
				"model.priorityCeiling: 0, want more than model.priorityFloor (0)",
				"model.tau: 0s, want a duration > 0",
				"model.maxGang: 0, want >= 1",
				"model.starvationBound: 0s, want a duration > 0",
				`model.preemption: "", want one of off, urgent, priority`,
				"model.preemptionWindow: 0s, want a duration > 0",
				`model.policy: "", want one of strict, reserve, besteffort, backfill`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := priority.DefaultModel()
			tt.modify(&m)
			var got []string
			for _, err := range m.Validate() {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
		})
	}
}
