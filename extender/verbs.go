package extender

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// NodeLookup finds nodes of the cluster view by name.
type NodeLookup interface {
	// NodeName returns the view's own string for the node named b, and true; for a name the
	// view does not know, a copy of b and false. It keeps nothing of b.
	NodeName(b []byte) (name string, known bool)
}

// PodRef names one pod.
type PodRef struct {
	Namespace string
	Name      string
	UID       types.UID
}

func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

// Binder binds a pod to a node through the API server.
type Binder interface {
	Bind(ctx context.Context, pod PodRef, node string) error
}

// Decider makes the per-pod decisions of filter and prioritize from the current
// admission state, without calling the API server.
type Decider interface {
	NodeLookup
	// Admit says whether the pod may be placed now, and why not.
	Admit(pod *corev1.Pod) Admission
	// NodeCheck returns the pod's hard per-node constraint, or nil when it has none.
	NodeCheck(pod *corev1.Pod) func(node string) (conflict bool, reason string)
	// Score ranks the named nodes for the pod, 0..10 each, in the order given; out's array
	// is reused when it is large enough.
	Score(pod *corev1.Pod, nodes []string, out extenderv1.HostPriorityList) extenderv1.HostPriorityList
	// MayPreempt says whether the pod may preempt at all, and whether a victim pod (by
	// UID, namespace and name) may be evicted for it.
	MayPreempt(pod *corev1.Pod) bool
	MayEvict(victim PodRef) bool
}

// Admission is whether a pod may be placed now.
type Admission struct {
	OK bool
	// Reason says why not: the sentence the filter answers for every node. For a job in
	// the queue it is the decision's Wait, which reads the same until the wait changes.
	Reason string
	// Explain is the decision's whole Reason, with the job's place in the queue and its
	// P, for the Event on the pod ("" when there is none).
	Explain string
	// Queued is true when the pod's job is in the admission queue and waits for its turn
	// (false when the view has not seen the job yet).
	Queued bool
	// Unschedulable is true when the pod's job cannot fit even with no other job's pods on
	// the nodes: no turn can come until the nodes or the pods in no job change.
	Unschedulable bool
	// Job is the pod's job key ("" for a pod in no job).
	Job string
	// Retry is true when the view has not seen the pod's job yet: the filter answers with
	// an error, which kube-scheduler retries after its backoff, instead of turning the pod
	// away (which parks it until a cluster event). Every other wait ends with the job's
	// turn, which Turns brings to the pod.
	Retry bool
}

// WaitingNotifier tells a pod that waits for its job's turn why, e.g. with an Event on the
// pod. It must not block: it is called on the filter's path.
type WaitingNotifier interface {
	NotifyWaiting(pod *corev1.Pod, adm Admission)
}

// SchedulerVerbs answers kube-scheduler's filter, prioritize and bind.
type SchedulerVerbs struct {
	log     *zap.Logger
	decider Decider
	binder  Binder
	metrics *Metrics
	waiting WaitingNotifier
	turns   *Turns
	// scratches pools the memory of filter and prioritize calls (see scratch).
	scratches sync.Pool
}

// NewSchedulerVerbs builds the kube-scheduler verbs from their dependencies. binder is the
// gate (or, without a gate, a plain API binder); turns, which brings turned-away pods back
// when their job's turn comes, may be nil (then only cluster events bring them back).
func NewSchedulerVerbs(log *zap.Logger, decider Decider, binder Binder, turns *Turns) (*SchedulerVerbs, error) {
	if log == nil || decider == nil || binder == nil {
		return nil, fmt.Errorf("scheduler verbs: log, decider and binder are all required")
	}
	return &SchedulerVerbs{log: log, decider: decider, binder: binder, turns: turns}, nil
}

// Observe counts the filter's decisions in m and tells waiting pods why through w; either
// may be nil.
func (v *SchedulerVerbs) Observe(m *Metrics, w WaitingNotifier) {
	v.metrics, v.waiting = m, w
}

// decodeExtenderArgs decodes and checks the request of filter and prioritize into sc, the
// node names looked up in nodes (see nodeNames). Release sc once the answer is written.
func decodeExtenderArgs(w http.ResponseWriter, r *http.Request, maxBytes int64, sc *scratch, nodes NodeLookup) (*extenderv1.ExtenderArgs, error) {
	if err := readBody(w, r, maxBytes, sc); err != nil {
		return nil, err
	}
	sc.names.lookup = nodes
	args, err := parseExtenderArgs(sc.body.Bytes(), &sc.names)
	if err == nil {
		err = checkExtenderArgs(args)
	}
	return args, err
}

