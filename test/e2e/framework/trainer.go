package framework

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/internal/testcerts"
)

// ControllersExtraBinDirEnv names the environment variable that, when set, points at a folder
// holding trainer-controller-manager, lws-controller-manager, crd/, webhook/ and runtimes/ (see
// test/tools/build-controllers-extra.sh), so that ControllersExtraBinDir does not run the build
// script.
const ControllersExtraBinDirEnv = "CPS_CONTROLLERS_EXTRA_BIN"

// controllersExtraBuildScript builds the optional operators (a no-op when they are cached) and
// prints their folder on its last line.
const controllersExtraBuildScript = "test/tools/build-controllers-extra.sh"

// The optional operators' resources.
var (
	TrainJobs               = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}
	TrainingRuntimes        = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainingruntimes"}
	ClusterTrainingRuntimes = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "clustertrainingruntimes"}
	LeaderWorkerSets        = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
)

const (
	// trainerBin and lwsBin are the binaries' names in ControllersExtraBinDir.
	trainerBin = "trainer-controller-manager"
	lwsBin     = "lws-controller-manager"

	// TrainerNamespace is the namespace Kubeflow Trainer v2.0.0 believes it runs in outside a
	// pod: its certificate rotator keeps TrainerWebhookSecret there.
	TrainerNamespace = "kubeflow-system"
	// TrainerWebhookSecret is the Secret Trainer's certificate rotator fills; the rotator does
	// nothing until it exists (empty is fine).
	TrainerWebhookSecret = "kubeflow-trainer-webhook-cert"
	// trainerRotatedWebhook is the webhook configuration whose caBundle Trainer's certificate
	// rotator overwrites with its own CA (hard-coded in v2.0.0).
	trainerRotatedWebhook = "validator.trainer.kubeflow.org"
	// trainerWebhookPrefix is put before the name of Trainer's webhook configuration, so that
	// the rotator does not find it (see StartTrainer).
	trainerWebhookPrefix = "cps-e2e-"
)

// trainerControllers are the controllers of Kubeflow Trainer v2.0.0, by the names its log gives.
var trainerControllers = []string{"trainjob_controller", "trainingruntime_controller", "clustertrainingruntime_controller"}

// controllersExtraBins caches ControllersExtraBinDir's answer for the life of the test binary.
var controllersExtraBins = &binFolder{env: ControllersExtraBinDirEnv, script: controllersExtraBuildScript, check: checkControllersExtraBinDir}

// ControllersExtraBinDir returns the folder holding the optional operators, Kubeflow Trainer
// v2 and LeaderWorkerSet: trainer-controller-manager, lws-controller-manager, crd/trainer/,
// crd/lws/, webhook/trainer/, webhook/lws/ and runtimes/trainer/. It is
// $CPS_CONTROLLERS_EXTRA_BIN if set, else the last line printed by
// test/tools/build-controllers-extra.sh, which it runs once per test binary (about a minute
// after build-controllers.sh, five from an empty build cache). It fails the test, with the
// script's output, if the folder cannot be had.
func ControllersExtraBinDir(t testing.TB) string {
	t.Helper()
	return controllersExtraBins.get(t, "optional workload controller binaries")
}

// checkControllersExtraBinDir reports any binary or manifest folder missing from dir.
func checkControllersExtraBinDir(dir string) error {
	var missing []string
	for _, name := range []string{trainerBin, lwsBin, "crd/trainer", "crd/lws", "webhook/trainer", "webhook/lws", "runtimes/trainer"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

// InstallTrainer creates Kubeflow Trainer's CRDs (crd/trainer/ of dir, ControllersExtraBinDir)
// and waits until TrainJobs and both kinds of training runtime are served, then the namespace
// TrainerNamespace with the empty Secret TrainerWebhookSecret that its certificate rotator
// needs. Install JobSet too (InstallJobSet): a TrainJob runs as a JobSet.
func (cp *ControlPlane) InstallTrainer(t testing.TB, dir string) {
	t.Helper()
	cp.InstallCRDs(t, crdFiles(t, filepath.Join(dir, "crd", "trainer")), TrainJobs, TrainingRuntimes, ClusterTrainingRuntimes)
	cp.namespaceExists(t, TrainerNamespace)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: TrainerWebhookSecret, Namespace: TrainerNamespace}}
	if _, err := cp.Client.CoreV1().Secrets(TrainerNamespace).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create Secret %s/%s: %v", TrainerNamespace, TrainerWebhookSecret, err)
	}
}

