package view

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/cps-extender/cps-extender/priority"
)

// notReadyTaint is the taint a node that is not Ready carries in a cluster with a node
// lifecycle controller (TaintNodesByCondition). A node record whose Ready condition is not
// True counts as having it, whether or not a controller has set it yet.
var notReadyTaint = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}

// podConstraints are what limits the nodes a pod may use, as kube-scheduler's filter
// plugins read them: its node selector and required node affinity (NodeAffinity) and its
// tolerations (TaintToleration). Pod records with equal constraints share one.
type podConstraints struct {
	// key is the canonical form: pods with equal keys may use the same nodes.
	key         string
	affinity    nodeaffinity.RequiredNodeAffinity
	selector    map[string]string
	hasAffinity bool // required node affinity terms, besides the selector
	tolerations []corev1.Toleration
}

// constraintsKey is the canonical form of a pod's constraints ("" for none: no selector,
// no required node affinity, no tolerations).
func constraintsKey(pod *corev1.Pod) string {
	var required *corev1.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	if len(pod.Spec.NodeSelector) == 0 && required == nil && len(pod.Spec.Tolerations) == 0 {
		return ""
	}
	// encoding/json writes map keys sorted: equal constraints give equal bytes.
	b, err := json.Marshal(struct {
		Selector    map[string]string    `json:"s,omitempty"`
		Required    *corev1.NodeSelector `json:"a,omitempty"`
		Tolerations []corev1.Toleration  `json:"t,omitempty"`
	}{pod.Spec.NodeSelector, required, pod.Spec.Tolerations})
	if err != nil { // cannot happen for these types; a key of its own keeps it apart
		return "unencodable:" + string(pod.UID)
	}
	return string(b)
}

func newPodConstraints(key string, pod *corev1.Pod) *podConstraints {
	c := &podConstraints{key: key, affinity: nodeaffinity.GetRequiredNodeAffinity(pod), selector: pod.Spec.NodeSelector,
		tolerations: pod.Spec.Tolerations}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		c.hasAffinity = true
	}
	return c
}

// doNotSchedule keeps the taints that keep a pod that does not tolerate them off a node:
// NoSchedule and NoExecute (PreferNoSchedule only lowers a node's score).
func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// nodeSetOf is the set of nodes a pod with constraints c may use, among nodes (named
// names), or nil when that is all of them. Its words say what leaves the others out.
func nodeSetOf(c *podConstraints, nodes []*nodeRecord, names []string) *priority.NodeSet {
	var in []string
	bySelector, byTaint := 0, 0
	var taints []string
	for i, n := range nodes {
		if ok, err := c.affinity.Match(n.stub); err != nil || !ok {
			bySelector++
			continue
		}
		if t, untolerated := v1helper.FindMatchingUntoleratedTaint(logr.Discard(), n.taints, c.tolerations, doNotSchedule, false); untolerated {
			byTaint++
			if s := t.ToString(); !slices.Contains(taints, s) {
				taints = append(taints, s)
			}
			continue
		}
		in = append(in, names[i])
	}
	if bySelector+byTaint == 0 {
		return nil
	}
	var why []string
	if bySelector > 0 {
		switch {
		case len(c.selector) > 0 && c.hasAffinity:
			why = append(why, "matching its node selector ("+selectorText(c.selector)+") and required node affinity")
		case len(c.selector) > 0:
			why = append(why, "matching its node selector ("+selectorText(c.selector)+")")
		default:
			why = append(why, "matching its required node affinity")
		}
	}
	if byTaint > 0 {
		slices.Sort(taints)
		if len(taints) > 2 {
			taints = append(taints[:2], "...")
		}
		why = append(why, "without a taint it does not tolerate ("+strings.Join(taints, ", ")+")")
	}
	return priority.NewNodeSet(fmt.Sprintf("the %d of %d nodes %s", len(in), len(nodes), strings.Join(why, " and ")), in)
}

// selectorText writes a node selector as k=v pairs, sorted.
func selectorText(sel map[string]string) string {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(sel[k])
	}
	return b.String()
}

// nodeTaints is a node's taints as the fit reads them: its own, and the not-ready taint
// when its Ready condition is there and not True.
func nodeTaints(n *corev1.Node) []corev1.Taint {
	taints := n.Spec.Taints
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			if !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.MatchTaint(&notReadyTaint) }) {
				taints = append(slices.Clone(taints), notReadyTaint)
			}
		}
	}
	return taints
}

// sameTaints reports whether two taint lists are equal, time stamps aside.
func sameTaints(a, b []corev1.Taint) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
	})
}

// allows says whether a pod of constraints c may use node n, and if not, why.
func (c *podConstraints) allows(n *corev1.Node, taints []corev1.Taint) (bool, string) {
	if ok, err := c.affinity.Match(n); err != nil || !ok {
		return false, "it does not match the pod's node selector and required node affinity"
	}
	if t, untolerated := v1helper.FindMatchingUntoleratedTaint(logr.Discard(), taints, c.tolerations, doNotSchedule, false); untolerated {
		return false, "it has a taint the pod does not tolerate (" + t.ToString() + ")"
	}
	return true, ""
}
