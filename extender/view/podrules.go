package view

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/priority"
)

// ruleInput is what addRules reads of one recompute: every pod record, the schedulable
// nodes, the held binds and each counted pod's job.
type ruleInput struct {
	pods   []*podRecord
	nodes  []*nodeRecord
	names  []string
	nodeAt map[string]int
	held   map[types.UID]string
	jobOf  map[types.UID]string
	// placed is the pods bound to or held for a schedulable node, by namespace, made on
	// first use.
	placed map[string][]placedRecord
}

type placedRecord struct {
	r    *podRecord
	node int
}

// placedIn lists the pods bound to or held for a schedulable node in namespace ns.
func (in *ruleInput) placedIn(ns string) []placedRecord {
	if in.placed == nil {
		in.placed = map[string][]placedRecord{}
		for _, r := range in.pods {
			if r.terminated {
				continue
			}
			node := r.node
			if node == "" {
				node = in.held[r.uid]
			}
			if at, ok := in.nodeAt[node]; ok && node != "" {
				in.placed[r.namespace] = append(in.placed[r.namespace], placedRecord{r, at})
			}
		}
	}
	return in.placed[ns]
}

// addRules gives job, whose pods' records are recs (in job.Pods' order), its Rules: each
// distinct term of its pods once, which pods keep and which it counts, and the pods of
// other jobs and of none that it counts, by domain.
func addRules(job *priority.Job, recs []*podRecord, in *ruleInput) {
	ids := map[string]int{}
	var terms []*gang.PodTerm
	for k, r := range recs {
		if r == nil || r.rules == nil {
			continue
		}
		for i := range r.rules.Terms {
			t := &r.rules.Terms[i]
			at, ok := ids[t.ID]
			if !ok {
				at = len(terms)
				ids[t.ID] = at
				terms = append(terms, t)
			}
			if !slices.Contains(job.Pods[k].Keeps, at) { // a term given twice is one rule
				job.Pods[k].Keeps = append(job.Pods[k].Keeps, at)
			}
		}
	}
	if len(terms) == 0 {
		return
	}
	job.Rules = make([]priority.Rule, len(terms))
	for at, t := range terms {
		rule := priority.Rule{Kind: t.Kind, Key: t.Topology, MaxSkew: t.MaxSkew, Why: t.Why,
			Elsewhere: map[string]int{}, Staying: map[string]int{}}
		for k, r := range recs {
			if r != nil && t.Counts(r.namespace, r.labels) {
				job.Pods[k].Counts = append(job.Pods[k].Counts, at)
			}
		}
		namespaces := t.Namespaces
		if t.Every {
			namespaces = namespacesOf(in)
		}
		for _, ns := range namespaces {
			for _, p := range in.placedIn(ns) {
				if in.jobOf[p.r.uid] == job.Key || !t.Counts(p.r.namespace, p.r.labels) {
					continue
				}
				value, ok := in.nodes[p.node].labels[t.Topology]
				if !ok && t.Topology == priority.HostnameLevel {
					value, ok = in.names[p.node], true
				}
				if !ok {
					continue
				}
				rule.Elsewhere[value]++
				if !p.r.counted && !p.r.deleting { // in no job: it stays when the jobs' pods are gone
					rule.Staying[value]++
				}
			}
		}
		job.Rules[at] = rule
	}
}

// namespacesOf is every namespace with a placed pod.
func namespacesOf(in *ruleInput) []string {
	in.placedIn("")
	out := make([]string, 0, len(in.placed))
	for ns := range in.placed {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// rulesOf gives each job of jobs its Rules (addRules), finding its pods' records by UID.
func rulesOf(jobs []*priority.Job, in *ruleInput) {
	byUID := make(map[types.UID]*podRecord, len(in.pods))
	for _, r := range in.pods {
		byUID[r.uid] = r
	}
	for _, job := range jobs {
		recs := make([]*podRecord, len(job.Pods))
		for k := range job.Pods {
			recs[k] = byUID[types.UID(job.Pods[k].UID)]
		}
		addRules(job, recs, in)
	}
}
