// Package tenant reads who a job's user is and whether its urgency is granted: a pod's
// labels count where the gang config lets its namespace say so; otherwise the namespace's
// labels and name decide, since who may edit a namespace decides its user, not who may create
// pods in it. The labels it does not honour earn a Warning. It imports config and gang.
package tenant

import (
	"fmt"
	"slices"

	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/gang"
)

// Where a job's user comes from (priority.Job.UserFrom).
const (
	UserFromPodLabel       = "pod label"
	UserFromNamespaceLabel = "namespace label"
	UserFromNamespace      = "namespace"
)

// ReasonLabelIgnored is the reason of a Warning for a label the extender does not honour
// where the pod is.
const ReasonLabelIgnored = "LabelIgnored"

// Warning is a Warning Event for a pod, sent once per Key (a job, mostly) an hour.
type Warning struct {
	Reason, Key, Message string
}

// Reader reads users and urgency against the namespaces' labels.
type Reader struct {
	namespaces corelisters.NamespaceLister
}

// NewReader reads namespaces' labels from namespaces; nil reads none, as if no namespace
// had labels.
func NewReader(namespaces corelisters.NamespaceLister) Reader {
	return Reader{namespaces: namespaces}
}

// label is a label of a namespace ("" for none, or a namespace not known).
func (r Reader) label(namespace, key string) string {
	if r.namespaces == nil {
		return ""
	}
	ns, err := r.namespaces.Get(namespace)
	if err != nil {
		return ""
	}
	return ns.Labels[key]
}

// UserOf names the user of a job whose pod in namespace names fromPod ("" for none), and
// where it came from: the pod's label where its namespace may name its pods' user
// (gang.podUserNamespaces), else the namespace's label, else the namespace's name.
func (r Reader) UserOf(g config.GangConfig, namespace, fromPod string) (user, from string) {
	if fromPod != "" && podMayNameUser(g, namespace) {
		return fromPod, UserFromPodLabel
	}
	if user := r.label(namespace, g.UserLabel); user != "" {
		return user, UserFromNamespaceLabel
	}
	return namespace, UserFromNamespace
}

// podMayNameUser reports whether pods of namespace may name their own user.
func podMayNameUser(g config.GangConfig, namespace string) bool {
	return slices.Contains(g.PodUserNamespaces, namespace) || slices.Contains(g.PodUserNamespaces, "*")
}

// UrgencyOf is config.GangConfig.UrgencyOf with the namespace's gang.urgentNamespaceLabel
// read from the namespaces.
func (r Reader) UrgencyOf(g config.GangConfig, namespace, priorityClass string, labelled bool) (from string, ignored bool) {
	allowed := labelled && gang.IsTrue(r.label(namespace, g.UrgentNamespaceLabel))
	return g.UrgencyOf(namespace, priorityClass, labelled, allowed)
}

// Warned is the label warnings given, by job key, a bit per label.
type Warned map[string]uint8

// LabelWarnings are the Warnings for the labels of a job's pod (m, in namespace, of
// priorityClass) that the extender does not honour there: a user named by a pod whose
// namespace may not, and urgency claimed by a pod whose namespace may not. With warned, one
// given is left out and one new is noted: one sentence per job and label, not per pod.
func (r Reader) LabelWarnings(g config.GangConfig, namespace, priorityClass string, m gang.Membership, warned Warned) []Warning {
	const userBit, urgentBit = 1, 2
	fresh := func(bit uint8) bool {
		if warned == nil {
			return true
		}
		if warned[m.JobKey]&bit != 0 {
			return false
		}
		warned[m.JobKey] |= bit
		return true
	}
	var out []Warning
	if m.User != "" && !podMayNameUser(g, namespace) && fresh(userBit) {
		user, from := r.UserOf(g, namespace, "")
		out = append(out, Warning{Reason: ReasonLabelIgnored, Key: m.JobKey + "\x00user",
			Message: fmt.Sprintf("label %s=%s is ignored: namespace %s may not name its pods' user (gang.podUserNamespaces); job %s is ranked as user %s (from the %s)",
				g.UserLabel, m.User, namespace, m.JobKey, user, from)})
	}
	if _, ignored := r.UrgencyOf(g, namespace, priorityClass, m.Urgent); ignored && fresh(urgentBit) {
		out = append(out, Warning{Reason: ReasonLabelIgnored, Key: m.JobKey + "\x00urgent",
			Message: fmt.Sprintf("%s=true is ignored: namespace %s may not mark its jobs urgent (gang.urgentLabelNamespaces, or the namespace label %s=true); job %s is not urgent unless it uses one of the PriorityClasses in gang.urgentPriorityClasses",
				g.UrgentLabel, namespace, g.UrgentNamespaceLabel, m.JobKey)})
	}
	return out
}
