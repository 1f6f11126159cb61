package podrules

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/priority"
)

// Pod is what a job's rules read of one of its pods.
type Pod struct {
	Namespace string
	Labels    map[string]string
	Rules     *Rules // nil: none
}

// Placed is a pod bound to or held for a node the model places on.
type Placed struct {
	UID       types.UID
	Namespace string
	Labels    map[string]string
	Node      int // the node's position (Cluster.Label, Cluster.Names)
	// Staying: in no job and not being deleted, it stays when the jobs' pods are gone.
	Staying bool
}

// Cluster is what the rules count in: the placed pods, each pod's job, and the nodes.
type Cluster struct {
	Placed map[string][]Placed                       // by namespace
	JobOf  map[types.UID]string                      // job keys by pod UID
	Label  func(node int, key string) (string, bool) // a node's label, by position
	Names  []string                                  // the nodes' names, by position
	// namespaces is every namespace with a placed pod, sorted; made on first use.
	namespaces []string
}

// ruleRefs is p's RuleRefs, made when it has none. The pods Add is given are the job's
// own, built for this recompute: nothing else holds their RuleRefs.
func ruleRefs(p *priority.Pod) *priority.RuleRefs {
	if p.RuleRefs == nil {
		p.RuleRefs = &priority.RuleRefs{}
	}
	return p.RuleRefs
}

// Add gives job, whose pods are pods (in job.Pods' order, nil for one not known), its Rules:
// each distinct term of its pods once, which pods keep (required) or prefer (preferred) it
// and which it counts, and the placed pods of other jobs and of none that it counts, by
// domain.
func (c *Cluster) Add(job *priority.Job, pods []*Pod) {
	ids := map[string]int{}
	var terms []*Term
	for k, p := range pods {
		if p == nil || p.Rules == nil {
			continue
		}
		for i := range p.Rules.Terms {
			t := &p.Rules.Terms[i]
			at, ok := ids[t.ID]
			if !ok {
				at = len(terms)
				ids[t.ID] = at
				terms = append(terms, t)
			}
			refs := ruleRefs(&job.Pods[k])
			list := &refs.Keeps
			if t.Weight > 0 {
				list = &refs.Prefers
			}
			if !slices.Contains(*list, at) { // a term given twice is one rule
				*list = append(*list, at)
			}
		}
	}
	if len(terms) == 0 {
		return
	}
	job.Rules = make([]priority.Rule, len(terms))
	for at, t := range terms {
		rule := priority.Rule{Kind: t.Kind, Key: t.Topology, MaxSkew: t.MaxSkew, Weight: t.Weight, Why: t.Why,
			Elsewhere: map[string]int{}, Staying: map[string]int{}}
		for k, p := range pods {
			if p != nil && t.Counts(p.Namespace, p.Labels) {
				refs := ruleRefs(&job.Pods[k])
				refs.Counts = append(refs.Counts, at)
			}
		}
		namespaces := t.Namespaces
		if t.Every {
			namespaces = c.allNamespaces()
		}
		for _, ns := range namespaces {
			for _, p := range c.Placed[ns] {
				if c.JobOf[p.UID] == job.Key || !t.Counts(p.Namespace, p.Labels) {
					continue
				}
				value, ok := c.Label(p.Node, t.Topology)
				if !ok && t.Topology == priority.HostnameLevel {
					value, ok = c.Names[p.Node], true
				}
				if !ok {
					continue
				}
				rule.Elsewhere[value]++
				if p.Staying {
					rule.Staying[value]++
				}
			}
		}
		job.Rules[at] = rule
	}
}

// allNamespaces is every namespace with a placed pod, sorted.
func (c *Cluster) allNamespaces() []string {
	if c.namespaces == nil {
		c.namespaces = make([]string, 0, len(c.Placed))
		for ns := range c.Placed {
			c.namespaces = append(c.namespaces, ns)
		}
		slices.Sort(c.namespaces)
	}
	return c.namespaces
}
