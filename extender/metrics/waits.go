package metrics

import (
	"time"

	"github.com/cps-extender/cps-extender/priority"
)

// JobWaits follows the jobs from queue to queue, for the job metrics: the time from a job's
// creation until it first gets the turn and until its gang is bound, and the jobs that do
// not run yet by phase and tier. The zero JobWaits is ready; one goroutine at a time uses it
// (the view's recompute loop).
type JobWaits struct {
	// primed is set after the first queue: what a job had reached by then happened before
	// this process looked (a previous replica may have counted it).
	primed bool
	// seen and spare swap: seen holds the last queue's jobs.
	seen, spare map[string]jobWait
}

// jobWait is what one job has reached.
type jobWait struct {
	created         time.Time
	admitted, bound bool
}

// Observe feeds the job metrics of m from a newly published queue q, computed at now from
// jobs (by key): model names each job's tier, classOf its PriorityClass.
func (w *JobWaits) Observe(m *Metrics, q *priority.Queue, jobs map[string]*priority.Job, model priority.Model,
	classOf func(*priority.Job) string, now time.Time) {
	if m == nil || q == nil {
		return
	}
	next := w.spare
	if next == nil {
		next = make(map[string]jobWait, len(jobs))
	}
	clear(next)
	pending := map[Pending]int{}
	starved := 0
	for _, list := range [][]*priority.Decision{q.Order, q.Unschedulable, q.Running} {
		for _, d := range list {
			job := jobs[d.Key]
			if job == nil {
				continue
			}
			tier := tierOf(model, job.User)
			running := d.Phase == priority.PhaseRunning
			admitted := running || d.Phase == priority.PhaseAdmitted
			if !running {
				pending[Pending{Phase: d.Phase, Tier: tier}]++
			}
			if d.Starved && d.Position > 0 {
				starved++
			}
			was, known := w.seen[d.Key]
			if !known || !was.created.Equal(job.Created) { // new, or deleted and created anew
				// Before the first queue it happened unseen; a new job that already runs
				// was bound by someone else.
				was = jobWait{created: job.Created, admitted: running || (!w.primed && admitted), bound: running}
			}
			if admitted && !was.admitted {
				m.JobAdmitted(tier, classOf(job), now.Sub(job.Created))
				was.admitted = true
			}
			if running && !was.bound {
				m.JobBound(tier, classOf(job), now.Sub(job.Created))
				was.bound = true
			}
			next[d.Key] = was
		}
	}
	m.PendingJobs(pending, starved)
	w.seen, w.spare, w.primed = next, w.seen, true
}

// tierOf names the tier of a user, as the user term reads it.
func tierOf(model priority.Model, user string) string {
	if tier, ok := model.UserTiers[user]; ok {
		return tier
	}
	return model.DefaultTier
}
