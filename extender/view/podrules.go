package view

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/extender/podrules"
	"github.com/cps-extender/cps-extender/priority"
)

// rulesOf gives each job of jobs its Rules (podrules.Cluster.Add), counting the pods bound
// to or held for a schedulable node; jobOf is every counted pod's job.
func rulesOf(jobs []*priority.Job, idx indexed, held, jobOf map[types.UID]string) {
	in := &podrules.Cluster{Placed: map[string][]podrules.Placed{}, JobOf: jobOf, Names: idx.names,
		Label: func(at int, key string) (string, bool) {
			v, ok := idx.schedulable[at].labels[key]
			return v, ok
		}}
	byUID := make(map[types.UID]*podRecord, len(idx.pods))
	for _, r := range idx.pods {
		byUID[r.uid] = r
		if at, ok := idx.placedAt(r, held); ok {
			in.Placed[r.namespace] = append(in.Placed[r.namespace], podrules.Placed{UID: r.uid, Namespace: r.namespace, Labels: r.labels,
				Node: at, Staying: !r.counted && !r.deleting})
		}
	}
	for _, job := range jobs {
		pods := make([]*podrules.Pod, len(job.Pods))
		for k := range job.Pods {
			if r := byUID[types.UID(job.Pods[k].UID)]; r != nil {
				pods[k] = &podrules.Pod{Namespace: r.namespace, Labels: r.labels, Rules: r.rules}
			}
		}
		in.Add(job, pods)
	}
}