func checkExtenderArgs(args *extenderv1.ExtenderArgs) error {
	if args.Pod == nil {
		return badRequest("request has no Pod")
	}
	if args.Pod.Name == "" {
		return badRequest("request Pod has no metadata.name")
	}
	if args.NodeNames == nil && args.Nodes == nil {
		return badRequest("request has neither NodeNames (nodeCacheCapable: true) nor Nodes (nodeCacheCapable: false)")
	}
	return nil
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func (v *SchedulerVerbs) filter(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	sc := getScratch(&v.scratches)
	defer sc.release()
	args, err := decodeExtenderArgs(w, r, maxBytes, sc, v.decider)
	if err != nil {
		writeError(w, err)
		return
	}
	answer := v.decideFilter(args, sc)
	noteDecisionOf(r.Context(), func() (string, string) { return podKey(args.Pod), answer.summary() })
	writeAnswer(w, func(b []byte) []byte { return appendFilterAnswer(b, answer) })
}

// decideFilter applies the gang gate, then the per-node checks. A pod whose job waits for
// its turn gets every node back as failed and unresolvable (preempting victims would not
// give it the turn), with one reason. Nodes given by name that are not in the cluster view
// fail: the extender cannot judge a node it has not seen. sc, when not nil, lends the
// answer's lists.
func (v *SchedulerVerbs) decideFilter(args *extenderv1.ExtenderArgs, sc *scratch) *filterAnswer {
	if sc == nil {
		sc = &scratch{}
	}
	answer := &filterAnswer{ExtenderFilterResult: extenderv1.ExtenderFilterResult{
		FailedNodes:                extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
	}}
	result := &answer.ExtenderFilterResult
	names := candidateNames(args)
	adm := v.decider.Admit(args.Pod)
	ok, reason := adm.OK, adm.Reason
	var check func(string) (bool, string)
	if ok {
		check = v.decider.NodeCheck(args.Pod)
		v.metrics.gateDecision(VerbFilter, OutcomeAdmitted)
		v.turns.Passed(args.Pod)
	} else {
		v.metrics.gateDecision(VerbFilter, OutcomeWaiting)
		if adm.Queued && v.waiting != nil {
			v.waiting.NotifyWaiting(args.Pod, adm)
		}
		if adm.Retry || v.turns.Parked(args.Pod, adm.Job) {
			// An error, not a rejection: kube-scheduler retries it after its backoff
			// instead of parking the pod until the next cluster event. Either the view
			// has not seen the job yet, or its turn came since the decision was made.
			result.Error = reason
			return answer
		}
		answer.unresolvable, answer.reason = names, reason
	}
	known := sc.names.known
	if ok && args.NodeNames != nil && args.NodeNames != &sc.names.list {
		// Not parsed into sc (encoding/json decoded the request): look the names up.
		known = make([]bool, len(names))
		for i, name := range names {
			_, known[i] = v.decider.NodeName([]byte(name))
		}
	}
	sc.pass = grown(sc.pass, len(names))
	pass := sc.pass
	clear(pass)
	for i, name := range names {
		switch {
		case !ok:
		case args.NodeNames != nil && !known[i]:
			result.FailedNodes[name] = fmt.Sprintf("node %s is not in the extender's cluster view (yet)", name)
		default:
			if check != nil {
				if conflict, why := check(name); conflict {
					result.FailedNodes[name] = why
					continue
				}
			}
			pass[i] = true
		}
	}
	if args.NodeNames != nil {
		passed := sc.passed[:0]
		for i, name := range names {
			if pass[i] {
				passed = append(passed, name)
			}
		}
		sc.passed = passed
		result.NodeNames = &sc.passed
		return answer
	}
	passed := &corev1.NodeList{Items: make([]corev1.Node, 0, len(names))}
	for i := range args.Nodes.Items {
		if pass[i] {
			passed.Items = append(passed.Items, args.Nodes.Items[i])
		}
	}
	result.Nodes = passed
	return answer
}

// filterAnswer is a filter result. A waiting pod's answer has every node unresolvable for
// one reason: that is kept as the list of names and the reason, not as a map of thousands
// of entries built for each request; appendFilterAnswer writes it as the map.
type filterAnswer struct {
	extenderv1.ExtenderFilterResult
	unresolvable []string // nodes unresolvable for reason, besides FailedAndUnresolvableNodes
	reason       string
}

// result is the answer as the plain result type, the list folded into the map.
func (a *filterAnswer) result() *extenderv1.ExtenderFilterResult {
	r := a.ExtenderFilterResult
	if len(a.unresolvable) > 0 {
		r.FailedAndUnresolvableNodes = maps.Clone(r.FailedAndUnresolvableNodes)
		if r.FailedAndUnresolvableNodes == nil {
			r.FailedAndUnresolvableNodes = extenderv1.FailedNodesMap{}
		}
		for _, n := range a.unresolvable {
			r.FailedAndUnresolvableNodes[n] = a.reason
		}
	}
	return &r
}

func (a *filterAnswer) summary() string {
	r := &a.ExtenderFilterResult
	passed := 0
	if r.NodeNames != nil {
		passed = len(*r.NodeNames)
	} else if r.Nodes != nil {
		passed = len(r.Nodes.Items)
	}
	return fmt.Sprintf("passed %d, failed %d, unresolvable %d", passed, len(r.FailedNodes), len(r.FailedAndUnresolvableNodes)+len(a.unresolvable))
}

func (v *SchedulerVerbs) prioritize(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	sc := getScratch(&v.scratches)
	defer sc.release()
	args, err := decodeExtenderArgs(w, r, maxBytes, sc, v.decider)
	if err != nil {
		writeError(w, err)
		return
	}
	scores := v.decidePrioritize(args, sc)
	noteDecisionOf(r.Context(), func() (string, string) { return podKey(args.Pod), fmt.Sprintf("scored %d nodes", len(scores)) })
	writeAnswer(w, func(b []byte) []byte { return appendHostPriorityList(b, scores) })
}

// decidePrioritize ranks the candidates by PS-worker affinity; sc, when not nil, lends the
// list.
func (v *SchedulerVerbs) decidePrioritize(args *extenderv1.ExtenderArgs, sc *scratch) extenderv1.HostPriorityList {
	var out extenderv1.HostPriorityList
	if sc != nil {
		out = sc.scores
	}
	scores := v.decider.Score(args.Pod, candidateNames(args), out)
	if sc != nil {
		sc.scores = scores
	}
	return scores
}

// candidateNames lists the request's node names, whichever form the scheduler sent.
func candidateNames(args *extenderv1.ExtenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	names := make([]string, 0, len(args.Nodes.Items))
	for i := range args.Nodes.Items {
		names = append(names, args.Nodes.Items[i].Name)
	}
	return names
}

func (v *SchedulerVerbs) bind(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	var args extenderv1.ExtenderBindingArgs
	if err := decodeJSON(w, r, maxBytes, &args); err != nil {
		writeError(w, err)
		return
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"PodName", args.PodName}, {"PodNamespace", args.PodNamespace}, {"Node", args.Node}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		writeError(w, badRequest("bind request has no %s", strings.Join(missing, ", ")))
		return
	}
	pod := PodRef{Namespace: args.PodNamespace, Name: args.PodName, UID: args.PodUID}
	result := extenderv1.ExtenderBindingResult{}
	// The Binding must not be cut short when the scheduler drops the request: a bind that
	// reached the API server is finished (the scheduler checks spec.nodeName afterwards).
	if err := v.binder.Bind(context.WithoutCancel(r.Context()), pod, args.Node); err != nil {
		result.Error = err.Error()
		v.log.Warn("bind failed", zap.Stringer("pod", pod), zap.String("node", args.Node), zap.Error(err))
	}
	noteDecision(r.Context(), pod.String(), bindSummary(args.Node, result.Error))
	writeJSON(w, http.StatusOK, result)
}

