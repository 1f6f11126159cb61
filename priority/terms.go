package priority

import (
	"math"
	"time"
)

// Waited is how long the job has waited at now: now - Created, never negative (clock skew
// between replicas must not make a job younger than new). An unset Created counts as no
// wait at all: a job whose age is unknown must not jump the queue as starved.
func (j *Job) Waited(now time.Time) time.Duration {
	if j == nil || j.Created.IsZero() {
		return 0
	}
	return max(now.Sub(j.Created), 0)
}

// Terms computes the four terms of a job's combined priority at now, each in [0,1]:
//
//	U = Tiers[UserTiers[user]], or Tiers[DefaultTier] for a user not in UserTiers
//	J = (priority - floor) / (ceiling - floor), clamped; 1 for an urgent job
//	W = 1 - exp(-wait/tau), wait = now - Created (>= 0)
//	N = log(1+n) / log(1+maxGang), clamped; n = GangSize()
//
// It never fails: an invalid model gives the nearest sensible value (see README.md).
func (m Model) Terms(j *Job, now time.Time) Terms {
	if j == nil {
		return Terms{}
	}
	return Terms{
		User:        m.userTerm(j.User),
		Job:         m.jobTerm(j.Priority, j.Urgent),
		Wait:        m.waitTerm(j.Waited(now)),
		Parallelism: m.parallelismTerm(j.GangSize()),
	}
}

// Combined is the combined priority P = wU*U + wJ*J + wW*W + wN*N. With valid weights
// (>= 0, summing to 1) and terms in [0,1], P is in [0,1]. A non-finite result, possible
// only with invalid weights, is reported as 0 so that ordering and JSON stay sound.
func (m Model) Combined(t Terms) float64 {
	w := m.Weights
	p := w.User*t.User + w.Job*t.Job + w.Wait*t.Wait + w.Parallelism*t.Parallelism
	if math.IsNaN(p) || math.IsInf(p, 0) {
		return 0
	}
	return p
}

// userTerm is U. A user mapped to a tier that does not exist falls back to the default
// tier, like an unknown user; a missing default tier gives 0.
func (m Model) userTerm(user string) float64 {
	if tier, ok := m.UserTiers[user]; ok {
		if u, ok := m.Tiers[tier]; ok {
			return clampUnit(u)
		}
	}
	return clampUnit(m.Tiers[m.DefaultTier])
}

// jobTerm is J. Arithmetic is in float64 because ceiling - floor can overflow int32.
func (m Model) jobTerm(priority int32, urgent bool) float64 {
	if urgent {
		return 1
	}
	lo, hi := float64(m.PriorityFloor), float64(m.PriorityCeiling)
	if hi <= lo { // invalid model: a step at the ceiling instead of a division by zero
		if float64(priority) >= hi {
			return 1
		}
		return 0
	}
	return clampUnit((float64(priority) - lo) / (hi - lo))
}

// waitTerm is W. With tau <= 0 (invalid) W jumps to 1 as soon as the job waits at all.
func (m Model) waitTerm(wait time.Duration) float64 {
	if wait <= 0 {
		return 0
	}
	if m.Tau <= 0 {
		return 1
	}
	return clampUnit(1 - math.Exp(-float64(wait)/float64(m.Tau)))
}

// parallelismTerm is N. maxGang < 1 (invalid) is read as 1.
func (m Model) parallelismTerm(n int) float64 {
	if n <= 0 {
		return 0
	}
	return clampUnit(math.Log1p(float64(n)) / math.Log1p(float64(max(m.MaxGang, 1))))
}

// clampUnit clamps x to [0,1]; NaN becomes 0 so that it cannot poison an ordering.
func clampUnit(x float64) float64 {
	switch {
	case x > 1:
		return 1
	case x >= 0:
		return x
	default: // negative or NaN
		return 0
	}
}
