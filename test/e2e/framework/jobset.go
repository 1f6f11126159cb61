package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/internal/testcerts"
)

// jobSetWebhookPrefix is put before the names of JobSet's webhook configurations, as its
// release manifests do (config/default's namePrefix).
const jobSetWebhookPrefix = "jobset-"

// InstallJobSet creates JobSet's CRD (crd/jobset/ of dir, ControllersBinDir) and waits until
// JobSets are served. Its webhooks are registered by StartJobSet, which knows their address.
func (cp *ControlPlane) InstallJobSet(t testing.TB, dir string) {
	t.Helper()
	cp.InstallCRDs(t, crdFiles(t, filepath.Join(dir, "crd", "jobset")), JobSets)
}

// StartJobSet runs JobSet's controller manager (v0.10.1) from dir (ControllersBinDir), after
// InstallJobSet, as admin, without leader election, metrics, health probes or its own
// certificate management, logging to Dir/jobset-controller-manager.log. Its webhook server
// listens on 127.0.0.1 at a free port with a pair signed by a fresh CA, and its mutating and
// validating webhook configurations (JobSets; pods labelled jobset.sigs.k8s.io/jobset-name, as
// its release narrows them) are registered, or updated if a JobSet ran before, to call it there
// by URL with that CA as caBundle. Their failurePolicy is Fail, as shipped: while JobSet is
// down, no JobSet and no JobSet pod can be created.
//
// It returns once the JobSet controller runs its workers and the API server defaults a JobSet
// through the webhook (a dry-run create): JobSet relies on its defaulting webhook (success
// policy, Indexed completion, restart policy).
func (cp *ControlPlane) StartJobSet(t testing.TB, dir string) *Process {
	t.Helper()
	name := cp.uniqueName("jobset-controller-manager")
	certDir := filepath.Join(cp.Dir, name+"-certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := testcerts.NewCA(t)
	ca.IssueFiles(t, 3, filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	configPath := filepath.Join(cp.Dir, name+".yaml")

	p := cp.startRetrying(t, name, func() (*Process, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(configPath, []byte(jobSetConfig(port, certDir)), 0o644); err != nil {
			return nil, err
		}
		p, err := cp.startChild(t, name, filepath.Join(dir, jobSetBin), []string{
			"--config=" + configPath,
			"--kubeconfig=" + cp.Kubeconfig,
			"--leader-elect=false",
			"--metrics-bind-address=0",
			"--health-probe-bind-address=0",
		}, nil)
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if err := waitUntil(p, controllerStartTimeout, func() (bool, error) {
			return handshake(addr, ca.PEM) == nil, nil
		}); err != nil {
			return p, err
		}
		mutating, validating, err := JobSetWebhookConfigs(filepath.Join(dir, "webhook", "jobset"), "https://"+addr, ca.PEM)
		if err != nil {
			return p, err
		}
		if err := ApplyWebhookConfigs(cp.Client, mutating, validating); err != nil {
			return p, err
		}
		return p, nil
	})
	cp.waitControllersStarted(t, p, runtimeControllerStarted, []string{"jobset"})
	cp.waitJobSetDefaulted(t, p)
	return p
}

// jobSetConfig is JobSet's configuration file (config.jobset.x-k8s.io/v1alpha1): no leader
// election, no internal certificate management, the webhook server on 127.0.0.1:port with the
// pair in certDir.
func jobSetConfig(port int, certDir string) string {
	return fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %q
`, port, certDir)
}

// waitJobSetDefaulted dry-runs the creation of a JobSet that sets no defaults until the API
// server returns it defaulted by JobSet's webhook (it picks up new webhook configurations within
// a moment).
func (cp *ControlPlane) waitJobSetDefaulted(t testing.TB, p *Process) {
	t.Helper()
	probe := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: cps-e2e-webhook-probe
  namespace: default
spec:
  replicatedJobs:
  - name: probe
    template:
      spec:
        template:
          spec:
            containers:
            - name: probe
              image: fake
`), &probe.Object); err != nil {
		t.Fatal(err)
	}
	jobsets := cp.Dynamic(t).Resource(JobSets).Namespace("default")
	if err := waitUntil(p, controllerStartTimeout, func() (bool, error) {
		got, err := jobsets.Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		op, _, _ := unstructured.NestedString(got.Object, "spec", "successPolicy", "operator")
		return op != "", errors.New("a dry-run JobSet came back without defaults")
	}); err != nil {
		t.Fatalf("JobSet's defaulting webhook: %v", err)
	}
}

