// Package scheduler answers kube-scheduler's extender verbs: filter (the gang gate's turn
// and the per-node checks), prioritize (PS-worker affinity), bind (through the gate) and
// preempt (never a gang member). It decodes, asks the view, and encodes; it imports view,
// gang, wire and metrics.
package scheduler

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/extender/wire"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/clock"
)

// The kube-scheduler extender verbs, served under the URL prefix.
const (
	VerbFilter     = "filter"
	VerbPrioritize = "prioritize"
	VerbBind       = "bind"
	VerbPreempt    = "preempt"
)

// NodeLookup finds nodes of the cluster view by name.
type NodeLookup interface {
	// NodeName returns the view's own string for the node named b, and true; for a name the
	// view does not know, a copy of b and false. It keeps nothing of b.
	NodeName(b []byte) (name string, known bool)
}

// Binder binds a pod to a node through the API server. ctx ends when the scheduler drops
// the request: a bind not yet under way may then be dropped, a Binding under way is
// finished.
type Binder interface {
	Bind(ctx context.Context, pod gang.PodRef, node string) error
}

// Decider gives each request the decisions of the view's current snapshot, asked once per
// request: all of one answer comes from one snapshot.
type Decider func() Decisions

// Decisions are the per-pod decisions of filter, prioritize and preempt from one admission
// state, made without calling the API server (view.Decisions).
type Decisions interface {
	NodeLookup
	// Admit says whether the pod may be placed now, and why not.
	Admit(pod *corev1.Pod) view.Admission
	// NodeCheck returns the pod's hard per-node constraint, or nil when it has none.
	NodeCheck(pod *corev1.Pod) func(node string) (conflict bool, reason string)
	// Score ranks the named nodes for the pod, 0..10 each, in the order given; out's array
	// is reused when it is large enough.
	Score(pod *corev1.Pod, nodes []string, out extenderv1.HostPriorityList) extenderv1.HostPriorityList
	// Planned is the node the admission plan puts the pod on ("" when none).
	Planned(pod *corev1.Pod) string
	// Unclaimed tells, for a pod in no job, whether it fits on a node in room that no job
	// of the queue counts on.
	Unclaimed(pod *corev1.Pod) func(node string) bool
	// MayPreempt says whether the pod may preempt at all, and whether a victim pod (by
	// UID, namespace and name) may be evicted for it.
	MayPreempt(pod *corev1.Pod) bool
	MayEvict(victim gang.PodRef) bool
	// BindCheck says whether the extender may bind the pod to node at all (a pod of a
	// scheduler it serves, a node the pod may use), whoever asks.
	BindCheck(ctx context.Context, pod gang.PodRef, node string) error
}

// WaitingNotifier tells a pod that waits for its job's turn why, e.g. with an Event on the
// pod. It must not block: it is called on the filter's path.
type WaitingNotifier interface {
	NotifyWaiting(pod *corev1.Pod, adm view.Admission)
	// Warn tells the user of a pod of something they most likely did not mean
	// (view.Admission.Warnings).
	Warn(pod *corev1.Pod, warning view.Warning)
}

// Turns tracks the pods the filter turns away, so that they come back when their job's turn
// comes (turns.Turns).
type Turns interface {
	// Parked records that pod was turned away while its job waited; true means the job
	// has the turn already and nothing was recorded: the filter decides again on a newer
	// snapshot (see settle).
	Parked(pod *corev1.Pod, job string) (turnCame bool)
	// Passed forgets a pod the filter let through.
	Passed(pod *corev1.Pod)
}

// noTurns is the Turns of verbs built without one: only cluster events bring pods back.
type noTurns struct{}

func (noTurns) Parked(*corev1.Pod, string) bool { return false }
func (noTurns) Passed(*corev1.Pod)              {}

// Verbs answers kube-scheduler's filter, prioritize and bind.
type Verbs struct {
	log     *zap.Logger
	decider Decider
	binder  Binder
	metrics *metrics.Metrics
	waiting WaitingNotifier
	turns   Turns
	// nextView, catchUp and clock: see AwaitView.
	nextView func() <-chan struct{}
	catchUp  time.Duration
	clock    clock.Clock
	// scratches pools the memory of filter and prioritize calls (see scratch).
	scratches sync.Pool
}

