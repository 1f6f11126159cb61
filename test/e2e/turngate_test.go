//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// turnGate is the scheduling gate cps-extender lifts when a job's turn comes
// (gang.TurnGate); the test names it as a user's pod template would.
const turnGate = "cps-extender.io/turn"

// gatesOf returns the names of a pod's scheduling gates.
func (e *env) gatesOf(name string) []string {
	e.t.Helper()
	pod, err := e.cp.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return gateNames(pod)
}

// gateNames are the names of pod's scheduling gates.
func gateNames(pod *corev1.Pod) []string {
	var out []string
	for _, g := range pod.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

// TestTurnGate: pods created with the turn gate are never tried by kube-scheduler while
// their job waits; the extender lifts the gate when the turn comes and the job is bound
// at once, with no backoff to wait out. The turn here comes with the end of a running job,
// with a gang's last pod, at once for a pod in no job, and with the removal of another
// gate, which the extender leaves alone.
func TestTurnGate(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	gate := []string{turnGate}

	t.Run("a running job ends", func(t *testing.T) {
		defer e.use(t)()
		first := jobSpec{name: "first", workers: 2, cpu: "4", gates: gate}
		second := jobSpec{name: "second", ps: 1, workers: 1, cpu: "4", gates: gate}
		e.gatedHandover(rec, first, second)
		e.deleteJob(second)
	})

	t.Run("pods one by one", func(t *testing.T) {
		defer e.use(t)()
		late := jobSpec{name: "late", ps: 1, workers: 3, cpu: "1", gates: gate}
		var lastCreated time.Time
		for i, p := range late.pods() {
			if i > 0 {
				time.Sleep(300 * time.Millisecond)
			}
			e.createPods(p)
			lastCreated = time.Now()
		}
		e.waitJobBound(late, 30*time.Second)
		took := lastBound(t, rec, late).Sub(lastCreated)
		t.Logf("late bound %v after its last pod was created", took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("bound %v after the last pod; want within 5s", took.Round(time.Millisecond))
		}
		for _, p := range late.pods() {
			if msgs := e.failedSchedulingMessages("default", p.name); len(msgs) != 0 {
				t.Errorf("kube-scheduler turned %s away: %q", p.name, msgs)
			}
		}
		checkWhole(t, rec, late)
		e.deleteJob(late)
	})

	t.Run("a pod in no job", func(t *testing.T) {
		defer e.use(t)()
		e.createPods(podSpec{name: "loose", cpu: "1", gates: gate})
		framework.WaitFor(t, 30*time.Second, "loose bound", func() (bool, error) {
			node := e.bound("default")["loose"]
			return node != "", fmt.Errorf("gates %q", e.gatesOf("loose"))
		})
		e.deletePods("default", "loose")
	})

	t.Run("another gate", func(t *testing.T) {
		defer e.use(t)()
		both := []string{turnGate, "example.com/quota"}
		quota := jobSpec{name: "quota", workers: 1, cpu: "1", gates: both}
		e.createJobs(quota)
		name := quota.pods()[0].name
		framework.WaitFor(t, 30*time.Second, "quota blocked by the other gate", func() (bool, error) {
			q, err := e.queue()
			d := q["default/quota"]
			return err == nil && strings.Contains(d.Blocker, "scheduling gated"), fmt.Errorf("quota: %+v (%v)", d, err)
		})
		time.Sleep(2 * time.Second)
		if got := e.gatesOf(name); !slices.Equal(got, both) {
			t.Fatalf("gates %q while another gate holds the job, want %q", got, both)
		}
		pod, err := e.cp.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: turnGate}}
		if _, err := e.cp.Client.CoreV1().Pods("default").Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitJobBound(quota, 30*time.Second)
		checkWhole(t, rec, quota)
		e.deleteJob(quota)
	})
}

// registerTurnGateWebhook registers cps-extender's admission webhook with the API server as
// deploy/webhook does, but by URL (addr), since no Service routes here: pod creations for
// cps-scheduler outside kube-system, over HTTPS, failure policy Ignore, no caBundle yet.
func (e *env) registerTurnGateWebhook(addr string) {
	e.t.Helper()
	url := "https://" + addr + "/webhook/turn-gate"
	ignore, none, timeout := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone, int32(5)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "cps-extender-turn-gate"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "turn-gate.cps-extender.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}, // the extender fills caBundle
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "cps-scheduler", Expression: "object.spec.schedulerName == '" + schedulerName + "'"}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"},
			}}},
			FailurePolicy: &ignore, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := e.cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestTurnGateWebhook: the extender serves its admission webhook as shipped, on an HTTPS
