package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cps-extender/cps-extender/internal/testcerts"
)

func TestControllerStartedLogs(t *testing.T) {
	tests := []struct {
		name       string
		started    func([]byte, string) bool
		log        string
		controller string
		want       bool
	}{
		{name: "kcm started", started: kubeControllerStarted, controller: "job-controller", want: true,
			log: `I1203 10:00:00.000000 1 controllermanager.go:760] "Controller starting..." controller="job-controller"` + "\n"},
		{name: "kcm another controller", started: kubeControllerStarted, controller: "job-controller",
			log: `I1203 10:00:00.000000 1 controllermanager.go:760] "Controller starting..." controller="cronjob-controller"` + "\n"},
		{name: "kcm name is a prefix", started: kubeControllerStarted, controller: "job",
			log: `"Controller starting..." controller="job-controller"`},
		{name: "zap console", started: runtimeControllerStarted, controller: "tfjob-controller", want: true,
			log: "2026-12-03T10:00:00Z\tINFO\tStarting workers\t{\"controller\": \"tfjob-controller\", \"worker count\": 1}\n"},
		{name: "zap JSON", started: runtimeControllerStarted, controller: "jobset", want: true,
			log: `{"level":"info","msg":"Starting workers","controller":"jobset","controllerGroup":"jobset.x-k8s.io","worker count":1}` + "\n"},
		{name: "other controller's workers", started: runtimeControllerStarted, controller: "jobset",
			log: "INFO\tStarting workers\t{\"controller\": \"pod\", \"controllerGroup\": \"\", \"controllerKind\": \"Pod\"}\n"},
		{name: "group is not the name", started: runtimeControllerStarted, controller: "jobset",
			log: "INFO\tStarting workers\t{\"controller\": \"jobsetx\", \"controllerGroup\": \"jobset.x-k8s.io\"}\n"},
		{name: "sources, not workers", started: runtimeControllerStarted, controller: "jobset",
			log: "INFO\tStarting EventSource\t{\"controller\": \"jobset\"}\nINFO\tStarting workers\t{\"controller\": \"pod\"}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.started([]byte(tt.log), tt.controller); got != tt.want {
				t.Errorf("started(%q) = %v, want %v", tt.controller, got, tt.want)
			}
		})
	}
}

func TestTrainingOperatorController(t *testing.T) {
	for scheme, want := range map[string]string{"TFJob": "tfjob-controller", "pytorchjob": "pytorchjob-controller", "PaddleJob": "paddlejob-controller"} {
		if got := trainingOperatorController(scheme); got != want {
			t.Errorf("trainingOperatorController(%q) = %q, want %q", scheme, got, want)
		}
	}
}

