package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cps-extender/cps-extender/internal/testcerts"
)

const (
	// TrainingOperatorNamespace is the namespace the training-operator believes it runs in
	// (MY_POD_NAMESPACE): it keeps its webhook certificate Secret there.
	TrainingOperatorNamespace = "kubeflow"
	// TrainingOperatorWebhookSecret is the Secret the training-operator's certificate rotator
	// fills; v1.9.2 exits at start unless it exists (empty is fine).
	TrainingOperatorWebhookSecret = "training-operator-webhook-cert"
	// TrainingOperatorCertDir is where the training-operator's certificate rotator (v1.9.2,
	// hard-coded) waits for tls.crt to appear, as it would when the Secret is mounted in a pod;
	// it exits if it does not.
	TrainingOperatorCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// trainingOperatorSchemes are the --enable-scheme values of training-operator v1.9.2 (kinds,
// case-insensitive); with none given it runs all of them.
var trainingOperatorSchemes = []string{"TFJob", "PyTorchJob", "XGBoostJob", "MPIJob", "PaddleJob", "JAXJob"}

// TrainingOperatorOptions shape the training-operator that StartTrainingOperatorWith runs.
type TrainingOperatorOptions struct {
	// Schemes are the job kinds it serves (--enable-scheme, e.g. "tfjob", "pytorchjob"); all
	// six of v1.9.2 when empty.
	Schemes []string
	// GangSchedulerName is --gang-scheduler-name: "volcano" makes it create Volcano PodGroups
	// (install Volcano's CRDs first), any other name scheduler-plugins' PodGroups (install
	// test/testdata/crds/coscheduling-podgroup.yaml first), and it sets that schedulerName on the
	// pods. Empty: no PodGroups, pods keep their template's schedulerName.
	GangSchedulerName string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
}

// InstallTrainingOperator creates the training-operator's CRDs (crd/training-operator/ of dir,
// ControllersBinDir) and waits until they are served, then the namespace
// TrainingOperatorNamespace with the empty Secret TrainingOperatorWebhookSecret that its
// certificate rotator needs.
func (cp *ControlPlane) InstallTrainingOperator(t testing.TB, dir string) {
	t.Helper()
	var served []schema.GroupVersionResource
	for _, s := range trainingOperatorSchemes {
		served = append(served, schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: strings.ToLower(s) + "s"})
	}
	cp.InstallCRDs(t, crdFiles(t, filepath.Join(dir, "crd", "training-operator")), served...)
	cp.namespaceExists(t, TrainingOperatorNamespace)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: TrainingOperatorWebhookSecret, Namespace: TrainingOperatorNamespace}}
	if _, err := cp.Client.CoreV1().Secrets(TrainingOperatorNamespace).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create Secret %s/%s: %v", TrainingOperatorNamespace, TrainingOperatorWebhookSecret, err)
	}
}

// StartTrainingOperator is StartTrainingOperatorWith serving the given schemes (all if none).
func (cp *ControlPlane) StartTrainingOperator(t testing.TB, dir string, schemes ...string) *Process {
	t.Helper()
	return cp.StartTrainingOperatorWith(t, dir, TrainingOperatorOptions{Schemes: schemes})
}

// StartTrainingOperatorWith runs the training-operator (v1.9.2) from dir (ControllersBinDir),
// after InstallTrainingOperator, as admin with MY_POD_NAMESPACE=TrainingOperatorNamespace,
// without leader election, metrics or health probes, logging to Dir/training-operator.log. Its
// webhooks are not registered (it logs "Webhook not found" and carries on), so nothing
// validates or defaults a job at admission; its webhook server listens on a free port with a
// self-signed pair in a folder of the scratch folder ($TMPDIR), and a pair is put in
// TrainingOperatorCertDir if none is there (it is left there: other tests may use it). It
// returns once the controller of every scheme runs its workers.
func (cp *ControlPlane) StartTrainingOperatorWith(t testing.TB, dir string, opts TrainingOperatorOptions) *Process {
	t.Helper()
	schemes := opts.Schemes
	if len(schemes) == 0 {
		schemes = trainingOperatorSchemes
	}
	if err := ensureServingPair(t, TrainingOperatorCertDir); err != nil {
		t.Fatalf("training-operator's certificate folder: %v", err)
	}
	// controller-runtime's webhook server reads its pair from $TMPDIR/k8s-webhook-server/serving-certs.
	name := cp.uniqueName("training-operator")
	tmp := filepath.Join(cp.Dir, name+"-tmp")
	certDir := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := testcerts.NewCA(t)
	ca.IssueFiles(t, 2, filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))

	var controllers []string
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	}
	for _, s := range schemes {
		args = append(args, "--enable-scheme="+s)
		controllers = append(controllers, trainingOperatorController(s))
	}
	if opts.GangSchedulerName != "" {
		args = append(args, "--gang-scheduler-name="+opts.GangSchedulerName)
	}
	env := []string{"MY_POD_NAMESPACE=" + TrainingOperatorNamespace, "TMPDIR=" + tmp}
	return cp.startRetrying(t, name, func() (*Process, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		all := append(append(append([]string(nil), args...), portArg("webhook-server-port", port)), opts.ExtraArgs...)
		p, err := cp.startChild(t, name, filepath.Join(dir, trainingOperatorBin), all, env)
		if err != nil {
			return nil, err
		}
		return p, waitUntil(p, controllerStartTimeout, func() (bool, error) {
			out, err := p.Output()
			if err != nil {
				return false, err
			}
			for _, c := range controllers {
				if !runtimeControllerStarted(out, c) {
					return false, fmt.Errorf("%s not started yet", c)
				}
			}
			return true, nil
		})
	})
}

// trainingOperatorController is the name of the training-operator's controller for a scheme
// (a job kind, any case): "tfjob-controller" for "TFJob".
func trainingOperatorController(scheme string) string {
	return strings.ToLower(scheme) + "-controller"
}

// servingPairMinLife is how long a serving pair found in a shared folder must still be valid
// for ensureServingPair to keep it.
const servingPairMinLife = 2 * time.Hour

// ensureServingPair makes sure dir holds tls.crt and tls.key, a matching pair valid for at
// least servingPairMinLife; if not, it writes a new self-signed pair for 127.0.0.1. dir may be
// shared by concurrent tests (and test binaries): it works under an exclusive lock on
// dir/.lock and replaces each file by a rename, so nobody reads half a file.
func ensureServingPair(t testing.TB, dir string) error {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too

	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := validPair(certFile, keyFile, time.Now().Add(servingPairMinLife)); err == nil {
		return nil
	}
	certPEM, keyPEM := testcerts.NewCA(t).Issue(t, 1)
	for _, f := range []struct {
		path string
		data []byte
	}{{keyFile, keyPEM}, {certFile, certPEM}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return err
		}
	}
	return nil
}

// validPair reports why certFile and keyFile are not a matching pair whose certificate is
// valid until at least until (nil if they are).
func validPair(certFile, keyFile string, until time.Time) error {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	if len(pair.Certificate) == 0 {
		return errors.New("no certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	if leaf.NotAfter.Before(until) {
		return fmt.Errorf("certificate expires at %v", leaf.NotAfter)
	}
	return nil
}
