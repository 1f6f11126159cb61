package view

import (
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/priority"
)

// jobWaits follows the jobs from snapshot to snapshot, for the job metrics: the time from a
// job's creation until it first gets the turn and until its gang is bound, and the jobs
// that do not run yet by phase and tier. Only the recompute loop uses it.
type jobWaits struct {
	// primed is set after the first snapshot: what a job had reached by then happened
	// before this process looked (a previous replica may have counted it).
	primed bool
	// seen and spare swap: seen holds the last snapshot's jobs.
	seen, spare map[string]jobWait
}

// jobWait is what one job has reached.
type jobWait struct {
	created         time.Time
	admitted, bound bool
}

// observeJobs feeds the job metrics from a newly published snapshot.
func (c *Cluster) observeJobs(snap *Snapshot, model priority.Model, now time.Time) {
	if c.metrics == nil || snap.Queue == nil {
		return
	}
	w := &c.waits
	next := w.spare
	if next == nil {
		next = make(map[string]jobWait, len(snap.jobs))
	}
	clear(next)
	pending := map[metrics.Pending]int{}
	starved := 0
	q := snap.Queue
	for _, list := range [][]*priority.Decision{q.Order, q.Unschedulable, q.Running} {
		for _, d := range list {
			job := snap.jobs[d.Key]
			if job == nil {
				continue
			}
			tier := tierOf(model, job.User)
			running := d.Phase == priority.PhaseRunning
			admitted := running || d.Phase == priority.PhaseAdmitted
			if !running {
				pending[metrics.Pending{Phase: d.Phase, Tier: tier}]++
			}
			if d.Starved && d.Position > 0 {
				starved++
			}
			was, known := w.seen[d.Key]
			if !known || !was.created.Equal(job.Created) { // new, or deleted and created anew
				// Before the first snapshot it happened unseen; a new job that already runs
				// was bound by someone else.
				was = jobWait{created: job.Created, admitted: running || (!w.primed && admitted), bound: running}
			}
			if admitted && !was.admitted {
				c.metrics.JobAdmitted(tier, c.priorityClassOf(job), now.Sub(job.Created))
				was.admitted = true
			}
			if running && !was.bound {
				c.metrics.JobBound(tier, c.priorityClassOf(job), now.Sub(job.Created))
				was.bound = true
			}
			next[d.Key] = was
		}
	}
	c.metrics.PendingJobs(pending, starved)
	w.seen, w.spare, w.primed = next, w.seen, true
}

// tierOf names the tier of a user, as the user term reads it.
func tierOf(model priority.Model, user string) string {
	if tier, ok := model.UserTiers[user]; ok {
		return tier
	}
	return model.DefaultTier
}

// priorityClassOf names the PriorityClass of a job's first pod ("" for none, or a pod no
// longer in the cache).
func (c *Cluster) priorityClassOf(job *priority.Job) string {
	if len(job.Pods) == 0 || c.pods == nil {
		return ""
	}
	ns, name, _ := strings.Cut(job.Pods[0].Name, "/")
	pod, err := c.pods.Pods(ns).Get(name)
	if err != nil {
		return ""
	}
	return pod.Spec.PriorityClassName
}
