package priority

import (
	"maps"
	"math"
	"time"
)

// EnqueueCandidate is a pending job that asks to join the jobs that may start (Volcano's
// Inqueue): the job as the model orders it, and what it needs to start.
type EnqueueCandidate struct {
	Job    Job
	Demand Resources
}

// EnqueueJob is one pending job in an EnqueuePlan.
type EnqueueJob struct {
	Key      string
	Position int // 1-based, in the model's queue order
	P        float64
	Terms    Terms
	Demand   Resources
	// Need is the demand of this job and of every job ahead of it that can start at all.
	Need Resources
	// TooBig names a resource the job needs more of than the whole capacity has ("" when
	// none): such a job can never start and holds nobody back.
	TooBig string
	// Ahead is the job right ahead ("" for the first), with its P.
	Ahead  string
	AheadP float64
}

// EnqueuePlan is the admission order of pending jobs and what each needs together with the
// jobs ahead of it, against the free resources and the capacity. Only the Compared
// resources are compared.
type EnqueuePlan struct {
	Order    []*EnqueueJob
	Free     Resources
	Capacity Resources
	Compared []string
	byKey    map[string]*EnqueueJob
}

// PlanEnqueue orders the pending jobs (keys unique) and works out what each needs with the
// jobs ahead of it.
//
// The order is the queue order of Rank: starved jobs first, oldest first, then by combined
// priority P, highest first, then older, then by key. Walking it, a job that needs more of
// some compared resource than the capacity has is too big: it can never start and does not
// count toward the need of the jobs behind it. Every other job's need is its demand plus the
// demands of the jobs ahead of it that are not too big.
func (m Model) PlanEnqueue(pending []EnqueueCandidate, free, capacity Resources, compared []string, now time.Time) *EnqueuePlan {
	plan := &EnqueuePlan{Free: free, Capacity: capacity, Compared: compared, byKey: make(map[string]*EnqueueJob, len(pending))}
	jobs := make([]Job, 0, len(pending))
	demands := make(map[string]Resources, len(pending))
	for _, c := range pending {
		jobs = append(jobs, c.Job)
		demands[c.Job.Key] = c.Demand
	}
	need := Resources{}
	var prev *EnqueueJob
	for i, d := range m.Rank(jobs, now) {
		demand, ok := demands[d.Key]
		if !ok {
			continue
		}
		ej := &EnqueueJob{Key: d.Key, Position: i + 1, P: d.P, Terms: d.Terms, Demand: demand}
		if prev != nil {
			ej.Ahead, ej.AheadP = prev.Key, prev.P
		}
		ej.TooBig = plan.FirstShort(demand, capacity)
		if ej.TooBig == "" {
			addSaturating(need, demand)
		}
		ej.Need = maps.Clone(need)
		if ej.TooBig != "" {
			addSaturating(ej.Need, demand)
		}
		plan.Order = append(plan.Order, ej)
		plan.byKey[d.Key] = ej
		prev = ej
	}
	return plan
}

// Job returns the planned job of a key.
func (p *EnqueuePlan) Job(key string) (*EnqueueJob, bool) {
	j, ok := p.byKey[key]
	return j, ok
}

// FirstShort returns the first compared resource (by the order of Compared) that need asks
// for more of than have holds, or "" when need fits.
func (p *EnqueuePlan) FirstShort(need, have Resources) string {
	for _, r := range p.Compared {
		if need[r] > 0 && need[r] > have[r] {
			return r
		}
	}
	return ""
}

// MayEnqueue says whether a planned job may join the jobs that start: it is not too big,
// and its need (with the jobs ahead) fits the free resources. short names the resource that
// does not ("" when the job may).
func (p *EnqueuePlan) MayEnqueue(j *EnqueueJob) (ok bool, short string) {
	if j.TooBig != "" {
		return false, j.TooBig
	}
	short = p.FirstShort(j.Need, p.Free)
	return short == "", short
}

// addSaturating adds b to a, saturating instead of overflowing.
func addSaturating(a, b Resources) {
	for k, v := range b {
		if v > 0 && a[k] > math.MaxInt64-v {
			a[k] = math.MaxInt64
			continue
		}
		a[k] += v
	}
}
