package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/internal/testcerts"
)

// lwsWebhookPrefix is put before the names of LeaderWorkerSet's webhook configurations, as its
// release manifests do (config/default's namePrefix).
const lwsWebhookPrefix = "lws-"

// lwsControllers are LeaderWorkerSet v0.7.0's controllers, by the names its log gives: the
// LeaderWorkerSets (their leader StatefulSets) and the leader pods (each group's worker
// StatefulSet).
var lwsControllers = []string{"leaderworkerset", "pod"}

// InstallLWS creates LeaderWorkerSet's CRD (crd/lws/ of dir, ControllersExtraBinDir) and waits
// until LeaderWorkerSets are served. Its webhooks are registered by StartLWS, which knows their
// address.
func (cp *ControlPlane) InstallLWS(t testing.TB, dir string) {
	t.Helper()
	cp.InstallCRDs(t, crdFiles(t, filepath.Join(dir, "crd", "lws")), LeaderWorkerSets)
}

// StartLWS runs LeaderWorkerSet's controller manager (v0.7.0) from dir
// (ControllersExtraBinDir), after InstallLWS, as admin, without leader election, metrics,
// health probes or its own certificate management, logging to Dir/lws-controller-manager.log.
// kube-controller-manager must run the StatefulSet controller (LWSKubeControllers): a
// LeaderWorkerSet's pods are its StatefulSets'. Its webhook server listens on 127.0.0.1 at a
// free port with a pair signed by a fresh CA, and its mutating and validating webhook
// configurations (LeaderWorkerSets; pods labelled leaderworkerset.sigs.k8s.io/name, as its
// release narrows them) are registered, or updated if an LWS ran before, to call it there by URL
// with that CA as caBundle. Their failurePolicy is Fail, as shipped: while it is down, no
// LeaderWorkerSet and none of its pods can be created.
//
// It returns once both its controllers run their workers and the API server defaults, through
// its webhooks, a LeaderWorkerSet (networkConfig.subdomainPolicy) and a leader pod (the
// group-index label), both dry runs: LeaderWorkerSet relies on its pod webhook to label the
// pods of each group.
func (cp *ControlPlane) StartLWS(t testing.TB, dir string) *Process {
	t.Helper()
	name := cp.uniqueName(lwsBin)
	certDir := filepath.Join(cp.Dir, name+"-certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := testcerts.NewCA(t)
	ca.IssueFiles(t, 5, filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	configPath := filepath.Join(cp.Dir, name+".yaml")

	p := cp.startRetrying(t, name, func() (*Process, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(configPath, []byte(lwsConfig(port, certDir)), 0o644); err != nil {
			return nil, err
		}
		p, err := cp.startChild(t, name, filepath.Join(dir, lwsBin), []string{
			"--config=" + configPath,
			"--kubeconfig=" + cp.Kubeconfig,
			"--leader-elect=false", // the flag defaults to true and overrides the file when given
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
		mutating, validating, err := WebhookConfigs(filepath.Join(dir, "webhook", "lws"), lwsWebhookPrefix, "https://"+addr, ca.PEM)
		if err != nil {
			return p, err
		}
		if mutating == nil || validating == nil {
			return p, errors.New("LeaderWorkerSet's webhook manifests lack a mutating or a validating configuration")
		}
		return p, ApplyWebhookConfigs(cp.Client, mutating, validating)
	})
	cp.waitControllersStarted(t, p, runtimeControllerStarted, lwsControllers)
	cp.waitLWSDefaulted(t, p)
	return p
}

// lwsConfig is LeaderWorkerSet's configuration file (config.lws.x-k8s.io/v1alpha1): no leader
// election, no internal certificate management, no metrics or health endpoints, the webhook
// server on 127.0.0.1:port with the pair in certDir.
func lwsConfig(port int, certDir string) string {
	return fmt.Sprintf(`apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %q
`, port, certDir)
}

// lwsProbe is a LeaderWorkerSet that sets no defaults, and lwsLeaderProbe a leader pod of a
// group of 2 (worker index 0) without its group-index label, for the dry runs of
// waitLWSDefaulted.
const (
	lwsProbe = `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: cps-e2e-webhook-probe
  namespace: default
spec:
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
        - name: probe
          image: fake
`
	lwsLeaderProbe = `apiVersion: v1
kind: Pod
metadata:
  name: cps-e2e-webhook-probe-0
  namespace: default
  labels:
    leaderworkerset.sigs.k8s.io/name: cps-e2e-webhook-probe
    leaderworkerset.sigs.k8s.io/worker-index: "0"
  annotations:
    leaderworkerset.sigs.k8s.io/size: "2"
spec:
  nodeSelector:
    cps-e2e/none: none
  containers:
  - name: probe
    image: fake
`
)

// waitLWSDefaulted dry-runs the creation of lwsProbe and lwsLeaderProbe until the API server
// returns both defaulted by LeaderWorkerSet's webhooks.
func (cp *ControlPlane) waitLWSDefaulted(t testing.TB, p *Process) {
	t.Helper()
	lws := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(lwsProbe), &lws.Object); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal([]byte(lwsLeaderProbe), pod); err != nil {
		t.Fatal(err)
	}
	sets := cp.Dynamic(t).Resource(LeaderWorkerSets).Namespace("default")
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if err := waitUntil(p, controllerStartTimeout, func() (bool, error) {
		got, err := sets.Create(context.Background(), lws, dryRun)
		if err != nil {
			return false, err
		}
		if policy, _, _ := unstructured.NestedString(got.Object, "spec", "networkConfig", "subdomainPolicy"); policy == "" {
			return false, errors.New("a dry-run LeaderWorkerSet came back without defaults")
		}
		leader, err := cp.Client.CoreV1().Pods("default").Create(context.Background(), pod, dryRun)
		if err != nil {
			return false, err
		}
		return leader.Labels["leaderworkerset.sigs.k8s.io/group-index"] == "0", errors.New("a dry-run leader pod came back without its group-index label")
	}); err != nil {
		t.Fatalf("LeaderWorkerSet's defaulting webhooks: %v", err)
	}
}