// New builds the kube-scheduler verbs from their dependencies. binder is the
// gate (or, without a gate, a plain API binder); turns, which brings turned-away pods back
// when their job's turn comes, may be nil (then only cluster events bring them back).
func New(log *zap.Logger, decider Decider, binder Binder, turns Turns) (*Verbs, error) {
	if log == nil || decider == nil || binder == nil {
		return nil, fmt.Errorf("scheduler verbs: log, decider and binder are all required")
	}
	if turns == nil {
		turns = noTurns{}
	}
	return &Verbs{log: log, decider: decider, binder: binder, turns: turns}, nil
}

// Observe counts the filter's decisions in m and tells waiting pods why through w; either
// may be nil.
func (v *Verbs) Observe(m *metrics.Metrics, w WaitingNotifier) {
	v.metrics, v.waiting = m, w
}

// ViewCatchUp is how long the filter waits for the view to see a new pod, or the rest of a
// gang being created (AwaitView): the view recomputes within milliseconds of a pod event,
// and a pod not seen in a quarter of a second is better retried after kube-scheduler's
// backoff, or turned away, than holding its scheduling cycle longer.
const ViewCatchUp = 250 * time.Millisecond

// AwaitView makes the filter wait up to max for the cluster view to see a pod it has not
// seen yet (kube-scheduler's informer delivered the pod first, or its job is new) instead
// of answering at once with an error: kube-scheduler retries an error only after its
// backoff, a second or more, while the view catches up in milliseconds. It waits the same
// way for the rest of a gang whose pods are being created (view.Admission.Gathering): a
// controller creates a job's pods within milliseconds, kube-scheduler takes the first one
// before the last exists, and a pod turned away comes back only after an event and its
// backoff. And it waits for the snapshot of the changes the view had received when a pod
// it would turn away came (view.Admission.Changes, Latest): kube-scheduler tries a parked pod
// again on the event that frees its room, and the view recomputes for that event a few
// milliseconds later. next is the view's Next. The wait holds kube-scheduler's scheduling cycle,
// which places one pod at a time: a view that stays behind costs every attempt of a pod it
// has not seen max, and a gang whose pods come one by one costs max for each pod created
// within view.GatherWindow of its first.
func (v *Verbs) AwaitView(next func() <-chan struct{}, max time.Duration, clk clock.Clock) {
	v.nextView, v.catchUp, v.clock = next, max, clk
}

// fresh returns d and its admission of pod, or, when AwaitView is set and d has not seen
// pod, its gang is still being created, or it turns pod away on a snapshot older than the
// view's changes, those of the first snapshot without that cause, or of the last one
// published within the wait.
func (v *Verbs) fresh(ctx context.Context, d Decisions, pod *corev1.Pod) (Decisions, view.Admission) {
	adm := d.Admit(pod)
	latest := adm.Latest
	if v.nextView == nil || v.catchUp <= 0 || !awaits(adm, latest) {
		return d, adm
	}
	start, cause := v.clock.Now(), waitCause(adm)
	defer func() { v.metrics.ViewWait(cause, v.clock.Since(start)) }()
	timer := v.clock.NewTimer(v.catchUp)
	defer timer.Stop()
	for {
		next := v.nextView()
		d = v.decider()
		if adm = d.Admit(pod); !awaits(adm, latest) {
			return d, adm
		}
		select {
		case <-next:
		case <-timer.C():
			return d, adm
		case <-ctx.Done():
			return d, adm
		}
	}
}

// awaits says whether the filter should wait for a newer snapshot before answering adm: the
// snapshot has not seen the pod, its gang is being created, or the pod waits for its turn
// on a snapshot older than the changes the view had received when the request came
// (latest). kube-scheduler tries a parked pod again on the event that frees room for it,
// often before the view has recomputed for that event; turned away then, the pod would come
// back only after its backoff. The last wait is bounded by the next recompute (and the rest
// before it, see view.nextRecompute), not by the changes that come meanwhile.
func awaits(adm view.Admission, latest uint64) bool {
	return adm.Retry || adm.Gathering || (adm.Queued && adm.Changes < latest)
}

// waitCause names what the filter waits for on adm, for the metrics.
func waitCause(adm view.Admission) string {
	switch {
	case adm.Retry:
		return metrics.ViewWaitUnseen
	case adm.Gathering:
		return metrics.ViewWaitGathering
	default:
		return metrics.ViewWaitBehind
	}
}

// redecideLimit is how many times the filter decides again, on the newest snapshot, for a
// pod whose job got its turn while it was being decided, before it answers with a retry.
const redecideLimit = 2

