package extender

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// NodeLookup finds a node in the cluster view by name.
type NodeLookup interface {
	Node(name string) (*corev1.Node, bool)
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

// SchedulerVerbs answers kube-scheduler's filter, prioritize and bind.
type SchedulerVerbs struct {
	log    *zap.Logger
	nodes  NodeLookup
	binder Binder
}

// NewSchedulerVerbs builds the kube-scheduler verbs from their dependencies.
func NewSchedulerVerbs(log *zap.Logger, nodes NodeLookup, binder Binder) (*SchedulerVerbs, error) {
	if log == nil || nodes == nil || binder == nil {
		return nil, fmt.Errorf("scheduler verbs: log, nodes and binder are all required")
	}
	return &SchedulerVerbs{log: log, nodes: nodes, binder: binder}, nil
}

// decodeExtenderArgs decodes and checks the request of filter and prioritize.
func decodeExtenderArgs(w http.ResponseWriter, r *http.Request, maxBytes int64) (*extenderv1.ExtenderArgs, error) {
	var args extenderv1.ExtenderArgs
	if err := decodeJSON(w, r, maxBytes, &args); err != nil {
		return nil, err
	}
	if args.Pod == nil {
		return nil, badRequest("request has no Pod")
	}
	if args.Pod.Name == "" {
		return nil, badRequest("request Pod has no metadata.name")
	}
	if args.NodeNames == nil && args.Nodes == nil {
		return nil, badRequest("request has neither NodeNames (nodeCacheCapable: true) nor Nodes (nodeCacheCapable: false)")
	}
	return &args, nil
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func (v *SchedulerVerbs) filter(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	args, err := decodeExtenderArgs(w, r, maxBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	result := v.decideFilter(args)
	noteDecision(r.Context(), podKey(args.Pod), filterSummary(result))
	writeJSON(w, http.StatusOK, result)
}

// decideFilter passes every node the extender knows. Nodes given by name that are not in
// the cluster view fail with a reason: the extender cannot judge a node it has not seen.
func (v *SchedulerVerbs) decideFilter(args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	result := &extenderv1.ExtenderFilterResult{
		FailedNodes:                extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
	}
	if args.NodeNames != nil {
		passed := make([]string, 0, len(*args.NodeNames))
		for _, name := range *args.NodeNames {
			if _, ok := v.nodes.Node(name); !ok {
				result.FailedNodes[name] = fmt.Sprintf("node %s is not in the extender's cluster view (yet)", name)
				continue
			}
			passed = append(passed, name)
		}
		result.NodeNames = &passed
		return result
	}
	passed := &corev1.NodeList{Items: make([]corev1.Node, 0, len(args.Nodes.Items))}
	passed.Items = append(passed.Items, args.Nodes.Items...)
	result.Nodes = passed
	return result
}

func filterSummary(r *extenderv1.ExtenderFilterResult) string {
	passed := 0
	if r.NodeNames != nil {
		passed = len(*r.NodeNames)
	} else if r.Nodes != nil {
		passed = len(r.Nodes.Items)
	}
	return fmt.Sprintf("passed %d, failed %d, unresolvable %d", passed, len(r.FailedNodes), len(r.FailedAndUnresolvableNodes))
}

func (v *SchedulerVerbs) prioritize(w http.ResponseWriter, r *http.Request, maxBytes int64) {
	args, err := decodeExtenderArgs(w, r, maxBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	scores := v.decidePrioritize(args)
	noteDecision(r.Context(), podKey(args.Pod), fmt.Sprintf("scored %d nodes", len(scores)))
	writeJSON(w, http.StatusOK, scores)
}

// decidePrioritize gives every candidate the same neutral score: equal scores never change
// the default scheduler's choice.
func (v *SchedulerVerbs) decidePrioritize(args *extenderv1.ExtenderArgs) extenderv1.HostPriorityList {
	names := candidateNames(args)
	scores := make(extenderv1.HostPriorityList, 0, len(names))
	for _, name := range names {
		scores = append(scores, extenderv1.HostPriority{Host: name, Score: extenderv1.MinExtenderPriority})
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

func bindSummary(node, errMsg string) string {
	if errMsg != "" {
		return "bind error: " + errMsg
	}
	return "bound to " + node
}
