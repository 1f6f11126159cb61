//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/cps-extender/cps-extender/extender/admission"
	"github.com/cps-extender/cps-extender/internal/testcerts"
	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The namespace and service account of deploy/.
const (
	deployNamespace      = "cps-system"
	deployServiceAccount = "cps-extender"
)

var (
	kustomizeOnce sync.Once
	kustomizeBin  string
	kustomizeErr  error
)

// kustomizeBinary builds test/tools/kustomize (kustomize's own library, as in kubectl apply
// -k) once per test run.
func kustomizeBinary(t testing.TB, root string) string {
	t.Helper()
	kustomizeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cps-kustomize-bin-")
		if err != nil {
			kustomizeErr = err
			return
		}
		kustomizeBin = filepath.Join(dir, "kustomize")
		cmd := exec.Command("go", "build", "-o", kustomizeBin, ".")
		cmd.Dir = filepath.Join(root, "test", "tools", "kustomize")
		if out, err := cmd.CombinedOutput(); err != nil {
			kustomizeErr = fmt.Errorf("go build test/tools/kustomize: %v\n%s", err, out)
		}
	})
	if kustomizeErr != nil {
		t.Fatal(kustomizeErr)
	}
	return kustomizeBin
}

// kustomizations lists the folders under deploy/ that hold a kustomization.yaml, relative to
// the repository root.
func kustomizations(t testing.TB, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "kustomization.yaml" {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			dirs = append(dirs, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	return dirs
}

// render renders the kustomization in dir (relative to root) into its objects, in
// kustomize's output order (namespaces first).
func render(t testing.TB, root, dir string) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command(kustomizeBinary(t, root), filepath.Join(root, dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kustomize %s output: %v", dir, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("kustomize %s rendered nothing", dir)
	}
	return objs
}

// creator creates rendered objects through the dynamic client, finding each kind's resource
// by discovery.
type creator struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newCreator(t testing.TB, cp *framework.ControlPlane) *creator {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &creator{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Client.Discovery()))}
}

// create creates obj, or with dryRun only has the API server check it (admission and
// validation included) without storing it.
func (c *creator) create(obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Create(context.Background(), obj, opts)
	return err
}

func describe(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return obj.GetKind() + " " + ns + "/" + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetName()
}

// TestDeployDryRun renders every kustomization in deploy/ with kustomize's library and has a
// real API server accept every object by a server-side dry-run create (strict field
// validation: an unknown or misspelt field fails). The namespace is created for real after
// its own dry run, since namespaced objects are checked inside it.
func TestDeployDryRun(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dirs := kustomizations(t, root)
	want := []string{"deploy/base", "deploy/monitoring", "deploy/overlays/sidecar", "deploy/overlays/standalone", "deploy/webhook"}
	if strings.Join(dirs, " ") != strings.Join(want, " ") {
		t.Errorf("kustomizations %v, want %v", dirs, want)
	}
	rendered := map[string][]*unstructured.Unstructured{}
	for _, dir := range dirs {
		rendered[dir] = render(t, root, dir)
	}

	cp := framework.Start(t, framework.Options{})
	c := newCreator(t, cp)
	namespaces := map[string]bool{}
	for _, dir := range dirs {
		for _, obj := range rendered[dir] {
			if obj.GetKind() != "Namespace" || namespaces[obj.GetName()] {
				continue
			}
			namespaces[obj.GetName()] = true
			if err := c.create(obj, true); err != nil {
				t.Fatalf("%s: dry-run %s: %v", dir, describe(obj), err)
			}
			if err := c.create(obj, false); err != nil {
				t.Fatalf("create %s: %v", describe(obj), err)
			}
		}
	}
	for _, dir := range dirs {
		var kinds []string
		for _, obj := range rendered[dir] {
			kinds = append(kinds, obj.GetKind())
			if obj.GetKind() == "Namespace" {
				continue
			}
			if err := c.create(obj, true); err != nil {
				t.Errorf("%s: dry-run %s refused: %v", dir, describe(obj), err)
			}
		}
		t.Logf("%s: %d objects accepted: %s", dir, len(kinds), strings.Join(kinds, ", "))
	}
}

// deployed is an overlay of deploy/ created for real on a fresh control plane, short of its
// pods (there is no kubelet): its processes run as test processes with the overlay's
// ConfigMaps, authenticated as the overlay's service account (a token user of that name, so
// the overlay's bindings apply to it).
type deployed struct {
	*env
	configs map[string]string // ConfigMap data: file name -> content
}

