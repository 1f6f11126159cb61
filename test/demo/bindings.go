package main

import (
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// bindRecorder watches the demo's pods (through an informer, which survives watch
// restarts) and records when each was first seen bound to a node, and when it was deleted.
// Pods are keyed namespace/name.
type bindRecorder struct {
	namespaces map[string]bool // the pods recorded are these namespaces'

	mu      sync.Mutex
	boundAt map[string]time.Time // pod -> first seen with a node
	nodeOf  map[string]string    // pod -> node
	gone    map[string]bool      // pod -> deleted

	stopOnce sync.Once
	stopCh   chan struct{}
}

// recordBindings starts recording the bindings of the pods in namespaces (one informer over
// every namespace, the others' pods ignored) and returns once the informer has synced.
func recordBindings(c kubernetes.Interface, namespaces []string) (*bindRecorder, error) {
	r := newBindRecorder(namespaces)
	factory := informers.NewSharedInformerFactory(c, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.observe,
		UpdateFunc: func(_, obj any) { r.observe(obj) },
		DeleteFunc: r.deleted,
	}); err != nil {
		return nil, err
	}
	factory.Start(r.stopCh)
	for typ, ok := range factory.WaitForCacheSync(r.stopCh) {
		if !ok {
			r.Stop()
			return nil, fmt.Errorf("pod informer (%v) did not sync", typ)
		}
	}
	return r, nil
}

// newBindRecorder returns a recorder of the pods in namespaces, not yet fed by an informer.
func newBindRecorder(namespaces []string) *bindRecorder {
	r := &bindRecorder{
		namespaces: map[string]bool{},
		boundAt:    map[string]time.Time{},
		nodeOf:     map[string]string{},
		gone:       map[string]bool{},
		stopCh:     make(chan struct{}),
	}
	for _, ns := range namespaces {
		r.namespaces[ns] = true
	}
	return r
}

// Stop ends the recording. It is idempotent.
func (r *bindRecorder) Stop() { r.stopOnce.Do(func() { close(r.stopCh) }) }

// observe records a pod the first time it is seen with a node.
func (r *bindRecorder) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || !r.namespaces[pod.Namespace] {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.boundAt[key]; !seen {
		r.boundAt[key] = time.Now()
		r.nodeOf[key] = pod.Spec.NodeName
	}
}

// deleted records a deleted pod.
func (r *bindRecorder) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok && r.namespaces[pod.Namespace] {
		r.mu.Lock()
		r.gone[pod.Namespace+"/"+pod.Name] = true
		r.mu.Unlock()
	}
}

// BoundCount counts the pods among names (namespace/name) that have been bound.
func (r *bindRecorder) BoundCount(names []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := r.boundAt[name]; ok {
			n++
		}
	}
	return n
}

// Gone reports whether every pod among names has been deleted.
func (r *bindRecorder) Gone(names []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if !r.gone[name] {
			return false
		}
	}
	return true
}

// FirstGone returns the first pod among names that has been deleted, or "".
func (r *bindRecorder) FirstGone(names []string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if r.gone[name] {
			return name
		}
	}
	return ""
}

// span returns when the first and the last of names were bound; ok is false unless all were.
func (r *bindRecorder) span(names []string) (first, last time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		at, bound := r.boundAt[name]
		if !bound {
			return time.Time{}, time.Time{}, false
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last, len(names) > 0
}

// boundJob is a job that became fully bound: when its first and its last pod were bound.
type boundJob struct {
	job         jobSpec
	first, last time.Time
}

// FullyBound returns the jobs whose every pod was bound, in the order they became fully
// bound.
func (r *bindRecorder) FullyBound(jobs []jobSpec) []boundJob {
	var out []boundJob
	for _, j := range jobs {
		if first, last, ok := r.span(j.PodKeys()); ok {
			out = append(out, boundJob{job: j, first: first, last: last})
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].last.Before(out[b].last) })
	return out
}
