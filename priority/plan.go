package priority

import "slices"

// scorePlanned is score for a pod of an admitted job, given the admission fit's plan (pod
// UID -> node, Decision.Plan). kube-scheduler's binding cycles run behind its scheduling
// cycles, so a worker is often scored before its PS's bind has reached the extender. So:
//   - the job's pending pods that the plan puts on a node count as placed there (as held);
//   - the node planned for this very pod scores MaxAffinityScore, with the part
//     "planned-node", so the gang lands where the fit found room for all of it.
//
// With an empty plan it is score. The job is not changed.
func (a Affinity) scorePlanned(pod Pod, job *Job, plan map[string]string, candidates []Node, labelsOf func(node string) map[string]string) []NodeScore {
	if job == nil || len(plan) == 0 {
		return a.score(pod, job, candidates, labelsOf)
	}
	scores := a.score(pod, plannedJob(job, plan), candidates, labelsOf)
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

// Scorer is the one way to score PS-worker affinity: the scores of one pod of a job (under
// the admission fit's plan, when there is one) on candidate nodes. Scores gives them with
// their parts, for explanations; Score and ScoreAt give them one node at a time, without
// parts: what depends only on the pod, its job and the plan is worked out once, so scoring
// a node costs a few comparisons and lookups and allocates nothing, and prioritize over
// thousands of nodes stays close to the cost of decoding its request.
type Scorer struct {
	s        *scorer
	topology []string
	own      string
	planned  bool // own is set: the plan puts this pod on a node

	// What Scores recomputes with parts.
	affinity Affinity
	pod      Pod
	job      *Job
	plan     map[string]string
	labelsOf func(node string) map[string]string
}

// NewScorer prepares the scores of pod in job (nil: in no job) under plan (pod UID -> node;
// nil or empty: none); see score for the formula and scorePlanned for the plan. labelsOf
// gives a node's labels (nil: none). The job is not changed, and must not change while the
// scorer is used.
func (a Affinity) NewScorer(pod Pod, job *Job, plan map[string]string, labelsOf func(node string) map[string]string) *Scorer {
	if job == nil {
		return &Scorer{s: &scorer{}, topology: a.Topology, affinity: a, pod: pod, labelsOf: labelsOf}
	}
	out := &Scorer{topology: a.Topology, affinity: a, pod: pod, job: job, plan: plan, labelsOf: labelsOf}
	if len(plan) > 0 {
		job = plannedJob(job, plan)
		out.own, out.planned = plan[pod.UID]
	}
	out.s = a.newScorer(pod, job, labelsOf)
	return out
}

// Scores are the candidates' scores with their parts, in the order given.
func (p *Scorer) Scores(candidates []Node) []NodeScore {
	return p.affinity.scorePlanned(p.pod, p.job, p.plan, candidates, p.labelsOf)
}

// Score is node n's score, as Scores would give it among any candidates.
func (p *Scorer) Score(n *Node) int64 { return p.ScoreAt(-1, n) }

// On prepares the scorer for candidates from x's node list (see ScoreAt). It reports false,
// and changes nothing, when x was built for other topology levels than the scorer's.
func (p *Scorer) On(x *NodeIndex) bool {
	if x == nil || !slices.Equal(x.topology, p.topology) {
		return false
	}
	p.s.on(x)
	return true
}

// ScoreAt is Score(n) for n, node i of the list the index given to On was built from; i < 0
// (or no On) scores n from its labels.
func (p *Scorer) ScoreAt(i int, n *Node) int64 {
	if p.planned && n.Name == p.own {
		return MaxAffinityScore
	}
	return p.s.scoreAt(i, n, nil)
}