func deployOverlay(t *testing.T, overlay string, nodes ...framework.NodeSpec) deployed {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs := render(t, root, overlay)
	sa := "system:serviceaccount:" + deployNamespace + ":" + deployServiceAccount
	cp := framework.Start(t, framework.Options{Users: []framework.User{{
		Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + deployNamespace},
	}}})
	cp.AddNodes(t, nodes...)
	c := newCreator(t, cp)
	d := deployed{env: &env{t: t, cp: cp, repoRoot: root, extKube: cp.UserKubeconfig(sa), extAddr: freeAddr(t)}, configs: map[string]string{}}
	for _, obj := range objs {
		if err := c.create(obj, false); err != nil {
			t.Fatalf("create %s: %v", describe(obj), err)
		}
		if obj.GetKind() == "ConfigMap" {
			data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
			for k, v := range data {
				d.configs[k] = v
			}
		}
	}
	return d
}

// edit replaces old, which must be there, by new in a config.
func (d deployed) edit(what, cfg, old, new string) string {
	d.t.Helper()
	if !strings.Contains(cfg, old) {
		d.t.Fatalf("%s no longer contains %q", what, old)
	}
	return strings.Replace(cfg, old, new, 1)
}

// startExtender runs cps-extender with the overlay's config.yaml; only where it listens, how
// it reaches the API server, and the edits (old, new pairs) differ from the pod. Its
// webhook keeps its certificate as shipped, also for 127.0.0.1: the overlay's webhook
// configuration is pointed at it by URL, since a Service's cluster IP does not route here.
func (d deployed) startExtender(edits ...string) {
	d.t.Helper()
	cfg := d.edit("config.yaml", d.configs["config.yaml"], `listen: ":8888"`, fmt.Sprintf("listen: %q", d.extAddr))
	cfg = d.edit("config.yaml", cfg, `kubeconfig: ""`, "kubeconfig: "+d.extKube)
	hookAddr := freeAddr(d.t)
	cfg = d.edit("config.yaml", cfg, `listen: ":9443"`, fmt.Sprintf("listen: %q\n  hosts: [\"127.0.0.1\"]", hookAddr))
	hooks := d.cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	hook, err := hooks.Get(context.Background(), "cps-extender-turn-gate", metav1.GetOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	url := "https://" + hookAddr + admission.Path
	hook.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
	if _, err := hooks.Update(context.Background(), hook, metav1.UpdateOptions{}); err != nil {
		d.t.Fatal(err)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		cfg = d.edit("config.yaml", cfg, edits[i], edits[i+1])
	}
	d.startExtenderWith(cfg)
}

// assertNothingRefused fails the test if a process logged a Forbidden answer.
func (d deployed) assertNothingRefused(procs ...*framework.Process) {
	d.t.Helper()
	for _, p := range procs {
		out, err := os.ReadFile(p.LogPath())
		if err != nil {
			d.t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				d.t.Errorf("%s was refused: %s", p.Name, line)
			}
		}
	}
}

// callsOn edits the shipped config to leave the webhook's calls on (offAfter 0: the
// extender does not switch them off while no job waits), so that a deploy test sees which
// pods the overlay's conditions send to it. TestTurnGateWebhook tests the switch.
var callsOn = []string{"  offAfter: 10s\n", "  offAfter: 0s\n"}

// TestDeploySidecar runs the sidecar overlay as deployed (see deployed): kube-scheduler and
// cps-extender with its two ConfigMaps, both as the pod's service account. The API server
// calls the overlay's webhook for the gang's pods (trusting the certificate the extender
// keeps; no job waits, so they are created ungated), the gang schedules, the scheduler
// holds its leader lease in cps-system, and neither process is refused anything.
func TestDeploySidecar(t *testing.T) {
	d := deployOverlay(t, "deploy/overlays/sidecar", framework.Nodes("node", 2, "4", "8Gi")...)
	d.startExtender(callsOn...)
	sched := d.edit("kube-scheduler.yaml", d.configs["kube-scheduler.yaml"], "http://127.0.0.1:8888/", "http://"+d.extAddr+"/")
	sched = d.edit("kube-scheduler.yaml", sched, "kind: KubeSchedulerConfiguration\n", "kind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: "+d.extKube+"\n")
	d.sched = d.cp.StartScheduler(t, []byte(sched))

	d.waitWebhookCalled(podSpec{name: "probe"})
	calls := d.webhookCalls()
	job := jobSpec{name: "sidecar", ps: 1, workers: 3, cpu: "2"}
	d.createWithGates(nil, job.pods()...)
	if got := d.webhookCalls() - calls; got != len(job.pods()) {
		t.Errorf("the webhook was called %d times for the job's %d pods", got, len(job.pods()))
	}
	d.waitJobBound(job, 60*time.Second)

	lease, err := d.cp.Client.CoordinationV1().Leases(deployNamespace).Get(context.Background(), "cps-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the scheduler's leader lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease %s/cps-scheduler has no holder", deployNamespace)
	}
	d.assertNothingRefused(d.ext, d.sched)
}