// settle returns d and adm, or, when the newest published snapshot gives the job of a pod
// d turns away its turn already, the decisions and admission of the newest snapshot. A pod
// that still waits is recorded with Turns as parked, and parked reports it; one that would
// be turned away on an older snapshot than its turn, again and again, is neither (the
// filter answers it with a retry). Deciding again costs microseconds; the retry costs the
// pod kube-scheduler's backoff, a second or more.
func (v *Verbs) settle(d Decisions, adm view.Admission, pod *corev1.Pod) (_ Decisions, _ view.Admission, parked bool) {
	for tries := 0; !adm.OK && !adm.Retry; tries++ {
		if !v.turns.Parked(pod, adm.Job) {
			return d, adm, true
		}
		if tries == redecideLimit {
			break
		}
		d = v.decider()
		adm = d.Admit(pod)
	}
	return d, adm, false
}

// Routes are the kube-scheduler verbs, served under prefix once the cluster view has synced.
func (v *Verbs) Routes(prefix string) []wire.Route {
	return []wire.Route{
		{Path: prefix + "/" + VerbFilter, Verb: VerbFilter, Handler: v.filter, NeedsView: true, Kind: wire.KindScheduler},
		{Path: prefix + "/" + VerbPrioritize, Verb: VerbPrioritize, Handler: v.prioritize, NeedsView: true, Kind: wire.KindScheduler},
		{Path: prefix + "/" + VerbBind, Verb: VerbBind, Handler: v.bind, NeedsView: true, Kind: wire.KindScheduler, Held: true},
		{Path: prefix + "/" + VerbPreempt, Verb: VerbPreempt, Handler: v.preempt, NeedsView: true, Kind: wire.KindScheduler},
	}
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
		return wire.BadRequest("request has no Pod")
	}
	if args.Pod.Name == "" {
		return wire.BadRequest("request Pod has no metadata.name")
	}
	if args.NodeNames == nil && args.Nodes == nil {
		return wire.BadRequest("request has neither NodeNames (nodeCacheCapable: true) nor Nodes (nodeCacheCapable: false)")
	}
	return nil
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func (v *Verbs) filter(w http.ResponseWriter, r *http.Request, c wire.Call) wire.Note {
	sc := getScratch(&v.scratches)
	defer sc.release()
	d := v.decider()
	args, err := decodeExtenderArgs(w, r, c.MaxBytes, sc, d)
	if err != nil {
		wire.WriteError(w, err)
		return wire.Note{}
	}
	d, adm := v.fresh(r.Context(), d, args.Pod)
	d, adm, parked := v.settle(d, adm, args.Pod)
	answer := v.decideFilter(d, adm, parked, args, sc)
	writeAnswer(w, func(b []byte) []byte { return appendFilterAnswer(b, answer) })
	if !c.Detailed {
		return wire.Note{}
	}
	return wire.Note{Pod: podKey(args.Pod), Decision: answer.summary()}
}

