//go:build e2e

package e2e

import (
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

// registerTurnGateWebhook registers cps-extender's admission webhook with the API server,
// as docs/deploy.md does for a cluster: pod creations for cps-scheduler outside kube-system,
// over HTTPS trusting caPEM, failure policy Ignore.
func (e *env) registerTurnGateWebhook(caPEM []byte) {
	e.t.Helper()
	url := "https://" + e.extAddr + "/webhook/turn-gate"
	ignore, none, timeout := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone, int32(5)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "cps-extender-turn-gate"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "turn-gate.cps-extender.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
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

// TestTurnGateWebhook: with the extender's admission webhook registered, pods created with
// no gate get the turn gate; a job that waits is not tried by kube-scheduler, and runs at
// once when its turn comes. A pod of another scheduler is left alone.
func TestTurnGateWebhook(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	ca, caFile, certFile, keyFile := e.extenderCerts(1)
	e.startExtender(fmt.Sprintf("tls:\n  certFile: %s\n  keyFile: %s\n", certFile, keyFile))
	e.startScheduler(true, schedulerOverHTTPS(t, e, caFile))
	e.registerTurnGateWebhook(ca.PEM)
	rec := e.recordBindings("default")

	// The API server picks up a new webhook configuration within a second or so: wait until
	// a pod created for cps-scheduler comes back from the create with the gate.
	gatesAtCreate := func(p podSpec) []string {
		pod, err := e.cp.Client.CoreV1().Pods("default").Create(context.Background(), p.pod(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range pod.Spec.SchedulingGates {
			out = append(out, g.Name)
		}
		return out
	}
	framework.WaitFor(t, 30*time.Second, "the webhook gating new pods", func() (bool, error) {
		gates := gatesAtCreate(podSpec{name: "probe"})
		e.deletePods("default", "probe")
		return slices.Equal(gates, []string{turnGate}), fmt.Errorf("probe created with gates %q", gates)
	})
	if gates := gatesAtCreate(podSpec{name: "other", scheduler: "other-scheduler"}); len(gates) != 0 {
		t.Errorf("a pod of another scheduler was created with gates %q", gates)
	}
	e.deletePods("default", "other")

	e.gatedHandover(rec, jobSpec{name: "wh-first", workers: 2, cpu: "4"}, jobSpec{name: "wh-second", ps: 1, workers: 1, cpu: "4"})
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
