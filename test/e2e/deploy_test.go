//go:build e2e

package e2e

import (
	"bytes"
	"context"
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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

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
	want := []string{"deploy/base", "deploy/overlays/sidecar", "deploy/overlays/standalone"}
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

// TestDeploySidecar runs the sidecar overlay as deployed, short of the pod: its objects are
// created for real, and kube-scheduler and cps-extender run with the overlay's two
// ConfigMaps, authenticated as the pod's service account (a token user of that name, so the
// overlay's bindings apply to it). A gang schedules, the scheduler holds its leader lease in
// cps-system, and neither process is refused anything.
func TestDeploySidecar(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs := render(t, root, "deploy/overlays/sidecar")
	sa := "system:serviceaccount:" + deployNamespace + ":" + deployServiceAccount
	cp := framework.Start(t, framework.Options{Users: []framework.User{{
		Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + deployNamespace},
	}}})
	cp.AddNodes(t, framework.Nodes("node", 2, "4", "8Gi")...)
	c := newCreator(t, cp)
	configs := map[string]string{} // ConfigMap data key -> value
	for _, obj := range objs {
		if err := c.create(obj, false); err != nil {
			t.Fatalf("create %s: %v", describe(obj), err)
		}
		if obj.GetKind() == "ConfigMap" {
			data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
			for k, v := range data {
				configs[k] = v
			}
		}
	}

	e := &env{t: t, cp: cp, repoRoot: root, extKube: cp.UserKubeconfig(sa), extAddr: freeAddr(t)}
	edit := func(what, cfg, old, new string) string {
		if !strings.Contains(cfg, old) {
			t.Fatalf("the sidecar's %s no longer contains %q", what, old)
		}
		return strings.Replace(cfg, old, new, 1)
	}
	// Only where the processes listen and how they reach the API server differ from the pod.
	ext := edit("config.yaml", configs["config.yaml"], `listen: ":8888"`, fmt.Sprintf("listen: %q", e.extAddr))
	ext = edit("config.yaml", ext, `kubeconfig: ""`, "kubeconfig: "+e.extKube)
	e.startExtenderWith(ext)
	sched := edit("kube-scheduler.yaml", configs["kube-scheduler.yaml"], "http://127.0.0.1:8888/", "http://"+e.extAddr+"/")
	sched = edit("kube-scheduler.yaml", sched, "kind: KubeSchedulerConfiguration\n", "kind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: "+e.extKube+"\n")
	e.sched = cp.StartScheduler(t, []byte(sched))

	job := jobSpec{name: "sidecar", ps: 1, workers: 3, cpu: "2"}
	e.createJobs(job)
	e.waitJobBound(job, 60*time.Second)

	lease, err := cp.Client.CoordinationV1().Leases(deployNamespace).Get(context.Background(), "cps-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the scheduler's leader lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease %s/cps-scheduler has no holder", deployNamespace)
	}
	for _, p := range []*framework.Process{e.ext, e.sched} {
		out, err := os.ReadFile(p.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("%s was refused: %s", p.Name, line)
			}
		}
	}
}
