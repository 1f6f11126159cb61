package sources

import (
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// internLimit bounds an internTable: when it holds this many entries it starts again
// empty (what was shared stays shared). The pods of a cluster ask for far fewer distinct
// containers than that; a churn of distinct ones costs memory up to the bound, not more.
const internLimit = 4096

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
}

func newInternTable() *internTable {
	return &internTable{containers: map[string][]corev1.Container{}, tolerations: map[string][]corev1.Toleration{}}
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
