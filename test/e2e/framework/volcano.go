package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// VolcanoBinDirEnv names the environment variable that, when set, points at a folder holding
// vc-scheduler, vc-controller-manager and crd/ (Volcano's CRDs), so that VolcanoBinDir does
// not run the build script.
const VolcanoBinDirEnv = "CPS_VOLCANO_BIN"

// volcanoBuildScript is the script, relative to the repository root, that builds Volcano's
// binaries (a no-op when they are cached) and prints their folder on its last line.
const volcanoBuildScript = "test/tools/build-volcano.sh"

// VolcanoSchedulerName is the scheduler name vc-scheduler serves by default: pods it should
// place set spec.schedulerName to it.
const VolcanoSchedulerName = "volcano"

// VolcanoSchedulerConfName is the file name of the conf StartVolcanoScheduler writes.
const VolcanoSchedulerConfName = "volcano-scheduler.conf"

// The Volcano resources the tests touch.
var (
	VolcanoPodGroups = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	VolcanoQueues    = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	VolcanoJobs      = schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"}

	crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

const (
	volcanoStartTimeout = 60 * time.Second
	crdTimeout          = 30 * time.Second

	// volcanoSchedulerReadyLog is what vc-scheduler logs (at -v=2) once its informers have
	// synced and its scheduling loop starts.
	volcanoSchedulerReadyLog = "Scheduler completes Initialization and start to run"
)

// volcanoBins caches VolcanoBinDir's answer for the life of the test binary, like bins.
var volcanoBins = &binFolder{env: VolcanoBinDirEnv, script: volcanoBuildScript, check: checkVolcanoBinDir}

// VolcanoBinDir returns the folder holding vc-scheduler, vc-controller-manager and crd/:
// $CPS_VOLCANO_BIN if set, else the last line printed by test/tools/build-volcano.sh, which it
// runs once per test binary (a cold build takes minutes). It fails the test, with the
// script's output, if the folder cannot be had.
func VolcanoBinDir(t testing.TB) string {
	t.Helper()
	return volcanoBins.get(t, "Volcano binaries")
}

// checkVolcanoBinDir reports any binary or the CRD folder missing from dir.
func checkVolcanoBinDir(dir string) error {
	var missing []string
	for _, name := range []string{"vc-scheduler", "vc-controller-manager", "crd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

// Dynamic returns an admin dynamic client of the control plane, for custom resources such as
// Volcano's.
func (cp *ControlPlane) Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	return dyn
}

// InstallVolcano creates every CRD in the crd/ folder of dir (VolcanoBinDir: Volcano's own CRDs,
// from the same module as its binaries) and waits until the API server serves PodGroups,
// Queues and Jobs.
func (cp *ControlPlane) InstallVolcano(t testing.TB, dir string) {
	t.Helper()
	cp.InstallCRDs(t, crdFiles(t, filepath.Join(dir, "crd")), VolcanoPodGroups, VolcanoQueues, VolcanoJobs)
}

// StartVolcanoControllerManager runs vc-controller-manager from dir with the controllers
// named (e.g. "queue-controller", "pg-controller", "job-controller"), as admin, without leader
// election, logging to Dir/vc-controller-manager.log. It returns once the process runs; wait
// for what a controller does (a Queue's status.state, say) to know it works.
func (cp *ControlPlane) StartVolcanoControllerManager(t testing.TB, dir string, controllers ...string) *Process {
	t.Helper()
	name := cp.uniqueName("vc-controller-manager")
	return cp.StartProcess(t, name, filepath.Join(dir, "vc-controller-manager"), []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--leader-elect=false",
		"--controllers=" + strings.Join(controllers, ","),
		"--scheduler-name=" + VolcanoSchedulerName,
		"-v=2",
	}, nil)
}

// StartVolcanoScheduler writes conf, a Volcano scheduler configuration, into a folder of its
// own under Dir (vc-scheduler watches the conf's folder and reloads on any write there, so
// nothing else may live in it) and runs vc-scheduler from dir with it, as admin, without
// leader election, at -v=3, logging to Dir/vc-scheduler.log (vc-scheduler-2.log, ... for
// further schedulers). It returns once vc-scheduler logs that its caches have synced and its
// scheduling loop runs. extraArgs are appended to the command line.
func (cp *ControlPlane) StartVolcanoScheduler(t testing.TB, dir string, conf []byte, extraArgs ...string) *Process {
	t.Helper()
	name := cp.uniqueName("vc-scheduler")
	confDir := filepath.Join(cp.Dir, name+"-conf")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(confDir, VolcanoSchedulerConfName)
	if err := os.WriteFile(confPath, conf, 0o644); err != nil {
		t.Fatalf("write Volcano scheduler conf: %v", err)
	}
	// vc-scheduler serves a log-level socket in $DEBUG_SOCKET_DIR (default /tmp/klog-socks,
	// shared by every vc-scheduler on the machine): give each its own.
	socketDir := filepath.Join(cp.Dir, name+"-sockets")
	if err := os.MkdirAll(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--scheduler-conf=" + confPath,
		"--leader-elect=false",
		"--scheduler-name=" + VolcanoSchedulerName,
		"--cache-dumper=false",
		"--listen-address=127.0.0.1:0",
		"--healthz-address=127.0.0.1:0",
		"-v=3",
	}, extraArgs...)
	p := cp.StartProcess(t, name, filepath.Join(dir, "vc-scheduler"), args, []string{"DEBUG_SOCKET_DIR=" + socketDir})
	if err := waitUntil(p, volcanoStartTimeout, func() (bool, error) {
		out, err := p.Output()
		return err == nil && bytes.Contains(out, []byte(volcanoSchedulerReadyLog)), err
	}); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return p
}

// WithoutVolcanoPlugin returns a Volcano scheduler conf without the entry of plugin in its
// tiers: the line "  - name: <plugin>", the comment lines right above it and every line
// indented deeper below it (its arguments and their comments). It is an error if conf has no
// such entry.
func WithoutVolcanoPlugin(conf, plugin string) (string, error) {
	lines := strings.Split(conf, "\n")
	at := slices.Index(lines, "  - name: "+plugin)
	if at < 0 {
		return "", fmt.Errorf("no plugin %q in the conf's tiers", plugin)
	}
	from := at
	for from > 0 && strings.HasPrefix(lines[from-1], "  #") {
		from--
	}
	to := at + 1
	for to < len(lines) && strings.HasPrefix(lines[to], "    ") {
		to++
	}
	return strings.Join(append(lines[:from:from], lines[to:]...), "\n"), nil
}

// WaitVolcanoQueueOpen waits until the Volcano Queue name reports status.state Open, which
// takes vc-controller-manager's queue controller; until then Volcano's proportion plugin
// enqueues and allocates nothing from it.
func (cp *ControlPlane) WaitVolcanoQueueOpen(t testing.TB, name string) {
	t.Helper()
	dyn := cp.Dynamic(t)
	WaitFor(t, volcanoStartTimeout, "Volcano queue "+strconv.Quote(name)+" open", func() (bool, error) {
		q, err := dyn.Resource(VolcanoQueues).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		state, _, _ := unstructured.NestedString(q.Object, "status", "state")
		return state == "Open", fmt.Errorf("state %q", state)
	})
}
