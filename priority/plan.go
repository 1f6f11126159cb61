package priority

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
	planned := *job
	planned.Pods = make([]Pod, len(job.Pods))
	copy(planned.Pods, job.Pods)
	for i := range planned.Pods {
		p := &planned.Pods[i]
		if node, ok := plan[p.UID]; ok && p.State == PodPending {
			p.State, p.Node = PodHeld, node
		}
	}
	scores := a.Score(pod, &planned, candidates, labelsOf)
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