func TestCheckControllersBinDir(t *testing.T) {
	dir := t.TempDir()
	if err := checkControllersBinDir(dir); err == nil || !strings.Contains(err.Error(), "kube-controller-manager, training-operator, jobset-controller-manager, crd/training-operator, crd/jobset, webhook/jobset") {
		t.Errorf("empty folder: %v, want all named", err)
	}
	for _, name := range []string{"kube-controller-manager", "training-operator", "jobset-controller-manager"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"crd/training-operator", "crd/jobset", "webhook/jobset"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkControllersBinDir(dir); err != nil {
		t.Errorf("complete folder: %v", err)
	}
}

func TestPatchDoc(t *testing.T) {
	hook := func(name string) map[string]any {
		return map[string]any{"name": name, "clientConfig": map[string]any{"service": map[string]any{"name": "webhook-service"}}}
	}
	named := func(name, service string) map[string]any {
		h := hook(name)
		h["clientConfig"] = map[string]any{"service": map[string]any{"name": service}}
		return h
	}
	tests := []struct {
		name    string
		op      jsonPatchOp
		want    map[string]any
		wantErr string
	}{
		{name: "replace a webhook", op: jsonPatchOp{Op: "replace", Path: "/webhooks/1", Value: hook("new")},
			want: map[string]any{"metadata": map[string]any{"name": "cfg"}, "webhooks": []any{hook("a"), hook("new")}}},
		{name: "add in front", op: jsonPatchOp{Op: "add", Path: "/webhooks/0", Value: hook("new")},
			want: map[string]any{"metadata": map[string]any{"name": "cfg"}, "webhooks": []any{hook("new"), hook("a"), hook("b")}}},
		{name: "add at the end", op: jsonPatchOp{Op: "add", Path: "/webhooks/2", Value: hook("new")},
			want: map[string]any{"metadata": map[string]any{"name": "cfg"}, "webhooks": []any{hook("a"), hook("b"), hook("new")}}},
		{name: "append", op: jsonPatchOp{Op: "add", Path: "/webhooks/-", Value: hook("new")},
			want: map[string]any{"metadata": map[string]any{"name": "cfg"}, "webhooks": []any{hook("a"), hook("b"), hook("new")}}},
		{name: "a field of a webhook (Trainer's patch)", op: jsonPatchOp{Op: "replace", Path: "/webhooks/1/clientConfig/service/name", Value: "svc"},
			want: map[string]any{"metadata": map[string]any{"name": "cfg"}, "webhooks": []any{hook("a"), named("b", "svc")}}},
		{name: "the name (Trainer's patch)", op: jsonPatchOp{Op: "replace", Path: "/metadata/name", Value: "validator.trainer.kubeflow.org"},
			want: map[string]any{"metadata": map[string]any{"name": "validator.trainer.kubeflow.org"}, "webhooks": []any{hook("a"), hook("b")}}},
		{name: "add a field", op: jsonPatchOp{Op: "add", Path: "/metadata/labels", Value: map[string]any{"a": "b"}},
			want: map[string]any{"metadata": map[string]any{"name": "cfg", "labels": map[string]any{"a": "b"}}, "webhooks": []any{hook("a"), hook("b")}}},
		{name: "remove a webhook", op: jsonPatchOp{Op: "remove", Path: "/webhooks/0"},
			want: map[string]any{"metadata": map[string]any{"name": "cfg"}, "webhooks": []any{hook("b")}}},
		{name: "remove a field", op: jsonPatchOp{Op: "remove", Path: "/webhooks/1/clientConfig"},
			want: map[string]any{"metadata": map[string]any{"name": "cfg"}, "webhooks": []any{hook("a"), map[string]any{"name": "b"}}}},
		{name: "escaped key", op: jsonPatchOp{Op: "add", Path: "/metadata/a~1b~0c", Value: "x"},
			want: map[string]any{"metadata": map[string]any{"name": "cfg", "a/b~c": "x"}, "webhooks": []any{hook("a"), hook("b")}}},
		{name: "replace out of range", op: jsonPatchOp{Op: "replace", Path: "/webhooks/2"}, wantErr: "only 2 items"},
		{name: "add past the end", op: jsonPatchOp{Op: "add", Path: "/webhooks/3"}, wantErr: "only 2 items"},
		{name: "replace a missing field", op: jsonPatchOp{Op: "replace", Path: "/spec/x"}, wantErr: `no field "spec"`},
		{name: "through a string", op: jsonPatchOp{Op: "replace", Path: "/metadata/name/x"}, wantErr: "inside a string"},
		{name: "move", op: jsonPatchOp{Op: "move", Path: "/webhooks/0"}, wantErr: `unsupported patch op "move"`},
		{name: "bad index", op: jsonPatchOp{Op: "replace", Path: "/webhooks/x"}, wantErr: "bad list index"},
		{name: "not a pointer", op: jsonPatchOp{Op: "replace", Path: "webhooks"}, wantErr: "bad patch path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := map[string]any{"metadata": map[string]any{"name": "cfg"}, "webhooks": []any{hook("a"), hook("b")}}
			err := patchDoc(doc, tt.op)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("patchDoc: %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, doc); diff != "" {
				t.Errorf("doc (-want +got):\n%s", diff)
			}
		})
	}
}

// webhookManifests is a cut-down copy of the layout of JobSet's config/components/webhook.
var webhookManifests = map[string]string{
	"manifests.yaml": `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-jobset}
  failurePolicy: Fail
  name: mjobset.kb.io
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-jobset}
  failurePolicy: Fail
  name: vjobset.kb.io
  sideEffects: None
`,
	"kustomization.yaml": `resources:
- manifests.yaml
patches:
- path: patches/mutating-patch.yaml
  target:
    group: admissionregistration.k8s.io
    version: v1
    kind: MutatingWebhookConfiguration
    name: mutating-webhook-configuration
`,
	"patches/mutating-patch.yaml": `- op: replace
  path: /webhooks/1
  value:
    admissionReviewVersions: [v1]
    clientConfig:
      service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
    failurePolicy: Fail
    name: mpod.kb.io
    objectSelector:
      matchExpressions:
      - key: jobset.sigs.k8s.io/jobset-name
        operator: Exists
    sideEffects: None
`,
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestJobSetWebhookConfigs(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, webhookManifests)
	ca := []byte("-----BEGIN CERTIFICATE-----\n...")
	mutating, validating, err := JobSetWebhookConfigs(dir, "https://127.0.0.1:9443", ca)
	if err != nil {
		t.Fatal(err)
	}
	url := func(path string) admissionregistrationv1.WebhookClientConfig {
		u := "https://127.0.0.1:9443" + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}
	}
	type hook struct {
		Name           string
		ClientConfig   admissionregistrationv1.WebhookClientConfig
		ObjectSelector *metav1.LabelSelector
	}
	var got []hook
	for _, h := range mutating.Webhooks {
		got = append(got, hook{h.Name, h.ClientConfig, h.ObjectSelector})
	}
	for _, h := range validating.Webhooks {
		got = append(got, hook{h.Name, h.ClientConfig, h.ObjectSelector})
	}
	want := []hook{
		{Name: "mjobset.kb.io", ClientConfig: url("/mutate-jobset")},
		{Name: "mpod.kb.io", ClientConfig: url("/mutate--v1-pod"), ObjectSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "jobset.sigs.k8s.io/jobset-name", Operator: metav1.LabelSelectorOpExists}}}},
		{Name: "vjobset.kb.io", ClientConfig: url("/validate-jobset")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhooks (-want +got):\n%s", diff)
	}
	if mutating.Name != "jobset-mutating-webhook-configuration" || validating.Name != "jobset-validating-webhook-configuration" {
		t.Errorf("names %q, %q", mutating.Name, validating.Name)
	}
}

