package framework

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// trainerWebhookManifests is a cut-down copy of Kubeflow Trainer v2.0.0's
// manifests/base/webhook: a validating configuration only, patched by a target without a name,
// on fields of its webhooks and on its name.
var trainerWebhookManifests = map[string]string{
	"manifests.yaml": `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime}
  failurePolicy: Fail
  name: validator.clustertrainingruntime.trainer.kubeflow.org
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-trainer-kubeflow-org-v1alpha1-trainjob}
  failurePolicy: Fail
  name: validator.trainjob.trainer.kubeflow.org
  sideEffects: None
`,
	"kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - manifests.yaml
patches:
  - path: patch.yaml
    target:
      group: admissionregistration.k8s.io
      version: v1
      kind: ValidatingWebhookConfiguration
configurations:
  - kustomizeconfig.yaml
`,
	"patch.yaml": `- op: replace
  path: /webhooks/0/clientConfig/service/name
  value: kubeflow-trainer-controller-manager
- op: replace
  path: /webhooks/1/clientConfig/service/name
  value: kubeflow-trainer-controller-manager
- op: replace
  path: /metadata/name
  value: validator.trainer.kubeflow.org
`,
}

func TestTrainerWebhookConfigs(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, trainerWebhookManifests)
	ca := []byte("-----BEGIN CERTIFICATE-----\n...")
	mutating, validating, err := WebhookConfigs(dir, trainerWebhookPrefix, "https://127.0.0.1:9443", ca)
	if err != nil {
		t.Fatal(err)
	}
	if mutating != nil {
		t.Errorf("a mutating configuration %q from manifests without one", mutating.Name)
	}
	if validating == nil {
		t.Fatal("no validating configuration")
	}
	// Renamed by the patch, then prefixed: not the name Trainer's certificate rotator rewrites.
	if want := "cps-e2e-validator.trainer.kubeflow.org"; validating.Name != want || validating.Name == trainerRotatedWebhook {
		t.Errorf("name %q, want %q", validating.Name, want)
	}
	var urls []string
	for _, h := range validating.Webhooks {
		if h.ClientConfig.Service != nil || h.ClientConfig.URL == nil || string(h.ClientConfig.CABundle) != string(ca) {
			t.Errorf("webhook %s: clientConfig %+v, want the URL and the CA only", h.Name, h.ClientConfig)
			continue
		}
		urls = append(urls, *h.ClientConfig.URL)
	}
	want := []string{"https://127.0.0.1:9443/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime",
		"https://127.0.0.1:9443/validate-trainer-kubeflow-org-v1alpha1-trainjob"}
	if !slices.Equal(urls, want) {
		t.Errorf("URLs %q, want %q", urls, want)
	}
}

func TestCheckControllersExtraBinDir(t *testing.T) {
	dir := t.TempDir()
	if err := checkControllersExtraBinDir(dir); err == nil || !strings.Contains(err.Error(), "trainer-controller-manager, lws-controller-manager, crd/trainer, crd/lws, webhook/trainer, webhook/lws, runtimes/trainer") {
		t.Errorf("empty folder: %v, want all named", err)
	}
	for _, name := range []string{"trainer-controller-manager", "lws-controller-manager"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"crd/trainer", "crd/lws", "webhook/trainer", "webhook/lws"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkControllersExtraBinDir(dir); err == nil || !strings.HasSuffix(err.Error(), "lacks runtimes/trainer") {
		t.Errorf("folder without runtimes: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "runtimes/trainer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkControllersExtraBinDir(dir); err != nil {
		t.Errorf("complete folder: %v", err)
	}
}

func TestWebhookAnswered(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "denied", want: true, err: errors.New(`admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: unsupported runtime: ClusterTrainingRuntime/trainer.kubeflow.org`)},
		{name: "no handler yet", err: errors.New(`Internal error occurred: failed calling webhook "validator.trainjob.trainer.kubeflow.org": failed to call webhook: the server could not find the requested resource`)},
		{name: "no server", err: errors.New(`Internal error occurred: failed calling webhook "x": failed to call webhook: Post "https://127.0.0.1:1/validate": dial tcp 127.0.0.1:1: connect: connection refused`)},
		{name: "admitted: no webhook called", err: nil},
		{name: "another error", err: errors.New("the server could not find the requested resource (post trainjobs.trainer.kubeflow.org)")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := webhookAnswered(tt.err); got != tt.want {
				t.Errorf("webhookAnswered(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestRuntimeFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"kustomization.yaml":                   "resources: [torch_distributed.yaml, torchtune]\n",
		"torch_distributed.yaml":               "kind: ClusterTrainingRuntime\n",
		"torchtune/kustomization.yaml":         "resources: [llama3_2/llama3_2_1B.yaml]\n",
		"torchtune/llama3_2/llama3_2_1B.yaml":  "kind: ClusterTrainingRuntime\n",
		"torchtune/llama3_2/README.md":         "not a manifest\n",
		"torchtune/llama3_2/llama3_2_3B.yaml~": "an editor's backup\n",
	})
	files, err := runtimeFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		files[i], _ = filepath.Rel(dir, f)
	}
	if want := []string{"torch_distributed.yaml", "torchtune/llama3_2/llama3_2_1B.yaml"}; !slices.Equal(files, want) {
		t.Errorf("runtimeFiles = %q, want %q", files, want)
	}
	if _, err := runtimeFiles(filepath.Join(dir, "missing")); err == nil {
		t.Error("runtimeFiles of a missing folder: no error")
	}
}

func TestLWSConfig(t *testing.T) {
	var cfg struct {
		APIVersion     string `json:"apiVersion"`
		Kind           string `json:"kind"`
		LeaderElection struct {
			LeaderElect *bool `json:"leaderElect"`
		} `json:"leaderElection"`
		InternalCertManagement struct {
			Enable *bool `json:"enable"`
		} `json:"internalCertManagement"`
		Metrics struct {
			BindAddress string `json:"bindAddress"`
		} `json:"metrics"`
		Health struct {
			HealthProbeBindAddress string `json:"healthProbeBindAddress"`
		} `json:"health"`
		Webhook struct {
			Host    string `json:"host"`
			Port    int    `json:"port"`
			CertDir string `json:"certDir"`
		} `json:"webhook"`
	}
	if err := yaml.UnmarshalStrict([]byte(lwsConfig(9443, "/tmp/a b/certs")), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.APIVersion != "config.lws.x-k8s.io/v1alpha1" || cfg.Kind != "Configuration" || cfg.LeaderElection.LeaderElect == nil || *cfg.LeaderElection.LeaderElect ||
		cfg.InternalCertManagement.Enable == nil || *cfg.InternalCertManagement.Enable || cfg.Metrics.BindAddress != "0" ||
		cfg.Health.HealthProbeBindAddress != "0" || cfg.Webhook.Host != "127.0.0.1" || cfg.Webhook.Port != 9443 || cfg.Webhook.CertDir != "/tmp/a b/certs" {
		t.Errorf("lwsConfig read back as %+v", cfg)
	}
}