// StartTrainer runs Kubeflow Trainer's controller manager (v2.0.0) from dir
// (ControllersExtraBinDir), after InstallTrainer, InstallJobSet and StartJobSet (it makes
// JobSets, which JobSet's webhooks must admit), as admin, without leader election, metrics or
// health probes, logging to Dir/trainer-controller-manager.log.
//
// Its certificate rotator, as the training-operator's, waits for a pair in the fixed folder
// TrainingOperatorCertDir (one is put there if none is valid) and injects its own CA into the
// webhook configuration named validator.trainer.kubeflow.org. Its webhook server instead reads
// a pair signed by a fresh CA from its own $TMPDIR and listens on a free port; its validating
// webhook configuration (TrainJobs, TrainingRuntimes, ClusterTrainingRuntimes; it has no
// mutating one) is registered under the name cps-e2e-validator.trainer.kubeflow.org, which the
// rotator leaves alone, to call it by URL with that CA. Its failurePolicy is Fail, as shipped.
//
// It returns once its three controllers run their workers and the API server has its
// validating webhook for TrainJobs answer (a dry-run TrainJob of a runtime that does not exist
// is denied by the webhook, not failed by a call that did not get through): Trainer sets its
// webhooks up only after its certificates are ready, its TrainJob webhook last.
func (cp *ControlPlane) StartTrainer(t testing.TB, dir string) *Process {
	t.Helper()
	if err := ensureServingPair(t, TrainingOperatorCertDir); err != nil {
		t.Fatalf("Trainer's certificate folder: %v", err)
	}
	name := cp.uniqueName(trainerBin)
	// controller-runtime's webhook server reads its pair from $TMPDIR/k8s-webhook-server/serving-certs.
	tmp := filepath.Join(cp.Dir, name+"-tmp")
	certDir := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := testcerts.NewCA(t)
	ca.IssueFiles(t, 4, filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))

	p := cp.startRetrying(t, name, func() (*Process, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p, err := cp.startChild(t, name, filepath.Join(dir, trainerBin), []string{
			"--kubeconfig=" + cp.Kubeconfig,
			"--leader-elect=false",
			"--metrics-bind-address=0",
			"--health-probe-bind-address=0",
			portArg("webhook-server-port", port),
		}, []string{"TMPDIR=" + tmp})
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if err := waitUntil(p, controllerStartTimeout, func() (bool, error) {
			return handshake(addr, ca.PEM) == nil, nil
		}); err != nil {
			return p, err
		}
		mutating, validating, err := WebhookConfigs(filepath.Join(dir, "webhook", "trainer"), trainerWebhookPrefix, "https://"+addr, ca.PEM)
		if err != nil {
			return p, err
		}
		if validating == nil || validating.Name == trainerRotatedWebhook {
			return p, fmt.Errorf("want a validating webhook configuration not named %s (the rotator rewrites that one), got %v", trainerRotatedWebhook, validating)
		}
		return p, ApplyWebhookConfigs(cp.Client, mutating, validating)
	})
	cp.waitControllersStarted(t, p, runtimeControllerStarted, trainerControllers)
	cp.waitTrainerValidates(t, p)
	return p
}

// trainerProbe is a TrainJob of a runtime that does not exist, for the dry runs of
// waitTrainerValidates.
const trainerProbe = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: cps-e2e-webhook-probe
  namespace: default
spec:
  runtimeRef:
    name: cps-e2e-no-such-runtime
`

// waitTrainerValidates dry-runs the creation of trainerProbe until Trainer's webhook denies
// it (webhookAnswered).
func (cp *ControlPlane) waitTrainerValidates(t testing.TB, p *Process) {
	t.Helper()
	probe := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(trainerProbe), &probe.Object); err != nil {
		t.Fatal(err)
	}
	jobs := cp.Dynamic(t).Resource(TrainJobs).Namespace("default")
	if err := waitUntil(p, controllerStartTimeout, func() (bool, error) {
		_, err := jobs.Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return webhookAnswered(err), fmt.Errorf("a dry-run TrainJob of a missing runtime: %v", err)
	}); err != nil {
		t.Fatalf("Trainer's validating webhook: %v", err)
	}
}

// webhookAnswered reports whether err, from a request that an admission webhook should deny,
// is the webhook's denial ("admission webhook \"x\" denied the request: ..."), rather than a
// call that failed ("failed calling webhook": no server, no handler yet, a TLS error), or no
// webhook called at all (nil).
func webhookAnswered(err error) bool {
	return err != nil && strings.Contains(err.Error(), "denied the request") && !strings.Contains(err.Error(), "failed calling webhook")
}

// InstallTrainingRuntimes creates the ClusterTrainingRuntimes that Kubeflow Trainer v2.0.0
// ships (runtimes/trainer/ of dir, ControllersExtraBinDir, every YAML file but the
// kustomizations; existing ones are kept), after StartTrainer (its webhook validates them), and
// returns their names.
func (cp *ControlPlane) InstallTrainingRuntimes(t testing.TB, dir string) []string {
	t.Helper()
	files, err := runtimeFiles(filepath.Join(dir, "runtimes", "trainer"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no training runtimes in %s (%v)", dir, err)
	}
	res := cp.Dynamic(t).Resource(ClusterTrainingRuntimes)
	var names []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitYAML(raw)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		for _, doc := range docs {
			obj := &unstructured.Unstructured{Object: doc}
			if obj.GetKind() != "ClusterTrainingRuntime" {
				continue
			}
			if _, err := res.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create ClusterTrainingRuntime %s (%s): %v", obj.GetName(), filepath.Base(f), err)
			}
			names = append(names, obj.GetName())
		}
	}
	return names
}

// runtimeFiles lists the YAML files under dir, its subfolders included, but kustomization.yaml.
func runtimeFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".yaml") && d.Name() != "kustomization.yaml" {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}
