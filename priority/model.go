package priority

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Defaults of the model; docs/model.md explains each choice.
const (
	DefaultPriorityFloor   int32 = 0
	DefaultPriorityCeiling int32 = 1000000
	DefaultTau                   = 10 * time.Minute
	DefaultMaxGang               = 64
	DefaultStarvationBound       = 30 * time.Minute
	DefaultPolicy                = PolicyReserve
	DefaultTierName              = "bronze"
	// DefaultTurnHold is how long a job that got the turn keeps it ahead of the queue while
	// kube-scheduler places its pods: a second or two normally, a few under load.
	DefaultTurnHold = 10 * time.Second
	// DefaultSpreadAfter is how long a job may wait for a domain to hold it whole while the
	// room it could spread over serves the jobs behind it (an idle wait is never taken): a
	// few minutes of its own wait against a run time of hours.
	DefaultSpreadAfter = 5 * time.Minute
	// DefaultReserveAfter is how long a job waits under backfill before it reserves: tau,
	// a third of the starvation bound.
	DefaultReserveAfter = 10 * time.Minute
	// Preemption defaults: urgent jobs only; a victim's P at least 0.1 below; a victim has
	// run 10 minutes; at most 4 victims in 10 minutes.
	DefaultPreemption       = PreemptUrgent
	DefaultPreemptionMargin = 0.1
	DefaultMinRunTime       = 10 * time.Minute
	// DefaultUrgentMinRunTime: an urgent job evicts at once, as PriorityClass preemption
	// does. A job that started moments ago loses the least work (its eviction costs
	// pod-minutes run), while every minute of protection is a minute the urgent job waits;
	// urgency is granted by the admin, and maxPreemptions still bounds the churn.
	DefaultUrgentMinRunTime time.Duration = 0
	// DefaultArrivalWindow: a controller creates a gang's pods a few a second at least,
	// and creation times have whole seconds; an urgent gang that stops growing holds its
	// room 5 s more at most.
	DefaultArrivalWindow    = 5 * time.Second
	DefaultMaxPreemptions   = 4
	DefaultPreemptionWindow = 10 * time.Minute
)

// weightTolerance is how far the weights' sum may stray from 1, for decimal input such as
// 0.1+0.2 that is not exact in binary.
const weightTolerance = 1e-6

// DefaultModel returns the model used where the config file is silent: weights user 0.3,
// job 0.3, wait 0.2, parallelism 0.2; tiers gold 1.0, silver 0.6, bronze 0.3 with bronze
// the default; priorities 0..1000000; tau 10m; maxGang 64; starvation bound 30m; policy
// reserve. Every call returns fresh maps, so a caller may change them freely.
func DefaultModel() Model {
	return Model{
		Weights:         Weights{User: 0.3, Job: 0.3, Wait: 0.2, Parallelism: 0.2},
		Tiers:           map[string]float64{"gold": 1.0, "silver": 0.6, "bronze": 0.3},
		UserTiers:       map[string]string{},
		DefaultTier:     DefaultTierName,
		PriorityFloor:   DefaultPriorityFloor,
		PriorityCeiling: DefaultPriorityCeiling,
		Tau:             DefaultTau,
		MaxGang:         DefaultMaxGang,
		StarvationBound: DefaultStarvationBound,
		Policy:          DefaultPolicy,
		TurnHold:        DefaultTurnHold,
		SpreadAfter:     DefaultSpreadAfter,
		ReserveAfter:    DefaultReserveAfter,

		Preemption:       DefaultPreemption,
		PreemptionMargin: DefaultPreemptionMargin,
		MinRunTime:       DefaultMinRunTime,
		UrgentMinRunTime: DefaultUrgentMinRunTime,
		ArrivalWindow:    DefaultArrivalWindow,
		MaxPreemptions:   DefaultMaxPreemptions,
		PreemptionWindow: DefaultPreemptionWindow,
	}
}

// ValidPreemption reports whether p is one of the preemption modes.
func ValidPreemption(p PreemptionMode) bool {
	switch p {
	case PreemptOff, PreemptUrgent, PreemptPriority:
		return true
	}
	return false
}