// TestDeployStandalone runs the standalone overlay's extender (see deployed) as its service
// account, bound by the base's ClusterRole alone, with the default scheduler configured by
// scheduler-config/default-scheduler.yaml: a gang and a plain pod of the default scheduler
// are both bound through the extender's bind verb, and the extender is refused nothing.
func TestDeployStandalone(t *testing.T) {
	d := deployOverlay(t, "deploy/overlays/standalone", framework.Nodes("node", 2, "4", "8Gi")...)
	// The cluster's CA, which signs the scheduler's client certificate: here a test CA, in
	// the place of the service account's ca.crt.
	dir := t.TempDir()
	clusterCA := testcerts.NewCA(t)
	caFile, clientCert, clientKey, serverCA := filepath.Join(dir, "cluster-ca.crt"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.crt")
	testcerts.WriteFile(t, caFile, clusterCA.PEM)
	certPEM, keyPEM := clusterCA.IssueClient(t, 2, "system:kube-scheduler")
	testcerts.WriteFile(t, clientCert, certPEM)
	testcerts.WriteFile(t, clientKey, keyPEM)
	// The extender serves HTTPS with the certificate it keeps; the test's own probes skip
	// checking it (the scheduler checks it, with the CA from the Secret).
	d.extTLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // a test probe
	// Debug logging, to count the scheduler's calls.
	d.startExtender(append([]string{"log: {format: json, level: info}", "log: {format: json, level: debug}",
		"/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", caFile}, callsOn...)...)
	// The extender's serving CA, as docs/deploy.md has the operator take it from the Secret.
	secret, err := d.cp.Client.CoreV1().Secrets(deployNamespace).Get(context.Background(), "cps-extender-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testcerts.WriteFile(t, serverCA, secret.Data["ca.crt"])
	raw, err := os.ReadFile(filepath.Join(d.repoRoot, "scheduler-config", "default-scheduler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sched := d.edit("default-scheduler.yaml", string(raw), "https://CLUSTER_IP:8888/", "https://"+d.extAddr+"/")
	for _, f := range [][2]string{{"/etc/kubernetes/cps-extender/ca.crt", serverCA}, {"/etc/kubernetes/cps-extender/client.crt", clientCert}, {"/etc/kubernetes/cps-extender/client.key", clientKey}} {
		sched = d.edit("default-scheduler.yaml", sched, f[0], f[1])
	}
	// The default scheduler runs as itself, not as the extender: here, the admin.
	sched = d.edit("default-scheduler.yaml", sched, "kubeconfig: /etc/kubernetes/scheduler.conf", "kubeconfig: "+d.cp.Kubeconfig)
	sched = d.edit("default-scheduler.yaml", sched, "leaderElect: true", "leaderElect: false")
	d.sched = d.cp.StartScheduler(t, []byte(sched))

	job := jobSpec{name: "standalone", ps: 1, workers: 2, cpu: "2"}
	pods := job.pods()
	for i := range pods {
		pods[i].scheduler = "default-scheduler"
	}
	// The API server calls the overlay's webhook for the default scheduler's job pods, and
	// for no other pod (no job waits, so none is gated).
	d.waitWebhookCalled(podSpec{name: "probe", scheduler: "default-scheduler", labels: map[string]string{"cps-extender.io/job": "probe"}})
	calls := d.webhookCalls()
	d.createWithGates(nil, append(pods, podSpec{name: "plain", scheduler: "default-scheduler"})...)
	if got := d.webhookCalls() - calls; got != len(pods) {
		t.Errorf("the webhook was called %d times, want once for each of the job's %d pods", got, len(pods))
	}
	d.waitJobBound(job, 60*time.Second)
	framework.WaitFor(t, 30*time.Second, "plain pod bound", func() (bool, error) {
		node := d.bound("default")["plain"]
		return node != "", fmt.Errorf("plain pod not bound")
	})
	want := len(pods) + 1
	if got := d.waitRequestsLogged(map[string]int{"/scheduler/bind": want})["/scheduler/bind"]; got != want {
		t.Errorf("the extender saw %d binds, want %d (every pod's)", got, want)
	}
	d.assertNothingRefused(d.ext)
}
