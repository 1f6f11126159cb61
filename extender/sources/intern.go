package sources

import (
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// internLimit bounds an internTable: when it holds this many entries it starts again
// empty (what was shared stays shared). The pods of a cluster ask for far fewer distinct
// containers than that; a churn of distinct ones costs memory up to the bound, not more.
const internLimit = 4096

// stringLimit bounds the strings an internTable shares, as internLimit the lists: a job's
// name and the nodes' names are among them, so it is well above their usual count.
const stringLimit = 1 << 16

// shared is the table the pod informer's transform interns into.
var shared = newInternTable()

// internTable hands out one copy of each distinct trimmed container list and toleration
// list, keyed by their full content: two pods get the same slice only when every field
// kept is equal. Safe for concurrent use.
type internTable struct {
	mu          sync.Mutex
	key         []byte
	containers  map[string][]corev1.Container
	tolerations map[string][]corev1.Toleration
	strings     map[string]string
	priorities  map[int32]*int32
}

func newInternTable() *internTable {
	return &internTable{containers: map[string][]corev1.Container{}, tolerations: map[string][]corev1.Toleration{},
		strings: map[string]string{}, priorities: map[int32]*int32{}}
}

// shareStrings points the strings of pod that other pods repeat at one shared copy each:
// its namespace and generateName, its label keys and values, its annotation keys and short
// values, its owner references, its node, scheduler and priority class names, its phase and
// its conditions' words; and its priority at one shared value. A decoded pod holds each
// string in an allocation of its own: at 100k pods as served, sharing them takes the
// informer cache from 211 to 190 MiB (HeapAtEnvelope; docs/history.md).
func (t *internTable) shareStrings(pod *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pod.Namespace, pod.GenerateName = t.str(pod.Namespace), t.str(pod.GenerateName)
	for k, v := range pod.Labels {
		pod.Labels[t.str(k)] = t.str(v) // an equal key: the entry's key is replaced, not added
	}
	for k, v := range pod.Annotations {
		if len(v) <= 64 {
			v = t.str(v)
		}
		pod.Annotations[t.str(k)] = v
	}
	for i := range pod.OwnerReferences {
		r := &pod.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name, r.UID = t.str(r.APIVersion), t.str(r.Kind), t.str(r.Name), types.UID(t.str(string(r.UID)))
	}
	spec := &pod.Spec
	spec.NodeName, spec.SchedulerName, spec.PriorityClassName = t.str(spec.NodeName), t.str(spec.SchedulerName), t.str(spec.PriorityClassName)
	if spec.Priority != nil {
		p, ok := t.priorities[*spec.Priority]
		if !ok {
			if len(t.priorities) >= internLimit {
				clear(t.priorities)
			}
			p = spec.Priority
			t.priorities[*p] = p
		}
		spec.Priority = p
	}
	pod.Status.Phase = corev1.PodPhase(t.str(string(pod.Status.Phase)))
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		c.Type, c.Status, c.Reason = corev1.PodConditionType(t.str(string(c.Type))), corev1.ConditionStatus(t.str(string(c.Status))), t.str(c.Reason)
	}
}

// str returns the shared copy of s, s itself the first time. t.mu is held.
func (t *internTable) str(s string) string {
	if s == "" {
		return s
	}
	if out, ok := t.strings[s]; ok {
		return out
	}
	if len(t.strings) >= stringLimit {
		clear(t.strings)
	}
	t.strings[s] = s
	return s
}

// sharedContainers returns cs trimmed (containerResources), shared with the pods whose trimmed
// containers are equal. nil stays nil.
func (t *internTable) sharedContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.key[:0]
	for i := range cs {
		c := &cs[i]
		k = appendString(k, c.Name)
		if c.RestartPolicy == nil {
			k = append(k, 0)
		} else {
			k = appendString(append(k, 1), string(*c.RestartPolicy))
		}
		k = appendResources(k, c.Resources.Requests)
		k = appendResources(k, c.Resources.Limits)
		k = strconv.AppendInt(k, int64(len(c.Resources.Claims)), 10)
		for _, cl := range c.Resources.Claims {
			k = appendString(appendString(k, cl.Name), cl.Request)
		}
	}
	t.key = k
	if out, ok := t.containers[string(k)]; ok {
		return out
	}
	if len(t.containers) >= internLimit {
		clear(t.containers)
	}
	out := containerResources(cs)
	t.containers[string(k)] = out
	return out
}

// sharedTolerations returns ts, or an equal slice some pod got before. nil stays nil.
func (t *internTable) sharedTolerations(ts []corev1.Toleration) []corev1.Toleration {
	if ts == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.key[:0]
	for i := range ts {
		tt := &ts[i]
		k = appendString(appendString(appendString(appendString(k, tt.Key), string(tt.Operator)), tt.Value), string(tt.Effect))
		if tt.TolerationSeconds == nil {
			k = append(k, 0)
		} else {
			k = strconv.AppendInt(append(k, 1), *tt.TolerationSeconds, 10)
		}
	}
	t.key = k
	if out, ok := t.tolerations[string(k)]; ok {
		return out
	}
	if len(t.tolerations) >= internLimit {
		clear(t.tolerations)
	}
	t.tolerations[string(k)] = ts
	return ts
}

// appendString appends s with its length, so that no two lists of strings give one key.
func appendString(k []byte, s string) []byte {
	k = strconv.AppendInt(k, int64(len(s)), 10)
	return append(append(k, ':'), s...)
}

// appendResources appends a resource list in name order, each quantity in its canonical
// form and format (equal keys: equal values, written alike).
func appendResources(k []byte, rl corev1.ResourceList) []byte {
	if rl == nil {
		return append(k, 'n')
	}
	names := make([]corev1.ResourceName, 0, len(rl))
	for name := range rl {
		names = append(names, name)
	}
	slices.Sort(names)
	k = strconv.AppendInt(append(k, 'r'), int64(len(names)), 10)
	for _, name := range names {
		q := rl[name]
		k = appendString(appendString(appendString(k, string(name)), q.String()), string(q.Format))
	}
	return k
}