// ValidPolicy reports whether p is one of the admission policies.
func ValidPolicy(p Policy) bool {
	switch p {
	case PolicyStrict, PolicyReserve, PolicyBestEffort, PolicyBackfill:
		return true
	}
	return false
}

// Validate returns every problem of the model at once, one error per problem, each naming
// its config key (under model:), so a bad config file is fixed in one round.
func (m Model) Validate() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	w := m.Weights
	for _, f := range []struct {
		key string
		v   float64
	}{{"user", w.User}, {"job", w.Job}, {"wait", w.Wait}, {"parallelism", w.Parallelism}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) { // !(>=) also catches NaN
			bad("model.weights.%s: %v, want a number >= 0", f.key, f.v)
		}
	}
	if sum := w.User + w.Job + w.Wait + w.Parallelism; !(math.Abs(sum-1) <= weightTolerance) {
		bad("model.weights: sum to %.6g, want 1", sum)
	}

	for _, name := range sortedNames(m.Tiers) {
		if v := m.Tiers[name]; !(v >= 0 && v <= 1) {
			bad("model.tiers.%s: %v, want a number in [0,1]", name, v)
		}
	}
	if _, ok := m.Tiers[m.DefaultTier]; !ok {
		bad("model.defaultTier: %q is not in model.tiers", m.DefaultTier)
	}
	for _, user := range sortedNames(m.UserTiers) {
		tier := m.UserTiers[user]
		if _, tierExists := m.Tiers[tier]; !tierExists {
			bad("model.userTiers.%s: tier %q is not in model.tiers", user, tier)
		}
	}

	if m.PriorityCeiling <= m.PriorityFloor {
		bad("model.priorityCeiling: %d, want more than model.priorityFloor (%d)", m.PriorityCeiling, m.PriorityFloor)
	}
	if m.Tau <= 0 {
		bad("model.tau: %v, want a duration > 0", m.Tau)
	}
	if m.MaxGang < 1 {
		bad("model.maxGang: %d, want >= 1", m.MaxGang)
	}
	if m.StarvationBound <= 0 {
		bad("model.starvationBound: %v, want a duration > 0", m.StarvationBound)
	}
	if m.TurnHold < 0 {
		bad("model.turnHold: %v, want a duration >= 0", m.TurnHold)
	}
	if m.SpreadAfter < 0 {
		bad("model.spreadAfter: %v, want a duration >= 0", m.SpreadAfter)
	}
	if m.ReserveAfter < 0 {
		bad("model.reserveAfter: %v, want a duration >= 0", m.ReserveAfter)
	}
	if !ValidPreemption(m.Preemption) {
		bad("model.preemption: %q, want one of %s, %s, %s", m.Preemption, PreemptOff, PreemptUrgent, PreemptPriority)
	}
	if !(m.PreemptionMargin >= 0 && m.PreemptionMargin <= 1) {
		bad("model.preemptionMargin: %v, want a number in [0,1]", m.PreemptionMargin)
	}
	if m.MinRunTime < 0 {
		bad("model.minRunTime: %v, want a duration >= 0", m.MinRunTime)
	}
	if m.UrgentMinRunTime < 0 {
		bad("model.urgentMinRunTime: %v, want a duration >= 0", m.UrgentMinRunTime)
	}
	if m.ArrivalWindow < 0 {
		bad("model.arrivalWindow: %v, want a duration >= 0", m.ArrivalWindow)
	}
	if m.MaxPreemptions < 0 {
		bad("model.maxPreemptions: %d, want >= 0", m.MaxPreemptions)
	}
	if m.PreemptionWindow <= 0 {
		bad("model.preemptionWindow: %v, want a duration > 0", m.PreemptionWindow)
	}
	if !ValidPolicy(m.Policy) {
		bad("model.policy: %q, want one of %s, %s, %s, %s", m.Policy, PolicyStrict, PolicyReserve, PolicyBestEffort, PolicyBackfill)
	}
	return errs
}

// sortedNames returns a map's keys in order, so errors come out in the same order every run.
func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