// JobSetWebhookConfigs is WebhookConfigs for JobSet's manifests (webhook/jobset/ of
// ControllersBinDir), named with the prefix "jobset-" as its release names them.
func JobSetWebhookConfigs(dir, baseURL string, caPEM []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return WebhookConfigs(dir, jobSetWebhookPrefix, baseURL, caPEM)
}

// WebhookConfigs reads a kubebuilder project's webhook manifests in dir (manifests.yaml with
// its kustomization.yaml and the patches it names, as JobSet and LeaderWorkerSet ship them in
// config/.../webhook) and returns its mutating and validating webhook configurations (either
// nil when the project has none of that kind), named with namePrefix, the patches applied,
// every webhook calling baseURL followed by its service path and trusting caPEM.
func WebhookConfigs(dir, namePrefix, baseURL string, caPEM []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	docs, err := readWebhookManifests(dir)
	if err != nil {
		return nil, nil, err
	}
	var (
		mutating   *admissionregistrationv1.MutatingWebhookConfiguration
		validating *admissionregistrationv1.ValidatingWebhookConfiguration
	)
	for _, doc := range docs {
		kind, _, _ := unstructured.NestedString(doc, "kind")
		if err := redirectWebhooks(doc, namePrefix, baseURL, caPEM); err != nil {
			return nil, nil, err
		}
		raw, err := json.Marshal(doc)
		if err != nil {
			return nil, nil, err
		}
		switch kind {
		case "MutatingWebhookConfiguration":
			mutating = &admissionregistrationv1.MutatingWebhookConfiguration{}
			err = json.Unmarshal(raw, mutating)
		case "ValidatingWebhookConfiguration":
			validating = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			err = json.Unmarshal(raw, validating)
		default:
			err = fmt.Errorf("unexpected kind %q", kind)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	if mutating == nil && validating == nil {
		return nil, nil, fmt.Errorf("%s: no webhook configuration", dir)
	}
	return mutating, validating, nil
}

// kustomization is the part of a kustomization.yaml readWebhookManifests follows.
type kustomization struct {
	Resources []string `json:"resources"`
	Patches   []struct {
		Path   string `json:"path"`
		Target struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902) in YAML.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// readWebhookManifests reads the objects of manifests.yaml in dir and applies the patches that
// dir/kustomization.yaml names to the objects their targets name (kind, and name when the
// target gives one). The patches are JSON patches (patchDoc); other resources the
// kustomization lists (a Service) are not read.
func readWebhookManifests(dir string) ([]map[string]any, error) {
	var k kustomization
	if raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml")); err != nil {
		return nil, err
	} else if err := yaml.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	docs, err := splitYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("%s/manifests.yaml: %w", dir, err)
	}
	for _, patch := range k.Patches {
		raw, err := os.ReadFile(filepath.Join(dir, patch.Path))
		if err != nil {
			return nil, err
		}
		var ops []jsonPatchOp
		if err := yaml.Unmarshal(raw, &ops); err != nil {
			return nil, fmt.Errorf("%s: %w", patch.Path, err)
		}
		matched := false
		for _, doc := range docs {
			kind, _, _ := unstructured.NestedString(doc, "kind")
			name, _, _ := unstructured.NestedString(doc, "metadata", "name")
			if kind != patch.Target.Kind || (patch.Target.Name != "" && name != patch.Target.Name) {
				continue
			}
			matched = true
			for _, op := range ops {
				if err := patchDoc(doc, op); err != nil {
					return nil, fmt.Errorf("%s: %w", patch.Path, err)
				}
			}
		}
		if !matched {
			return nil, fmt.Errorf("%s: no %s %q in manifests.yaml", patch.Path, patch.Target.Kind, patch.Target.Name)
		}
	}
	return docs, nil
}

// splitYAML decodes every non-empty document of a multi-document YAML stream.
func splitYAML(raw []byte) ([]map[string]any, error) {
	var docs []map[string]any
	for _, part := range bytes.Split(append([]byte("\n"), raw...), []byte("\n---")) {
		var doc map[string]any
		if err := yaml.Unmarshal(part, &doc); err != nil {
			return nil, err
		}
		if len(doc) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs, nil
}

// patchDoc applies op, a JSON patch operation (RFC 6902: add, replace or remove at a JSON
// pointer; "-" appends to a list with add), to doc. Webhook manifests use it on whole webhooks
// (/webhooks/1), their fields (/webhooks/0/clientConfig/service/name) and the name
// (/metadata/name).
func patchDoc(doc map[string]any, op jsonPatchOp) error {
	if op.Op != "add" && op.Op != "replace" && op.Op != "remove" {
		return fmt.Errorf("unsupported patch op %q", op.Op)
	}
	if !strings.HasPrefix(op.Path, "/") {
		return fmt.Errorf("bad patch path %q", op.Path)
	}
	tokens := strings.Split(op.Path[1:], "/")
	for i, tok := range tokens {
		tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
	}
	_, err := patchAt(doc, tokens, op)
	if err != nil {
		return fmt.Errorf("%s %q: %w", op.Op, op.Path, err)
	}
	return nil
}

// patchAt applies op at tokens (the rest of its path) inside node and returns node as changed
// (a list may grow or shrink, so its parent stores it again).
func patchAt(node any, tokens []string, op jsonPatchOp) (any, error) {
	tok, last := tokens[0], len(tokens) == 1
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tok]
		switch {
		case last && op.Op == "add":
			n[tok] = op.Value
		case !ok:
			return nil, fmt.Errorf("no field %q", tok)
		case last && op.Op == "replace":
			n[tok] = op.Value
		case last: // remove
			delete(n, tok)
		default:
			changed, err := patchAt(child, tokens[1:], op)
			if err != nil {
				return nil, err
			}
			n[tok] = changed
		}
		return n, nil
	case []any:
		if last && op.Op == "add" && tok == "-" {
			return append(n, op.Value), nil
		}
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("bad list index %q", tok)
		}
		switch {
		case last && op.Op == "add" && i <= len(n):
			return append(n[:i:i], append([]any{op.Value}, n[i:]...)...), nil
		case i >= len(n):
			return nil, fmt.Errorf("index %d out of range: only %d items", i, len(n))
		case last && op.Op == "replace":
			n[i] = op.Value
			return n, nil
		case last: // remove
			return append(n[:i:i], n[i+1:]...), nil
		default:
			changed, err := patchAt(n[i], tokens[1:], op)
			if err != nil {
				return nil, err
			}
			n[i] = changed
			return n, nil
		}
	default:
		return nil, fmt.Errorf("%q is inside a %T, not an object or a list", tok, node)
	}
}

