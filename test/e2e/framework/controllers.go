package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// ControllersBinDirEnv names the environment variable that, when set, points at a folder
// holding kube-controller-manager, training-operator, jobset-controller-manager, crd/ and
// webhook/ (see test/tools/build-controllers.sh), so that ControllersBinDir does not run the
// build script.
const ControllersBinDirEnv = "CPS_CONTROLLERS_BIN"

// controllersBuildScript is the script, relative to the repository root, that builds the
// workload controllers (a no-op when they are cached) and prints their folder on its last line.
const controllersBuildScript = "test/tools/build-controllers.sh"

// The workload resources the controllers serve.
var (
	TFJobs      = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "tfjobs"}
	PyTorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}
	JobSets     = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
)

// DefaultKubeControllers are the controllers StartControllerManager runs when given none: the
// Job controller (JobSet's Jobs) and the garbage collector (owned objects go with their owner).
var DefaultKubeControllers = []string{"job-controller", "garbage-collector-controller"}

// LWSKubeControllers are DefaultKubeControllers and the StatefulSet controller, which makes
// the pods of a LeaderWorkerSet's StatefulSets: StartControllerManager(t,
// LWSKubeControllers...) before StartLWS.
var LWSKubeControllers = append(append([]string(nil), DefaultKubeControllers...), "statefulset-controller")

const (
	controllerStartTimeout = 90 * time.Second

	// controllerManagerBin, trainingOperatorBin and jobSetBin are the binaries' names in
	// ControllersBinDir.
	controllerManagerBin = "kube-controller-manager"
	trainingOperatorBin  = "training-operator"
	jobSetBin            = "jobset-controller-manager"
)

// controllersBins caches ControllersBinDir's answer for the life of the test binary, like bins.
var controllersBins = &binFolder{env: ControllersBinDirEnv, script: controllersBuildScript, check: checkControllersBinDir}

// ControllersBinDir returns the folder holding kube-controller-manager, training-operator,
// jobset-controller-manager, crd/training-operator/, crd/jobset/ and webhook/jobset/:
// $CPS_CONTROLLERS_BIN if set, else the last line printed by test/tools/build-controllers.sh,
// which it runs once per test binary (a cold build takes minutes). It fails the test, with the
// script's output, if the folder cannot be had.
func ControllersBinDir(t testing.TB) string {
	t.Helper()
	return controllersBins.get(t, "workload controller binaries")
}

// checkControllersBinDir reports any binary or manifest folder missing from dir.
func checkControllersBinDir(dir string) error {
	var missing []string
	for _, name := range []string{controllerManagerBin, trainingOperatorBin, jobSetBin, "crd/training-operator", "crd/jobset", "webhook/jobset"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

// InstallCRDs creates the CustomResourceDefinitions in files (YAML, one each; existing ones are
// kept) and waits until the API server serves every resource in served.
func (cp *ControlPlane) InstallCRDs(t testing.TB, files []string, served ...schema.GroupVersionResource) {
	t.Helper()
	dyn := cp.Dynamic(t)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			t.Fatalf("read CRD %s: %v", f, err)
		}
		if _, err := dyn.Resource(crdResource).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", filepath.Base(f), err)
		}
	}
	for _, gvr := range served {
		WaitFor(t, crdTimeout, gvr.String()+" served", func() (bool, error) {
			_, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{Limit: 1})
			return err == nil, err
		})
	}
}

// crdFiles returns the YAML files in dir, failing t if there are none.
func crdFiles(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s (%v)", dir, err)
	}
	return files
}