func (v *SchedulerVerbs) preempt(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	var args extenderv1.ExtenderPreemptionArgs
	if err := decodeJSON(w, r, maxBytes, &args); err != nil {
		writeError(w, err)
		return
	}
	if args.Pod == nil {
		writeError(w, badRequest("request has no Pod"))
		return
	}
	result := v.decidePreempt(&args)
	noteDecision(r.Context(), podKey(args.Pod), fmt.Sprintf("%d candidate nodes kept", len(result.NodeNameToMetaVictims)))
	writeJSON(w, http.StatusOK, result)
}

// decidePreempt keeps the scheduler's own preemption from undoing the gate: a pod of a job
// that waits for its turn may preempt nothing, and no candidate node may evict a member of
// a gang (that would leave the gang below its minimum). Other candidates are kept as given.
func (v *SchedulerVerbs) decidePreempt(args *extenderv1.ExtenderPreemptionArgs) *extenderv1.ExtenderPreemptionResult {
	result := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
	if !v.decider.MayPreempt(args.Pod) {
		return result
	}
	keep := func(node string, victims []PodRef, pdbViolations int64) {
		meta := &extenderv1.MetaVictims{NumPDBViolations: pdbViolations}
		for _, victim := range victims {
			if !v.decider.MayEvict(victim) {
				return
			}
			meta.Pods = append(meta.Pods, &extenderv1.MetaPod{UID: string(victim.UID)})
		}
		result.NodeNameToMetaVictims[node] = meta
	}
	for node, mv := range args.NodeNameToMetaVictims {
		if mv == nil {
			continue
		}
		refs := make([]PodRef, 0, len(mv.Pods))
		for _, p := range mv.Pods {
			if p != nil {
				refs = append(refs, PodRef{UID: types.UID(p.UID)})
			}
		}
		keep(node, refs, mv.NumPDBViolations)
	}
	for node, victims := range args.NodeNameToVictims {
		if victims == nil || args.NodeNameToMetaVictims[node] != nil {
			continue
		}
		refs := make([]PodRef, 0, len(victims.Pods))
		for _, p := range victims.Pods {
			if p != nil {
				refs = append(refs, PodRef{Namespace: p.Namespace, Name: p.Name, UID: p.UID})
			}
		}
		keep(node, refs, victims.NumPDBViolations)
	}
	return result
}

func bindSummary(node, errMsg string) string {
	if errMsg != "" {
		return "bind error: " + errMsg
	}
	return "bound to " + node
}