// redirectWebhooks prefixes doc's name and points every webhook's clientConfig at baseURL plus
// its service path, trusting caPEM.
func redirectWebhooks(doc map[string]any, prefix, baseURL string, caPEM []byte) error {
	name, _, _ := unstructured.NestedString(doc, "metadata", "name")
	if err := unstructured.SetNestedField(doc, prefix+name, "metadata", "name"); err != nil {
		return err
	}
	hooks, _ := doc["webhooks"].([]any)
	for i, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: webhook %d is not an object", name, i)
		}
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		hook["clientConfig"] = map[string]any{"url": baseURL + path, "caBundle": caPEM}
	}
	return nil
}

// ApplyWebhookConfigs creates the webhook configurations, or replaces them (a restarted
// webhook server: a new address and CA) if they exist; a nil one is skipped (Kubeflow Trainer
// has no mutating webhooks).
func ApplyWebhookConfigs(c kubernetes.Interface, mutating *admissionregistrationv1.MutatingWebhookConfiguration, validating *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	ctx := context.Background()
	if mutating != nil {
		m := c.AdmissionregistrationV1().MutatingWebhookConfigurations()
		if _, err := m.Create(ctx, mutating, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			old, err := m.Get(ctx, mutating.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			mutating.ResourceVersion = old.ResourceVersion
			if _, err := m.Update(ctx, mutating, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update %s: %w", mutating.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("create %s: %w", mutating.Name, err)
		}
	}
	if validating != nil {
		v := c.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		if _, err := v.Create(ctx, validating, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			old, err := v.Get(ctx, validating.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			validating.ResourceVersion = old.ResourceVersion
			if _, err := v.Update(ctx, validating, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update %s: %w", validating.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("create %s: %w", validating.Name, err)
		}
	}
	return nil
}
