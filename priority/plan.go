package priority

import "slices"

// ScorePlanned is Score for a pod of an admitted job, given the admission fit's plan (pod
// UID -> node, Decision.Plan). kube-scheduler's binding cycles run behind its scheduling
// cycles, so a worker is often scored before its PS's bind has reached the extender. So:
//   - the job's pending pods that the plan puts on a node count as placed there (as held);
//   - the node planned for this very pod scores MaxAffinityScore, with the part
//     "planned-node", so the gang lands where the fit found room for all of it.
//
// With an empty plan it is Score. The job is not changed.
func (a Affinity) ScorePlanned(pod Pod, job *Job, plan map[string]string, candidates []Node, labelsOf func(node string) map[string]string) []NodeScore {
	if job == nil || len(plan) == 0 {
		return a.Score(pod, job, candidates, labelsOf)
	}
	scores := a.Score(pod, plannedJob(job, plan), candidates, labelsOf)
	if own, ok := plan[pod.UID]; ok {
		for i := range scores {
			if scores[i].Node == own {
				scores[i].Score = MaxAffinityScore
				scores[i].Parts = append(scores[i].Parts, ScorePart{Name: "planned-node", Value: 1})
			}
		}
	}
	return scores
}

// plannedJob is a copy of job whose pending pods that plan puts on a node are held there.
func plannedJob(job *Job, plan map[string]string) *Job {
	planned := *job
	planned.Pods = make([]Pod, len(job.Pods))
	copy(planned.Pods, job.Pods)
	for i := range planned.Pods {
		p := &planned.Pods[i]
		if node, ok := plan[p.UID]; ok && p.State == PodPending {
			p.State, p.Node = PodHeld, node
		}
	}
	return &planned
}

// PlannedScorer gives, one node at a time, the scores ScorePlanned gives, without their
// parts. What depends only on the pod, its job and the plan is worked out once, so
// scoring a node costs a few comparisons and lookups and allocates nothing: prioritize
// over thousands of nodes stays close to the cost of decoding its request.
type PlannedScorer struct {
	s        *scorer
	topology []string
	own      string
	planned  bool // own is set: the plan puts this pod on a node
}

// NewPlannedScorer prepares the scores of pod in job (nil: in no job) under plan; see
// ScorePlanned. The job is not changed, and must not change while the scorer is used.
func (a Affinity) NewPlannedScorer(pod Pod, job *Job, plan map[string]string, labelsOf func(node string) map[string]string) *PlannedScorer {
	if job == nil {
		return &PlannedScorer{s: &scorer{}, topology: a.Topology}
	}
	out := &PlannedScorer{topology: a.Topology}
	if len(plan) > 0 {
		job = plannedJob(job, plan)
		out.own, out.planned = plan[pod.UID]
	}
	out.s = a.newScorer(pod, job, labelsOf)
	return out
}

// Score is node n's score, as ScorePlanned would give it among any candidates.
func (p *PlannedScorer) Score(n *Node) int64 { return p.ScoreAt(-1, n) }

// On prepares the scorer for candidates from x's node list (see ScoreAt). It reports false,
// and changes nothing, when x was built for other topology levels than the scorer's.
func (p *PlannedScorer) On(x *NodeIndex) bool {
	if x == nil || !slices.Equal(x.topology, p.topology) {
		return false
	}
	p.s.on(x)
	return true
}

// ScoreAt is Score(n) for n, node i of the list the index given to On was built from; i < 0
// (or no On) scores n from its labels.
func (p *PlannedScorer) ScoreAt(i int, n *Node) int64 {
	if p.planned && n.Name == p.own {
		return MaxAffinityScore
	}
	return p.s.scoreAt(i, n, nil)
}
