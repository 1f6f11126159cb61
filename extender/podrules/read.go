// Package podrules reads a pod's pod affinity and anti-affinity terms and its topology
// spread constraints, required and preferred (Of), and turns those of a job's pods into the
// model's priority.Rules, counting the placed pods of other jobs and of none by domain
// (Cluster.Add). It imports priority.
package podrules

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/cps-extender/cps-extender/priority"
)

// Rules are a pod's placement rules as kube-scheduler reads them against other pods: its
// pod affinity and anti-affinity terms (InterPodAffinity) and its topology spread
// constraints (PodTopologySpread). Required terms and DoNotSchedule constraints are kept
// (Weight 0); preferred terms, with their weight, and ScheduleAnyway constraints, with
// weight 100 (the most a preferred term weighs), only steer the plan.
type Rules struct {
	// Key is the canonical text of every term: records with equal keys have equal rules.
	Key   string
	Terms []Term
}

// Term is one rule of a pod: which pods it counts (selector, namespaces) and what it
// asks of the domains of its topology key.
type Term struct {
	Kind     priority.RuleKind
	Topology string
	MaxSkew  int
	// Weight is 0 for a required term, else the preferred term's weight (1-100).
	Weight   int
	selector labels.Selector
	// Every: the term counts pods of every namespace; else those of Namespaces.
	Every      bool
	Namespaces []string
	// ID is the term's canonical text: equal terms of a job's pods are one rule.
	ID  string
	Why string
}