// StartControllerManager runs kube-controller-manager from ControllersBinDir with the named
// controllers (DefaultKubeControllers if none), as admin (--use-service-account-credentials=
// false: nothing creates service accounts here), without leader election or a serving port, at
// -v=1, logging to Dir/kube-controller-manager.log. It returns once every named controller has
// been started (kube-controller-manager logs "Controller starting..." for it); a controller's
// informers sync a moment later, and what it misses meanwhile it finds in their first list.
//
// The garbage collector watches the kinds the API server serves when it starts and looks for
// new ones only every 30 s: install CRDs (InstallTrainingOperator, InstallJobSet,
// InstallVolcano) before, or the dependents of a custom object deleted in the meantime (a
// TFJob's pods) stay. The training-operator's pods and JobSet's Jobs and pods are owned by
// their job, so with the garbage collector running, deleting the job deletes them.
func (cp *ControlPlane) StartControllerManager(t testing.TB, controllers ...string) *Process {
	t.Helper()
	if len(controllers) == 0 {
		controllers = DefaultKubeControllers
	}
	dir := ControllersBinDir(t)
	name := cp.uniqueName("kube-controller-manager")
	p := cp.StartProcess(t, name, filepath.Join(dir, controllerManagerBin), []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"-v=1",
	}, nil)
	cp.waitControllersStarted(t, p, kubeControllerStarted, controllers)
	return p
}

// waitControllersStarted waits until p's log shows every controller started, by started.
func (cp *ControlPlane) waitControllersStarted(t testing.TB, p *Process, started func(log []byte, controller string) bool, controllers []string) {
	t.Helper()
	if err := waitUntil(p, controllerStartTimeout, func() (bool, error) {
		out, err := p.Output()
		if err != nil {
			return false, err
		}
		var missing []string
		for _, c := range controllers {
			if !started(out, c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			return false, fmt.Errorf("not started yet: %s", strings.Join(missing, ", "))
		}
		return true, nil
	}); err != nil {
		t.Fatalf("start %s: %v", p.Name, err)
	}
}

// kubeControllerStarted reports whether a kube-controller-manager log (klog text, -v=1 or
// more) shows controller started.
func kubeControllerStarted(log []byte, controller string) bool {
	return regexp.MustCompile(`"Controller starting\.\.\." controller="` + regexp.QuoteMeta(controller) + `"`).Match(log)
}

// runtimeControllerStarted reports whether the log of a controller-runtime manager (zap, in
// its console or JSON encoding) shows the controller of that name running its workers.
func runtimeControllerStarted(log []byte, controller string) bool {
	return regexp.MustCompile(`(?m)Starting workers.*"controller": ?"` + regexp.QuoteMeta(controller) + `"`).Match(log)
}

// namespaceExists creates the namespace name unless it exists.
func (cp *ControlPlane) namespaceExists(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// startRetrying starts a component with startWithRetry and returns the process that came up.
func (cp *ControlPlane) startRetrying(t testing.TB, what string, start func() (*Process, error)) *Process {
	t.Helper()
	var up *Process
	cp.startWithRetry(t, what, func() (*Process, error) {
		p, err := start()
		up = p
		return p, err
	})
	return up
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// portArg is "--flag=port".
func portArg(flag string, port int) string { return "--" + flag + "=" + strconv.Itoa(port) }

// CreateYAML creates the object in manifest (one YAML document) as the resource gvr, in the
// manifest's namespace (default: "default") unless gvr is cluster-scoped (namespaced false), and
// returns it as the API server stored it, after admission (defaulting webhooks included).
func (cp *ControlPlane) CreateYAML(t testing.TB, gvr schema.GroupVersionResource, namespaced bool, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("read manifest: %v", err)
	}
	var res dynamic.ResourceInterface = cp.Dynamic(t).Resource(gvr)
	if namespaced {
		if obj.GetNamespace() == "" {
			obj.SetNamespace("default")
		}
		res = cp.Dynamic(t).Resource(gvr).Namespace(obj.GetNamespace())
	}
	got, err := res.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return got
}

// StatusCondition returns the status ("True", "False", "Unknown") of the condition of type typ
// in obj's status.conditions, and "" if there is none.
func StatusCondition(obj *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