// listener of its own with a certificate it keeps itself (a Secret, and the CA in the
// webhook configuration's caBundle). Pods created with no gate get the turn gate; a job
// that waits is not tried by kube-scheduler, and runs at once when its turn comes. A pod of
// another scheduler is left alone; a restarted extender (or a second replica) serves the
// same certificate, and the caBundle is not touched again.
func TestTurnGateWebhook(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	hookAddr := freeAddr(t)
	e.registerTurnGateWebhook(hookAddr)
	webhookConfig := fmt.Sprintf("webhook:\n  listen: %s\n  hosts: [\"127.0.0.1\"]\n", hookAddr)
	e.startExtender(webhookConfig)
	e.startScheduler(true)
	rec := e.recordBindings("default")

	ctx := context.Background()
	hooks := e.cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	var filled *admissionregistrationv1.MutatingWebhookConfiguration
	framework.WaitFor(t, 30*time.Second, "the extender filling the caBundle", func() (bool, error) {
		var err error
		filled, err = hooks.Get(ctx, "cps-extender-turn-gate", metav1.GetOptions{})
		return err == nil && len(filled.Webhooks[0].ClientConfig.CABundle) > 0, fmt.Errorf("caBundle empty (%v)", err)
	})
	secret, err := e.cp.Client.CoreV1().Secrets("cps-system").Get(ctx, "cps-extender-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the extender's certificate Secret: %v", err)
	}
	if !bytes.Equal(secret.Data["ca.crt"], filled.Webhooks[0].ClientConfig.CABundle) {
		t.Error("caBundle is not the Secret's ca.crt")
	}

	e.waitWebhookGating()
	if gates := e.gatesAtCreate(podSpec{name: "other", scheduler: "other-scheduler"}); len(gates) != 0 {
		t.Errorf("a pod of another scheduler was created with gates %q", gates)
	}
	e.deletePods("default", "other")

	e.gatedHandover(rec, jobSpec{name: "wh-first", workers: 2, cpu: "4"}, jobSpec{name: "wh-second", ps: 1, workers: 1, cpu: "4"})

	// A restart finds the Secret and serves it: the API server's trust still holds.
	if err := e.ext.Stop(); err != nil {
		t.Fatal(err)
	}
	e.startExtender(webhookConfig)
	e.waitWebhookGating()
	again, err := hooks.Get(ctx, "cps-extender-turn-gate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != filled.ResourceVersion {
		t.Errorf("the restarted extender changed the webhook configuration (resourceVersion %s -> %s)", filled.ResourceVersion, again.ResourceVersion)
	}
}

// gatesAtCreate creates p in default and returns the scheduling gates it was created with.
func (e *env) gatesAtCreate(p podSpec) []string {
	e.t.Helper()
	pod, err := e.cp.Client.CoreV1().Pods("default").Create(context.Background(), p.pod(), metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return gateNames(pod)
}

// waitWebhookGating waits until the API server calls the turn-gate webhook (it picks up a
// changed webhook configuration within a second or so): probe (default: a pod of
// cps-scheduler) comes back from the create with the turn gate. The probe selects no node,
// so no scheduler binds it in the moment before it is deleted.
func (e *env) waitWebhookGating(probe ...podSpec) {
	e.t.Helper()
	p := podSpec{name: "probe"}
	if len(probe) > 0 {
		p = probe[0]
	}
	p.selector = map[string]string{"cps-e2e/probe": "no-such-node"}
	framework.WaitFor(e.t, 30*time.Second, "the webhook gating new pods", func() (bool, error) {
		gates := e.gatesAtCreate(p)
		e.deletePods("default", p.name)
		return slices.Equal(gates, []string{turnGate}), fmt.Errorf("probe created with gates %q", gates)
	})
}

// gatedHandover runs first, which fills the cluster, then second behind it: second's pods
// must wait with the turn gate alone (from their spec or the webhook), never tried by
// kube-scheduler, with the extender's WaitingForTurn Event saying why; once first is gone,
// second is bound whole within 5 s.
func (e *env) gatedHandover(rec *bindRecorder, first, second jobSpec) {
	t := e.t
	t.Helper()
	e.createJobs(first)
	e.waitJobBound(first, 30*time.Second)
	e.createJobs(second)
	e.waitWaiting(second)
	waiting := second.pods()[0].name
	e.waitEvent("default", waiting, "WaitingForTurn", "waits for its turn")
	time.Sleep(3 * time.Second) // recomputes come and go; the gate stays
	for _, p := range second.pods() {
		if got := e.gatesOf(p.name); !slices.Equal(got, []string{turnGate}) {
			t.Errorf("%s waits for its turn with gates %q, want %q", p.name, got, turnGate)
		}
		if msgs := e.failedSchedulingMessages("default", p.name); len(msgs) != 0 {
			t.Errorf("kube-scheduler tried %s while it was gated: %q", p.name, msgs)
		}
	}
	e.deleteJob(first)
	freed := time.Now()
	e.waitJobBound(second, 30*time.Second)
	took := lastBound(t, rec, second).Sub(freed)
	t.Logf("%s bound %v after %s was gone", second.name, took.Round(time.Millisecond), first.name)
	if took > 5*time.Second {
		t.Errorf("bound %v after its turn; want within 5s", took.Round(time.Millisecond))
	}
	checkWhole(t, rec, first, second)
}