// Of reads a pod's rules; nil when it has none.
func Of(pod *corev1.Pod) *Rules {
	var terms []Term
	if a := pod.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			terms = affinityTerms(terms, pod, priority.RuleTogether, pa.RequiredDuringSchedulingIgnoredDuringExecution,
				pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			terms = affinityTerms(terms, pod, priority.RuleApart, pa.RequiredDuringSchedulingIgnoredDuringExecution,
				pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	for i := range pod.Spec.TopologySpreadConstraints {
		c := &pod.Spec.TopologySpreadConstraints[i]
		weight := 0
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			weight = scheduleAnywayWeight
		}
		t := Term{Kind: priority.RuleSpread, Topology: c.TopologyKey, MaxSkew: int(c.MaxSkew), Weight: weight,
			selector:   withLabelKeys(selectorOf(c.LabelSelector), pod.Labels, c.MatchLabelKeys, selection.In),
			Namespaces: []string{pod.Namespace}}
		terms = append(terms, t.named())
	}
	if len(terms) == 0 {
		return nil
	}
	ids := make([]string, len(terms))
	for i := range terms {
		ids[i] = terms[i].ID
	}
	return &Rules{Key: strings.Join(ids, "\n"), Terms: terms}
}

// scheduleAnywayWeight is the weight of a ScheduleAnyway spread constraint: the most a
// preferred term weighs (kube-scheduler weighs its spread and affinity scores alike).
const scheduleAnywayWeight = 100

// affinityTerms appends to terms a pod's required and preferred pod (anti-)affinity terms
// of one kind that are modelled.
func affinityTerms(terms []Term, pod *corev1.Pod, kind priority.RuleKind, required []corev1.PodAffinityTerm,
	preferred []corev1.WeightedPodAffinityTerm) []Term {
	for i := range required {
		if t, ok := affinityTerm(pod, &required[i], kind, 0); ok {
			terms = append(terms, t)
		}
	}
	for i := range preferred {
		if t, ok := affinityTerm(pod, &preferred[i].PodAffinityTerm, kind, int(preferred[i].Weight)); ok {
			terms = append(terms, t)
		}
	}
	return terms
}

// affinityTerm reads one pod (anti-)affinity term, required (weight 0) or preferred. A
// term whose namespaces are chosen by a non-empty namespace selector is not modelled
// (false): kube-scheduler still enforces or scores it.
func affinityTerm(pod *corev1.Pod, at *corev1.PodAffinityTerm, kind priority.RuleKind, weight int) (Term, bool) {
	t := Term{Kind: kind, Topology: at.TopologyKey, Weight: weight, Namespaces: slices.Clone(at.Namespaces)}
	sel := withLabelKeys(selectorOf(at.LabelSelector), pod.Labels, at.MatchLabelKeys, selection.In)
	t.selector = withLabelKeys(sel, pod.Labels, at.MismatchLabelKeys, selection.NotIn)
	switch ns := at.NamespaceSelector; {
	case ns != nil && len(ns.MatchLabels) == 0 && len(ns.MatchExpressions) == 0:
		t.Every = true // the empty selector: every namespace
	case ns != nil:
		return Term{}, false
	case len(t.Namespaces) == 0:
		t.Namespaces = []string{pod.Namespace}
	}
	slices.Sort(t.Namespaces)
	return t.named(), true
}

// selectorOf is a label selector as a labels.Selector; a nil selector, or one the API
// server would not have accepted, selects nothing, as kube-scheduler reads it.
func selectorOf(ls *metav1.LabelSelector) labels.Selector {
	if ls == nil {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// withLabelKeys adds to sel, for each key the pod has a label of, key op (its value):
// matchLabelKeys (In) and mismatchLabelKeys (NotIn). The API server has mostly merged them
// into the selector already; adding one twice changes nothing.
func withLabelKeys(sel labels.Selector, podLabels map[string]string, keys []string, op selection.Operator) labels.Selector {
	if _, selectable := sel.Requirements(); !selectable {
		return sel // labels.Nothing() stays nothing
	}
	for _, k := range keys {
		v, ok := podLabels[k]
		if !ok {
			continue
		}
		r, err := labels.NewRequirement(k, op, []string{v})
		if err != nil {
			continue
		}
		have, _ := sel.Requirements()
		if !slices.ContainsFunc(have, r.Equal) {
			sel = sel.Add(*r)
		}
	}
	return sel
}

// named fills the term's id and its words.
func (t Term) named() Term {
	pods := "pods " + t.selector.String()
	if _, selectable := t.selector.Requirements(); !selectable {
		pods = "no pod"
	} else if t.selector.Empty() {
		pods = "every pod"
	}
	switch {
	case t.Every:
		pods += " in every namespace"
	case len(t.Namespaces) > 1:
		pods += " in namespaces " + strings.Join(t.Namespaces, ",")
	}
	how, weighed := "required", ""
	if t.Weight > 0 {
		how, weighed = "preferred", "weight "+strconv.Itoa(t.Weight)+", "
	}
	switch t.Kind {
	case priority.RuleApart:
		t.Why = "its " + how + " pod anti-affinity by " + t.Topology + " (" + weighed + pods + ")"
	case priority.RuleTogether:
		t.Why = "its " + how + " pod affinity by " + t.Topology + " (" + weighed + pods + ")"
	case priority.RuleSpread:
		what := "topology spread constraint"
		if t.Weight > 0 {
			what = "ScheduleAnyway " + what
		}
		t.Why = "its " + what + " by " + t.Topology + " (maxSkew " + strconv.Itoa(t.MaxSkew) + ", " + pods + ")"
	}
	t.ID = strconv.Itoa(int(t.Kind)) + "|" + strconv.Itoa(t.Weight) + "|" + t.Topology + "|" + strconv.Itoa(t.MaxSkew) + "|" + strconv.FormatBool(t.Every) + "|" +
		strings.Join(t.Namespaces, ",") + "|" + t.selector.String()
	return t
}

// Counts reports whether the term counts a pod of namespace with podLabels: in one of its
// namespaces, its labels matching its selector.
func (t *Term) Counts(namespace string, podLabels map[string]string) bool {
	if !t.Every && !slices.Contains(t.Namespaces, namespace) {
		return false
	}
	return t.selector.Matches(labels.Set(podLabels))
}

// Same reports whether a and b are the same rules.
func Same(a, b *Rules) bool {
	return a == b || (a != nil && b != nil && a.Key == b.Key)
}
