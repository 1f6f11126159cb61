package view

import (
	"slices"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/priority"
)

// Layout returns what /debug/nodes and the queue page show of the current snapshot: the
// schedulable nodes (free capacity and labels, by name), the jobs by key with their queue, the
// topology label keys, nearest first, and when it was computed. Everything returned belongs to
// the immutable snapshot: read it, never write it. Before the first sync q is nil.
func (c *Cluster) Layout() (nodes []priority.Node, jobs []*priority.Job, q *priority.Queue, topology []string, computed time.Time) {
	snap := c.Snapshot()
	if snap == nil {
		return nil, nil, nil, nil, time.Time{}
	}
	jobs = make([]*priority.Job, 0, len(snap.jobs))
	for _, j := range snap.jobs {
		jobs = append(jobs, j)
	}
	slices.SortFunc(jobs, func(a, b *priority.Job) int { return strings.Compare(a.Key, b.Key) })
	if snap.cfg != nil {
		topology = snap.cfg.affinity.Topology
	}
	return snap.nodes, jobs, snap.Queue, topology, snap.Computed
}
