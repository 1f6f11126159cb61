package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/wire"
)

func review(t *testing.T, op admissionv1.Operation, resource string, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "rev-1", Operation: op, Namespace: "ml", Name: pod.Name,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: resource},
			Object:   runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func gatedPod(gates ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-worker-0"}, Spec: corev1.PodSpec{SchedulerName: "cps-scheduler"}}
	for _, g := range gates {
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
	}
	return p
}

// TestWebhook: a pod created for the extender's scheduler while a job waits gets the turn
// gate, appended to any gates it has; a pod created while no job waits, a pod that has it, a
// pod created bound, a pod in an exempt namespace and anything but a pod creation are
// allowed unchanged.
func TestWebhook(t *testing.T) {
	bound := gatedPod()
	bound.Spec.NodeName = "n1"
	exempt := gatedPod()
	exempt.Namespace = "kube-system"
	tests := []struct {
		name      string
		op        admissionv1.Operation
		resource  string
		pod       *corev1.Pod
		idle      bool // no job waits
		wantPatch string
	}{
		{name: "no gates", op: admissionv1.Create, resource: "pods", pod: gatedPod(),
			wantPatch: `[{"op":"add","path":"/spec/schedulingGates","value":[{"name":"cps-extender.io/turn"}]}]`},
		{name: "another gate", op: admissionv1.Create, resource: "pods", pod: gatedPod("example.com/quota"),
			wantPatch: `[{"op":"add","path":"/spec/schedulingGates/-","value":{"name":"cps-extender.io/turn"}}]`},
		{name: "no job waits", op: admissionv1.Create, resource: "pods", pod: gatedPod(), idle: true},
		{name: "gated already", op: admissionv1.Create, resource: "pods", pod: gatedPod(gang.TurnGate)},
		{name: "created bound", op: admissionv1.Create, resource: "pods", pod: bound},
		{name: "exempt namespace", op: admissionv1.Create, resource: "pods", pod: exempt},
		{name: "an update", op: admissionv1.Update, resource: "pods", pod: gatedPod()},
		{name: "not a pod", op: admissionv1.Create, resource: "services", pod: gatedPod()},
	}
	var contended bool
	h := New(config.GangConfig{ExemptNamespaces: []string{"kube-system"}}.Exempt, func() bool { return contended })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			contended = !tt.idle
			rec := httptest.NewRecorder()
			h.serve(rec, httptest.NewRequest(http.MethodPost, "/webhook/turn-gate", bytes.NewReader(review(t, tt.op, tt.resource, tt.pod))), wire.Call{MaxBytes: 1 << 20})
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Kind != "AdmissionReview" || got.APIVersion != "admission.k8s.io/v1" || got.Request != nil {
				t.Errorf("answer %s/%s with request %v; want the review's kind and version, no request", got.APIVersion, got.Kind, got.Request)
			}
			r := got.Response
			if r == nil || r.UID != "rev-1" || !r.Allowed {
				t.Fatalf("response %+v: want uid rev-1, allowed", r)
			}
			if diff := cmp.Diff(tt.wantPatch, string(r.Patch)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
			if (r.PatchType != nil) != (tt.wantPatch != "") {
				t.Errorf("patchType %v with patch %q", r.PatchType, r.Patch)
			}
		})
	}
}

// TestWebhookBadInput: a review that cannot be read is answered 400 with a JSON body naming
// the problem.
func TestWebhookBadInput(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{name: "not JSON", body: `{"request":`, want: "middle of a JSON value"},
		{name: "no request", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, want: "no request"},
		{name: "no uid", body: `{"request":{"operation":"CREATE"}}`, want: "no uid"},
		{name: "object not a pod", body: `{"request":{"uid":"u","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":{"spec":7}}}`, want: "not a pod"},
	}
	h := New(nil, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.serve(rec, httptest.NewRequest(http.MethodPost, "/webhook/turn-gate", strings.NewReader(tt.body)), wire.Call{MaxBytes: 1 << 20})
			var body wire.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("status %d, body %q: %v", rec.Code, rec.Body, err)
			}
			if rec.Code != http.StatusBadRequest || !strings.Contains(body.Error, tt.want) {
				t.Errorf("status %d, error %q; want 400 naming %q", rec.Code, body.Error, tt.want)
			}
		})
	}
}
