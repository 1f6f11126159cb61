// Package nodesel reads which nodes a pod may use, as kube-scheduler's NodeAffinity and
// TaintToleration filters read them: its node selector and required node affinity, and its
// tolerations against the nodes' NoSchedule and NoExecute taints, a node that is not Ready
// counting as tainted. Pods with equal constraints share one Constraints (Table), and the
// node set of each is worked out once per list of nodes (Sets). It imports priority.
package nodesel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/cps-extender/cps-extender/priority"
)

// notReadyTaint is the taint a node that is not Ready carries in a cluster with a node
// lifecycle controller (TaintNodesByCondition). A node whose Ready condition is not True
// counts as having it, whether or not a controller has set it yet.
var notReadyTaint = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}

// Constraints are what limits the nodes a pod may use: its node selector and required node
// affinity (NodeAffinity) and its tolerations (TaintToleration). Never changed once made.
type Constraints struct {
	// key is the canonical form: pods with equal keys may use the same nodes.
	key         string
	affinity    nodeaffinity.RequiredNodeAffinity
	selector    map[string]string
	hasAffinity bool // required node affinity terms, besides the selector
	tolerations []corev1.Toleration
}

// none are the constraints of a pod with no selector, affinity or tolerations: it may use
// every node without a taint.
var none = &Constraints{}

// Of returns the constraints of pod, or nil when it has none (no node selector, no required
// node affinity, no tolerations).
func Of(pod *corev1.Pod) *Constraints {
	key := keyOf(pod)
	if key == "" {
		return nil
	}
	return newConstraints(key, pod)
}

// keyOf is the canonical form of a pod's constraints ("" for none).
func keyOf(pod *corev1.Pod) string {
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

func newConstraints(key string, pod *corev1.Pod) *Constraints {
	c := &Constraints{key: key, affinity: nodeaffinity.GetRequiredNodeAffinity(pod), selector: pod.Spec.NodeSelector,
		tolerations: pod.Spec.Tolerations}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		c.hasAffinity = true
	}
	return c
}

// Same reports whether a and b are equal constraints (nil: none).
func Same(a, b *Constraints) bool {
	return a == b || (a != nil && b != nil && a.key == b.key)
}

// Node is what the constraints read of a node: its name and labels, and its taints.
type Node struct {
	// stub is the node as much as node affinity reads of it: name and labels.
	stub *corev1.Node
	// taints are the node's, and the not-ready taint when it is not Ready (taintsOf).
	taints []corev1.Taint
}

// NewNode reads n.
func NewNode(n *corev1.Node) *Node {
	return &Node{stub: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}, taints: taintsOf(n)}
}

// SameTaints reports whether two nodes carry the same taints, time stamps aside (their
// labels are not compared).
func SameTaints(a, b *Node) bool {
	return slices.EqualFunc(a.taints, b.taints, func(x, y corev1.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
	})
}

// taintsOf is a node's taints as the fit reads them: its own, and the not-ready taint when
// its Ready condition is there and not True.
func taintsOf(n *corev1.Node) []corev1.Taint {
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

// doNotSchedule keeps the taints that keep a pod that does not tolerate them off a node:
// NoSchedule and NoExecute (PreferNoSchedule only lowers a node's score).
func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// Sets gives the node set of each constraints over one list of nodes, working each out once.
// One goroutine at a time uses a Sets.
type Sets struct {
	nodes []*Node
	names []string
	byKey map[string]*priority.NodeSet
}

// NewSets is the Sets over nodes, named names.
func NewSets(nodes []*Node, names []string) *Sets {
	return &Sets{nodes: nodes, names: names, byKey: map[string]*priority.NodeSet{}}
}

// Of is the set of nodes a pod of constraints c (nil: none) may use, or nil when that is
// every node. Its words say what leaves the others out.
func (s *Sets) Of(c *Constraints) *priority.NodeSet {
	if c == nil {
		c = none
	}
	set, ok := s.byKey[c.key]
	if !ok {
		set = c.setOf(s.nodes, s.names)
		s.byKey[c.key] = set
	}
	return set
}

func (c *Constraints) setOf(nodes []*Node, names []string) *priority.NodeSet {
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

// Allows says whether pod may run on node n, and if not, why: its node selector and
// required node affinity against n's labels, its tolerations against n's taints, a node
// that is not Ready or is cordoned counting as tainted.
func Allows(pod *corev1.Pod, n *corev1.Node) (bool, string) {
	taints := taintsOf(n)
	if n.Spec.Unschedulable {
		taints = append(slices.Clone(taints), corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	c := newConstraints(keyOf(pod), pod)
	if ok, err := c.affinity.Match(n); err != nil || !ok {
		return false, "it does not match the pod's node selector and required node affinity"
	}
	if t, untolerated := v1helper.FindMatchingUntoleratedTaint(logr.Discard(), taints, c.tolerations, doNotSchedule, false); untolerated {
		return false, "it has a taint the pod does not tolerate (" + t.ToString() + ")"
	}
	return true, ""
}

// maxInterned bounds a Table; past it the table starts afresh.
const maxInterned = 4096

// Table interns constraints, so that the pods of a job, which mostly ask for the same, share
// one Constraints and one node set. The zero Table is ready; one goroutine at a time uses it.
type Table struct {
	byKey map[string]*Constraints
}

// Intern returns the shared constraints equal to c (nil for nil), making c the shared one
// when new.
func (t *Table) Intern(c *Constraints) *Constraints {
	if c == nil {
		return nil
	}
	if shared, ok := t.byKey[c.key]; ok {
		return shared
	}
	if t.byKey == nil || len(t.byKey) >= maxInterned {
		t.byKey = map[string]*Constraints{}
	}
	t.byKey[c.key] = c
	return c
}
