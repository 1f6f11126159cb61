package extender

import (
	"sort"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/priority"
)

// HoldSource tells the view which binds the gate holds and which jobs cool down, so that
// held pods count as placed and cooling jobs lose the turn.
type HoldSource interface {
	// Held maps the UID of every pod whose bind is held to its target node.
	Held() map[types.UID]string
	// CoolDowns maps job keys to the end of their cool-down.
	CoolDowns() map[string]time.Time
}

// Snapshot is one computed admission state: the queue, and the jobs it was computed from.
// It is immutable once published; handlers read it without locks.
type Snapshot struct {
	Queue    *priority.Queue
	Computed time.Time
	jobs     map[string]*priority.Job
	podJob   map[types.UID]string
	nameJob  map[string]string // "namespace/name" -> job key, for binds without a UID
	nodes    []priority.Node   // free capacity, sorted by name
	nodeAt   map[string]int
	hardPS   map[string]bool // jobs whose PodGroup asks for hard PS anti-affinity
}

// node returns a node's free capacity and labels (an empty node when unknown).
func (s *Snapshot) node(name string) priority.Node {
	if i, ok := s.nodeAt[name]; ok {
		return s.nodes[i]
	}
	return priority.Node{Name: name}
}

// JobOf returns the job key of a pod, by UID or else by namespace/name.
func (s *Snapshot) JobOf(uid types.UID, namespace, name string) (string, bool) {
	if s == nil {
		return "", false
	}
	if uid != "" {
		if k, ok := s.podJob[uid]; ok {
			return k, true
		}
	}
	k, ok := s.nameJob[namespace+"/"+name]
	return k, ok
}

// Job returns a job and its admission decision.
func (s *Snapshot) Job(key string) (*priority.Job, *priority.Decision, bool) {
	if s == nil {
		return nil, nil, false
	}
	j, ok := s.jobs[key]
	if !ok {
		return nil, nil, false
	}
	d, ok := s.Queue.Lookup(key)
	return j, d, ok
}

// recompute rebuilds the admission state from the informer caches and publishes it.
func (c *Cluster) recompute(now time.Time) {
	start := time.Now()
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		c.log.Error("listing pods from the cache", zap.Error(err))
		return
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.log.Error("listing nodes from the cache", zap.Error(err))
		return
	}
	var held map[types.UID]string
	coolDowns := map[string]time.Time{}
	if c.holds != nil {
		held, coolDowns = c.holds.Held(), c.holds.CoolDowns()
	}
	cfg := c.config()
	// One request per pod, shared by the free capacity and the jobs' views.
	requests := make([]priority.Resources, len(pods))
	for i, pod := range pods {
		if !podTerminated(pod) {
			requests[i] = podRequest(pod)
		}
	}
	state := priority.State{Nodes: freeCapacity(nodes, pods, requests, held), CoolDown: coolDowns}
	snap := &Snapshot{
		Computed: now,
		jobs:     map[string]*priority.Job{},
		podJob:   map[types.UID]string{},
		nameJob:  map[string]string{},
		nodes:    state.Nodes,
		nodeAt:   make(map[string]int, len(state.Nodes)),
		hardPS:   map[string]bool{},
	}
	for i := range state.Nodes {
		snap.nodeAt[state.Nodes[i].Name] = i
	}
	exempt := map[string]bool{}
	for _, ns := range cfg.gang.ExemptNamespaces {
		exempt[ns] = true
	}
	for i, pod := range pods {
		if podTerminated(pod) || pod.DeletionTimestamp != nil || exempt[pod.Namespace] {
			continue
		}
		m, ok := cfg.gang.membershipOf(pod, c.podGroup)
		if !ok {
			continue
		}
		job := snap.jobs[m.jobKey]
		if job == nil {
			job = &priority.Job{Key: m.jobKey, Created: m.created}
			snap.jobs[m.jobKey] = job
		}
		addMember(job, pod, requests[i], m, held)
		if m.hardPSAntiAffinity {
			snap.hardPS[m.jobKey] = true
		}
		if job.User == "" {
			job.User = c.userOf(pod, m.user, cfg.gang.UserLabel)
		}
		snap.podJob[pod.UID] = m.jobKey
		snap.nameJob[pod.Namespace+"/"+pod.Name] = m.jobKey
	}
	state.Jobs = make([]priority.Job, 0, len(snap.jobs))
	for _, j := range snap.jobs {
		state.Jobs = append(state.Jobs, *j)
	}
	snap.Queue = cfg.model.Admit(state, now)
	c.snapshot.Store(snap)
	c.metrics.observeQueue(snap.Queue, len(held))
	if ce := c.log.Check(zap.DebugLevel, "queue recomputed"); ce != nil {
		ce.Write(zap.Int("jobs", len(snap.jobs)), zap.Int("queue", snap.Queue.Len()), zap.Duration("took", time.Since(start)))
	}
}

// addMember adds one pod to its job's view.
func addMember(job *priority.Job, pod *corev1.Pod, req priority.Resources, m membership, held map[types.UID]string) {
	p := priority.Pod{
		UID: string(pod.UID), Name: pod.Namespace + "/" + pod.Name, Role: m.role, Index: m.index,
		Request: req, Gated: len(pod.Spec.SchedulingGates) > 0,
	}
	switch node, isHeld := held[pod.UID]; {
	case pod.Spec.NodeName != "":
		p.State, p.Node = priority.PodBound, pod.Spec.NodeName
	case isHeld:
		p.State, p.Node = priority.PodHeld, node
	}
	job.Pods = append(job.Pods, p)
	if m.minMember > job.MinMember {
		job.MinMember = m.minMember
	}
	if pod.Spec.Priority != nil && (len(job.Pods) == 1 || *pod.Spec.Priority > job.Priority) {
		job.Priority = *pod.Spec.Priority
	}
	job.Urgent = job.Urgent || m.urgent
	if m.created.IsZero() && (job.Created.IsZero() || pod.CreationTimestamp.Time.Before(job.Created)) {
		job.Created = pod.CreationTimestamp.Time
	}
}

// userOf names the user of a job: the pod's label, else its namespace's label, else the
// namespace's name.
func (c *Cluster) userOf(pod *corev1.Pod, fromPod, userLabel string) string {
	if fromPod != "" {
		return fromPod
	}
	if c.namespaces != nil {
		if ns, err := c.namespaces.Get(pod.Namespace); err == nil && ns.Labels[userLabel] != "" {
			return ns.Labels[userLabel]
		}
	}
	return pod.Namespace
}

// freeCapacity is every schedulable node's allocatable minus the requests of the pods
// bound or held there (requests[i] is pods[i]'s), sorted by name.
func freeCapacity(nodes []*corev1.Node, pods []*corev1.Pod, requests []priority.Resources, held map[types.UID]string) []priority.Node {
	index := make(map[string]int, len(nodes))
	out := make([]priority.Node, 0, len(nodes))
	for _, n := range nodes {
		if n.Spec.Unschedulable {
			continue
		}
		free := priority.Resources{}
		addList(free, n.Status.Allocatable)
		out = append(out, priority.Node{Name: n.Name, Free: free, Labels: n.Labels})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for i := range out {
		index[out[i].Name] = i
	}
	for j, pod := range pods {
		if podTerminated(pod) {
			continue
		}
		node := pod.Spec.NodeName
		if node == "" {
			node = held[pod.UID]
		}
		i, ok := index[node]
		if node == "" || !ok {
			continue
		}
		for k, v := range requests[j] {
			out[i].Free[k] -= v
		}
		if _, ok := out[i].Free["pods"]; ok {
			out[i].Free["pods"]--
		}
	}
	return out
}