// decideFilter applies the gang gate (adm, d's admission of the pod), then the per-node
// checks. A pod whose job waits for its turn, and that was recorded as parked (see settle),
// gets every node back as failed and unresolvable (preempting victims would not give it
// the turn), with one reason; one that was not gets a retry. Nodes given by name that are
// not in the cluster view fail: the extender cannot judge a node it has not seen. sc, when
// not nil, lends the answer's lists.
func (v *Verbs) decideFilter(d Decisions, adm view.Admission, parked bool, args *extenderv1.ExtenderArgs, sc *scratch) *filterAnswer {
	if sc == nil {
		sc = &scratch{}
	}
	answer := &filterAnswer{ExtenderFilterResult: extenderv1.ExtenderFilterResult{
		FailedNodes:                extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
	}}
	result := &answer.ExtenderFilterResult
	names := candidateNames(args)
	ok, reason := adm.OK, adm.Reason
	if v.waiting != nil {
		for _, warning := range adm.Warnings {
			v.waiting.Warn(args.Pod, warning)
		}
	}
	var check func(string) (bool, string)
	if ok {
		check = d.NodeCheck(args.Pod)
		v.metrics.GateDecision(VerbFilter, metrics.OutcomeAdmitted)
		v.turns.Passed(args.Pod)
	} else {
		v.metrics.GateDecision(VerbFilter, metrics.OutcomeWaiting)
		if adm.Queued && v.waiting != nil {
			v.waiting.NotifyWaiting(args.Pod, adm)
		}
		if !parked {
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
			_, known[i] = d.NodeName([]byte(name))
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
	if ok {
		// The nodes a narrowing leaves out are not reported as failed. kube-scheduler uses
		// the failed nodes' reasons only when no node passes every extender, and this answer
		// always passes one; should a later extender reject it, the nodes left out count
		// as unresolvable without a reason (docs/operations.md). Listed, they were most of
		// the answer (999 reasons on 1000 nodes), and decoding them most of kube-scheduler's
		// time in the extender (docs/history.md, 2026-12-07).
		before := count(pass)
		if planned := d.Planned(args.Pod); planned != "" {
			if narrowToPlan(pass, names, planned) {
				answer.why = notPlannedReason(planned)
			}
		} else if adm.Job == "" && narrowToUnclaimed(pass, names, d.Unclaimed(args.Pod)) {
			answer.why = claimedReason
		}
		answer.leftOut = before - count(pass)
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

// narrowToPlan keeps only the planned node among the passing ones when it passes, and says
// whether it did: with one feasible node kube-scheduler neither scores the nodes nor calls
// prioritize, most of its cycle on 1000 nodes (docs/performance.md). A plan whose node does
// not pass leaves every passing node, and prioritize ranks them.
func narrowToPlan(pass []bool, names []string, planned string) bool {
	if planned == "" {
		return false
	}
	at := slices.Index(names, planned)
	if at < 0 || !pass[at] {
		return false
	}
	clear(pass)
	pass[at] = true
	return true
}

// narrowToUnclaimed keeps, of the passing nodes, those where the pod (in no job) fits in
// room that no job of the queue counts on, when there are some and not all are, and says
// whether it narrowed: such a pod goes around the plans, reservations and room kept for
// arriving gangs when it can (else it takes room a gang was planned on, and that gang, or
// one of higher P, may then never gather), and anywhere when it cannot: it never waits
// for the queue.
func narrowToUnclaimed(pass []bool, names []string, unclaimed func(node string) bool) bool {
	some, all := false, true
	for i, name := range names {
		if pass[i] {
			free := unclaimed(name)
			some, all = some || free, all && free
		}
	}
	if !some || all {
		return false
	}
	// Asked again rather than kept from the first pass: no scratch a request.
	for i, name := range names {
		pass[i] = pass[i] && unclaimed(name)
	}
	return true
}

// claimedReason is why a node that would do is not one for a pod in no job.
const claimedReason = "its free room is planned or kept for a queued gang; the pod fits on other nodes"

// filterAnswer is a filter result. A waiting pod's answer has every node unresolvable for
// one reason: that is kept as the list of names and the reason, not as a map of thousands
// of entries built for each request; appendFilterAnswer writes it as the map.
type filterAnswer struct {
	extenderv1.ExtenderFilterResult
	unresolvable []string // nodes unresolvable for reason, besides FailedAndUnresolvableNodes
	reason       string
	// leftOut is how many nodes passed every check but were left out, for one reason
	// (why): not the node planned for the pod, or, for a pod in no job, room a queued gang
	// counts on. They are in no list of the answer; the debug log counts them.
	leftOut int
	why     string
}

// count is the number of true values in pass.
func count(pass []bool) int {
	n := 0
	for _, p := range pass {
		if p {
			n++
		}
	}
	return n
}

// notPlannedReason is why a node that would do is not the one for an admitted pod.
func notPlannedReason(planned string) string {
	return "the job's plan puts this pod on node " + planned
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
	out := fmt.Sprintf("passed %d, failed %d, unresolvable %d", passed, len(r.FailedNodes), len(r.FailedAndUnresolvableNodes)+len(a.unresolvable))
	if a.leftOut > 0 {
		out += fmt.Sprintf(", left out %d (%s)", a.leftOut, a.why)
	}
	return out
}

func (v *Verbs) prioritize(w http.ResponseWriter, r *http.Request, c wire.Call) wire.Note {
	sc := getScratch(&v.scratches)
	defer sc.release()
	d := v.decider()
	args, err := decodeExtenderArgs(w, r, c.MaxBytes, sc, d)
	if err != nil {
		wire.WriteError(w, err)
		return wire.Note{}
	}
	scores := v.decidePrioritize(d, args, sc)
	writeAnswer(w, func(b []byte) []byte { return appendHostPriorityList(b, scores) })
	if !c.Detailed {
		return wire.Note{}
	}
	decision := fmt.Sprintf("scored %d nodes", len(scores))
	if planned := d.Planned(args.Pod); planned != "" {
		// A plan kube-scheduler cannot follow shows here: its node is not a candidate.
		decision += "; planned " + planned
		if !slices.Contains(candidateNames(args), planned) {
			decision += ", which is not a candidate"
		}
	}
	return wire.Note{Pod: podKey(args.Pod), Decision: decision}
}

// decidePrioritize ranks the candidates by PS-worker affinity; sc, when not nil, lends the
// list.
func (v *Verbs) decidePrioritize(d Decisions, args *extenderv1.ExtenderArgs, sc *scratch) extenderv1.HostPriorityList {
	var out extenderv1.HostPriorityList
	if sc != nil {
		out = sc.scores
	}
	scores := d.Score(args.Pod, candidateNames(args), out)
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

func (v *Verbs) bind(w http.ResponseWriter, r *http.Request, c wire.Call) wire.Note {
	var args extenderv1.ExtenderBindingArgs
	if err := wire.DecodeJSON(w, r, c.MaxBytes, &args); err != nil {
		wire.WriteError(w, err)
		return wire.Note{}
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"PodName", args.PodName}, {"PodNamespace", args.PodNamespace}, {"Node", args.Node}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		wire.WriteError(w, wire.BadRequest("bind request has no %s", strings.Join(missing, ", ")))
		return wire.Note{}
	}
	pod := gang.PodRef{Namespace: args.PodNamespace, Name: args.PodName, UID: args.PodUID}
	if err := v.decider().BindCheck(r.Context(), pod, args.Node); err != nil {
		v.metrics.GateDecision(VerbBind, metrics.OutcomeRefused)
		wire.WriteJSON(w, http.StatusOK, extenderv1.ExtenderBindingResult{Error: err.Error()})
		return wire.Note{Pod: pod.String(), Decision: "refused: " + err.Error()}
	}
	result := extenderv1.ExtenderBindingResult{}
	// The request's own context: when the scheduler drops the request, a bind held while
	// its gang gathers is dropped too. The binder finishes a Binding under way (a bind that
	// reached the API server is finished; the scheduler checks spec.nodeName afterwards).
	if err := v.binder.Bind(r.Context(), pod, args.Node); err != nil {
		result.Error = err.Error()
		v.log.Warn("bind failed", zap.Stringer("pod", pod), zap.String("node", args.Node), zap.Error(err))
	}
	wire.WriteJSON(w, http.StatusOK, result)
	return wire.Note{Pod: pod.String(), Decision: bindSummary(args.Node, result.Error)}
}

func (v *Verbs) preempt(w http.ResponseWriter, r *http.Request, c wire.Call) wire.Note {
	var args extenderv1.ExtenderPreemptionArgs
	if err := wire.DecodeJSON(w, r, c.MaxBytes, &args); err != nil {
		wire.WriteError(w, err)
		return wire.Note{}
	}
	if args.Pod == nil {
		wire.WriteError(w, wire.BadRequest("request has no Pod"))
		return wire.Note{}
	}
	result := v.decidePreempt(v.decider(), &args)
	wire.WriteJSON(w, http.StatusOK, result)
	return wire.Note{Pod: podKey(args.Pod), Decision: fmt.Sprintf("%d candidate nodes kept", len(result.NodeNameToMetaVictims))}
}

// decidePreempt keeps the scheduler's own preemption from undoing the gate: a pod of a job
// that waits for its turn may preempt nothing, and no candidate node may evict a member of
// a gang (that would leave the gang below its minimum). Other candidates are kept as given.
func (v *Verbs) decidePreempt(d Decisions, args *extenderv1.ExtenderPreemptionArgs) *extenderv1.ExtenderPreemptionResult {
	result := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
	if !d.MayPreempt(args.Pod) {
		return result
	}
	keep := func(node string, victims []gang.PodRef, pdbViolations int64) {
		meta := &extenderv1.MetaVictims{NumPDBViolations: pdbViolations}
		for _, victim := range victims {
			if !d.MayEvict(victim) {
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
		refs := make([]gang.PodRef, 0, len(mv.Pods))
		for _, p := range mv.Pods {
			if p != nil {
				refs = append(refs, gang.PodRef{UID: types.UID(p.UID)})
			}
		}
		keep(node, refs, mv.NumPDBViolations)
	}
	for node, victims := range args.NodeNameToVictims {
		if victims == nil || args.NodeNameToMetaVictims[node] != nil {
			continue
		}
		refs := make([]gang.PodRef, 0, len(victims.Pods))
		for _, p := range victims.Pods {
			if p != nil {
				refs = append(refs, gang.PodRef{Namespace: p.Namespace, Name: p.Name, UID: p.UID})
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