func TestJobSetWebhookConfigsErrors(t *testing.T) {
	tests := []struct {
		name    string
		edit    map[string]string
		wantErr string
	}{
		{name: "patch target missing", edit: map[string]string{"kustomization.yaml": strings.Replace(webhookManifests["kustomization.yaml"], "name: mutating-webhook-configuration", "name: other", 1)},
			wantErr: `no MutatingWebhookConfiguration "other"`},
		{name: "patch out of range", edit: map[string]string{"patches/mutating-patch.yaml": strings.Replace(webhookManifests["patches/mutating-patch.yaml"], "/webhooks/1", "/webhooks/5", 1)},
			wantErr: "only 2 items"},
		{name: "no configuration", edit: map[string]string{"manifests.yaml": "---\n", "kustomization.yaml": "resources: [manifests.yaml]\n"},
			wantErr: "no webhook configuration"},
		{name: "unknown kind", edit: map[string]string{"manifests.yaml": webhookManifests["manifests.yaml"] + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"},
			wantErr: `unexpected kind "Service"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, webhookManifests)
			writeFiles(t, dir, tt.edit)
			_, _, err := JobSetWebhookConfigs(dir, "https://127.0.0.1:1", nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("JobSetWebhookConfigs: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestEnsureServingPair(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := ensureServingPair(t, dir); err != nil {
		t.Fatal(err)
	}
	if err := validPair(certFile, keyFile, time.Now().Add(servingPairMinLife)); err != nil {
		t.Fatalf("made pair: %v", err)
	}
	first, _ := os.ReadFile(certFile)
	if err := ensureServingPair(t, dir); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(certFile); string(again) != string(first) {
		t.Error("a valid pair was replaced")
	}

	// A key that does not match the certificate is replaced.
	_, otherKey := testcerts.NewCA(t).Issue(t, 9)
	testcerts.WriteFile(t, keyFile, otherKey)
	if err := validPair(certFile, keyFile, time.Now()); err == nil {
		t.Fatal("mismatched pair reported valid")
	}
	if err := ensureServingPair(t, dir); err != nil {
		t.Fatal(err)
	}
	if err := validPair(certFile, keyFile, time.Now().Add(servingPairMinLife)); err != nil {
		t.Fatalf("repaired pair: %v", err)
	}
	// A pair that expires too soon does not count as valid.
	if err := validPair(certFile, keyFile, time.Now().Add(48*time.Hour)); err == nil || !strings.Contains(err.Error(), "expires") {
		t.Errorf("validPair two days on: %v, want it to expire", err)
	}
}

func TestStatusCondition(t *testing.T) {
	obj := func(conds ...any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{}}
		if conds != nil {
			o.Object["status"] = map[string]any{"conditions": conds}
		}
		return o
	}
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		typ  string
		want string
	}{
		{name: "no status", obj: obj(), typ: "Completed"},
		{name: "found", obj: obj(map[string]any{"type": "Running", "status": "False"}, map[string]any{"type": "Completed", "status": "True"}), typ: "Completed", want: "True"},
		{name: "absent", obj: obj(map[string]any{"type": "Running", "status": "True"}), typ: "Completed"},
		{name: "not an object", obj: obj("Completed"), typ: "Completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusCondition(tt.obj, tt.typ); got != tt.want {
				t.Errorf("StatusCondition(%q) = %q, want %q", tt.typ, got, tt.want)
			}
		})
	}
}
