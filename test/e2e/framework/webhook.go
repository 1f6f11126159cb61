package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// TurnGateWebhookManifest is the shipped turn-gate webhook configuration, relative to the
// repository root.
const TurnGateWebhookManifest = "deploy/webhook/turn-gate.yaml"

// TurnGateWebhookConfig is the extender config section that serves the webhook on addr with
// the certificate the extender keeps, also valid for 127.0.0.1 (see RegisterTurnGateWebhook).
func TurnGateWebhookConfig(addr string) string {
	return fmt.Sprintf("webhook:\n  listen: %s\n  hosts: [\"127.0.0.1\"]\n", addr)
}

// RegisterTurnGateWebhook creates the shipped turn-gate webhook configuration, calling the
// extender's webhook listener at addr by URL (a Service's cluster IP routes nowhere on a
// test machine), with no caBundle (the extender fills it), and the namespace of the
// extender's certificate Secret. path is the manifest's path.
func RegisterTurnGateWebhook(c kubernetes.Interface, path, addr string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var hook admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &hook); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	url := "https://" + addr + "/webhook/turn-gate"
	for i := range hook.Webhooks {
		hook.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cps-system"}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace cps-system: %w", err)
	}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &hook, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the turn-gate webhook configuration: %w", err)
	}
	return nil
}

// RegisterRepoTurnGateWebhook is RegisterTurnGateWebhook with the repository's manifest,
// failing t on error.
func RegisterRepoTurnGateWebhook(t testing.TB, c kubernetes.Interface, addr string) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterTurnGateWebhook(c, filepath.Join(root, TurnGateWebhookManifest), addr); err != nil {
		t.Fatal(err)
	}
}

// webhookCallsSample is the extender's count of answered turn-gate webhook calls.
const webhookCallsSample = `cps_extender_requests_total{code="200",verb="turn-gate"} `

// WebhookCalls is how many turn-gate webhook calls the extender whose /metrics body is given
// answered.
func WebhookCalls(metrics string) (int, error) {
	v, ok := MetricSample(metrics, webhookCallsSample)
	if !ok {
		return 0, nil
	}
	return strconv.Atoi(v)
}

// MetricSample is the value of the series (name and labels, as served, then a space) in a
// /metrics body, and whether it is served.
func MetricSample(metrics, series string) (string, bool) {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			return v, true
		}
	}
	return "", false
}

// WaitTurnGateWebhook waits up to timeout until the extender has the shipped turn-gate
// webhook configuration ready: every webhook's caBundle trusts the certificate the
// extender's webhook listener at addr presents (a TLS handshake trusting only the bundle,
// as the API server's), and the extender has switched the calls on or off (the
// matchCondition cps-extender-job-waits). On an idle cluster it switches them off at once.
func WaitTurnGateWebhook(t testing.TB, c kubernetes.Interface, addr string, on bool, timeout time.Duration) {
	t.Helper()
	want := strconv.FormatBool(on)
	WaitFor(t, timeout, "the turn-gate webhook configuration ready", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, turnGateConfiguration, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, hook := range cfg.Webhooks {
			if got := switchCondition(hook); got != want {
				return false, fmt.Errorf("webhook %s switched %q, want %q", hook.Name, got, want)
			}
			if err := handshake(addr, hook.ClientConfig.CABundle); err != nil {
				return false, fmt.Errorf("webhook %s: %w", hook.Name, err)
			}
		}
		return true, nil
	})
}

// turnGateConfiguration and turnGateSwitch name the shipped configuration and the
// matchCondition the extender switches (admission.SwitchCondition).
const (
	turnGateConfiguration = "cps-extender-turn-gate"
	turnGateSwitch        = "cps-extender-job-waits"
)

// switchCondition is hook's switch expression, "" without one.
func switchCondition(hook admissionregistrationv1.MutatingWebhook) string {
	for _, m := range hook.MatchConditions {
		if m.Name == turnGateSwitch {
			return m.Expression
		}
	}
	return ""
}

// handshake connects to addr over TLS trusting only caBundle, naming addr's host.
func handshake(addr string, caBundle []byte) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return fmt.Errorf("no caBundle yet")
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config: &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12}}
	conn, err := dialer.Dial("tcp", addr)
	if err != nil {
		return fmt.Errorf("TLS handshake with %s trusting the caBundle: %w", addr, err)
	}
	return conn.Close()
}

// WaitWebhookCalled waits up to timeout until the API server calls the turn-gate webhook
// (it picks up a changed webhook configuration within a second or so, and calls only once
// it trusts the certificate): probe is created and deleted until the extender, whose
// /metrics the metrics function reads, has answered a call more. The probe should select no node, so
// that no scheduler binds it in the moment before it goes.
func WaitWebhookCalled(t testing.TB, c kubernetes.Interface, probe *corev1.Pod, metrics func() (string, error), timeout time.Duration) {
	t.Helper()
	waitWebhookProbe(t, c, probe, metrics, timeout, true)
}

// WaitWebhookNotCalled is WaitWebhookCalled's opposite: it waits until a probe's creation
// is no longer sent to the webhook (the API server has picked up calls switched off).
func WaitWebhookNotCalled(t testing.TB, c kubernetes.Interface, probe *corev1.Pod, metrics func() (string, error), timeout time.Duration) {
	t.Helper()
	waitWebhookProbe(t, c, probe, metrics, timeout, false)
}

// waitWebhookProbe creates and deletes probe until its creation was (called) or was not
// answered by the webhook.
func waitWebhookProbe(t testing.TB, c kubernetes.Interface, probe *corev1.Pod, metrics func() (string, error), timeout time.Duration, called bool) {
	t.Helper()
	calls := func() (int, error) {
		body, err := metrics()
		if err != nil {
			return 0, err
		}
		return WebhookCalls(body)
	}
	zero := int64(0)
	pods := c.CoreV1().Pods(probe.Namespace)
	what := map[bool]string{true: "the API server calling the turn-gate webhook", false: "the API server no longer calling the turn-gate webhook"}
	WaitFor(t, timeout, what[called], func() (bool, error) {
		before, err := calls()
		if err != nil {
			return false, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pods.Create(ctx, probe, metav1.CreateOptions{}); err != nil {
			return false, err
		}
		if err := pods.Delete(ctx, probe.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			return false, err
		}
		n, err := calls()
		if err != nil {
			return false, err
		}
		return (n > before) == called, fmt.Errorf("calls %d -> %d on the probe", before, n)
	})
}
