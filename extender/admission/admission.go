// Package admission is the extender's mutating admission webhook: it adds gang.TurnGate to
// pods as they are created, so that kube-scheduler does not try a pod before its job's turn
// (the extender lifts the gate then; see package turns). It imports wire and gang.
package admission

import (
	"encoding/json"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/wire"
)

// Verb is the webhook's name in the request metrics and the access log, and Path the URL
// path the extender serves it on (the webhook configuration's clientConfig names it).
const (
	Verb = "turn-gate"
	Path = "/webhook/turn-gate"
)

// Webhook answers the API server's AdmissionReview requests for pod creations.
type Webhook struct {
	exempt    func(namespace string) bool
	contended func() bool
}

// New returns the webhook; pods of the namespaces exempt reports (config.GangConfig.Exempt;
// nil: none) are never gated. contended (nil:
// always) says whether a job waits for room or its turn now: only then is a pod gated. On
// an idle cluster the gate would only add its lift (an API write, and a watch event for
// every watcher) to each pod's way: a backlog that all fits was bound 0.69x as fast gated
// (test/load TestThroughput).
func New(exempt func(namespace string) bool, contended func() bool) *Webhook {
	return &Webhook{exempt: exempt, contended: contended}
}

// Route is the webhook's endpoint, POST path. What it decides it reads from the pod and
// the contended report.
func (h *Webhook) Route(path string) wire.Route {
	return wire.Route{Path: path, Verb: Verb, Handler: h.serve, Kind: wire.KindWebhook}
}

// patchOp is one JSON Patch (RFC 6902) operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Gate returns the JSON Patch that adds gang.TurnGate to pod, or nil when the pod is not
// to be gated: it is bound already (a pod created with a node may not carry gates), in an
// exempt namespace, or carries the gate. Which pods reach the webhook at all (the ones of
// cps-extender's scheduler) is the webhook configuration's matchConditions.
func (h *Webhook) Gate(pod *corev1.Pod) []byte {
	if pod.Spec.NodeName != "" || (h.exempt != nil && h.exempt(pod.Namespace)) {
		return nil
	}
	if turn, _ := gang.SchedulingGates(pod); turn {
		return nil
	}
	gate := corev1.PodSchedulingGate{Name: gang.TurnGate}
	op := patchOp{Op: "add", Path: "/spec/schedulingGates/-", Value: gate}
	if len(pod.Spec.SchedulingGates) == 0 {
		op = patchOp{Op: "add", Path: "/spec/schedulingGates", Value: []corev1.PodSchedulingGate{gate}}
	}
	patch, _ := json.Marshal([]patchOp{op}) // cannot fail: plain structs
	return patch
}

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// serve decodes one AdmissionReview and answers it: always allowed, with the patch for a pod
// to be gated. A review that cannot be read is answered 400 naming the problem (the API
// server then applies the webhook's failurePolicy).
func (h *Webhook) serve(w http.ResponseWriter, r *http.Request, c wire.Call) wire.Note {
	var review admissionv1.AdmissionReview
	if err := wire.DecodeJSON(w, r, c.MaxBytes, &review); err != nil {
		wire.WriteError(w, err)
		return wire.Note{Decision: "bad request"}
	}
	req := review.Request
	if req == nil {
		wire.WriteError(w, wire.BadRequest("AdmissionReview has no request"))
		return wire.Note{Decision: "bad request"}
	}
	if req.UID == "" {
		wire.WriteError(w, wire.BadRequest("AdmissionReview request has no uid"))
		return wire.Note{Decision: "bad request"}
	}
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	note := wire.Note{Pod: req.Namespace + "/" + req.Name, Decision: "not gated"}
	if req.Resource == podResource && req.SubResource == "" && req.Operation == admissionv1.Create {
		var pod corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
			wire.WriteError(w, wire.BadRequest("AdmissionReview request object is not a pod: %v", err))
			return wire.Note{Decision: "bad request"}
		}
		if pod.Namespace == "" {
			pod.Namespace = req.Namespace // not set yet on a create through a namespaced URL
		}
		if patch := h.Gate(&pod); patch != nil {
			if h.contended == nil || h.contended() {
				pt := admissionv1.PatchTypeJSONPatch
				resp.Patch, resp.PatchType = patch, &pt
				note.Decision = "gated"
			} else {
				note.Decision = "not gated: no job waits"
			}
		}
		if req.Name == "" { // named by the API server after the webhooks
			note.Pod = req.Namespace + "/" + pod.GenerateName + "*"
		}
	}
	review.Request, review.Response = nil, resp
	wire.WriteJSON(w, http.StatusOK, review)
	return note
}
