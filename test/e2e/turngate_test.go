//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

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
		e.createJobs(first)
		e.waitJobBound(first, 30*time.Second)
		e.createJobs(second)
		e.gatedHandover(rec, second, first)
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

// TestTurnGateWebhook: the extender serves its admission webhook as shipped, on an HTTPS
// listener of its own with a certificate it keeps itself (a Secret, and the CA in the
// webhook configuration's caBundle), and switches the API server's calls by the queue.
// While no job waits the calls are off and pods are created as they are; once one waits
// they are switched on, pods get the turn gate, are not tried by kube-scheduler while their
// job waits, and run at once when its turn comes; offAfter later the calls are off again.
// A pod of another scheduler is not sent to it; a restarted extender (or a second replica)
// serves the same certificate, and writes nothing when the configuration is as it should be.
func TestTurnGateWebhook(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	hookAddr := freeAddr(t)
	framework.RegisterRepoTurnGateWebhook(t, e.cp.Client, hookAddr)
	webhookConfig := framework.TurnGateWebhookConfig(hookAddr) + "  offAfter: 2s\n"
	e.startExtender(webhookConfig)
	e.startScheduler(true)
	rec := e.recordBindings("default")

	// No job waits: switched off as soon as the extender has a queue, with a caBundle that
	// trusts the certificate it serves.
	framework.WaitTurnGateWebhook(t, e.cp.Client, hookAddr, false, 30*time.Second)
	e.waitWebhookNotCalled(podSpec{name: "probe"}) // the API server has picked the switch up
	ctx := context.Background()
	hooks := e.cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	filled, err := hooks.Get(ctx, "cps-extender-turn-gate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := e.cp.Client.CoreV1().Secrets("cps-system").Get(ctx, "cps-extender-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the extender's certificate Secret: %v", err)
	}
	if !bytes.Equal(secret.Data["ca.crt"], filled.Webhooks[0].ClientConfig.CABundle) {
		t.Error("caBundle is not the Secret's ca.crt")
	}
	if got, _ := framework.MetricSample(e.extenderBody("/metrics"), "cps_extender_turn_gate_webhook_on "); got != "0" {
		t.Errorf("cps_extender_turn_gate_webhook_on %q while switched off, want 0", got)
	}
	first, waiting := jobSpec{name: "wh-first", workers: 2, cpu: "4"}, jobSpec{name: "wh-waiting", workers: 1, cpu: "4"}
	calls := e.webhookCalls()
	e.createWithGates(nil, first.pods()...)
	e.waitJobBound(first, 30*time.Second)
	if got := e.webhookCalls(); got != calls {
		t.Errorf("the webhook was called %d times while switched off", got-calls)
	}

	// A job waits for room: switched on, and from now on pods are gated, and a gated job is
	// not tried.
	e.createWithGates(nil, waiting.pods()...)
	e.waitWaiting(waiting)
	framework.WaitTurnGateWebhook(t, e.cp.Client, hookAddr, true, 30*time.Second)
	e.waitWebhookCalled(podSpec{name: "probe"})
	if got, _ := framework.MetricSample(e.extenderBody("/metrics"), "cps_extender_turn_gate_webhook_on "); got != "1" {
		t.Errorf("cps_extender_turn_gate_webhook_on %q while switched on, want 1", got)
	}
	calls = e.webhookCalls()
	e.createWithGates(nil, podSpec{name: "other", scheduler: "other-scheduler"})
	e.deletePods("default", "other")
	if got := e.webhookCalls(); got != calls {
		t.Errorf("the webhook was called %d times for a pod of another scheduler", got-calls)
	}
	second := jobSpec{name: "wh-second", ps: 1, workers: 1, cpu: "4"}
	e.createWithGates([]string{turnGate}, second.pods()...)
	e.gatedHandover(rec, second, waiting, first) // waiting first, or it would take the room first leaves

	// Nothing waits any more: switched off again after offAfter.
	framework.WaitTurnGateWebhook(t, e.cp.Client, hookAddr, false, 30*time.Second)

	// A restart finds the Secret and the switch as they should be, serves the certificate
	// the caBundle trusts, and writes nothing.
	before, err := hooks.Get(ctx, "cps-extender-turn-gate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ext.Stop(); err != nil {
		t.Fatal(err)
	}
	e.startExtender(webhookConfig)
	framework.WaitTurnGateWebhook(t, e.cp.Client, hookAddr, false, 30*time.Second)
	time.Sleep(2 * time.Second) // a few looks at the queue
	again, err := hooks.Get(ctx, "cps-extender-turn-gate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != before.ResourceVersion {
		t.Errorf("the restarted extender changed the webhook configuration (resourceVersion %s -> %s)", before.ResourceVersion, again.ResourceVersion)
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

// createWithGates creates pods, each of which must come back from its create with gates.
func (e *env) createWithGates(gates []string, pods ...podSpec) {
	e.t.Helper()
	for _, p := range pods {
		if got := e.gatesAtCreate(p); !slices.Equal(got, gates) {
			e.t.Errorf("%s created with gates %q, want %q", p.name, got, gates)
		}
	}
}

// webhookCalls is how many turn-gate webhook calls the extender answered.
func (e *env) webhookCalls() int {
	e.t.Helper()
	n, err := framework.WebhookCalls(e.extenderBody("/metrics"))
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// metricsText reads the extender's /metrics (over HTTPS when extTLS is set).
func (e *env) metricsText() (string, error) {
	resp, err := e.extenderGet("/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(body), err
}

// waitWebhookCalled waits until the API server calls the turn-gate webhook, probing with p
// (in default, selecting no node).
func (e *env) waitWebhookCalled(p podSpec) {
	e.t.Helper()
	p.selector = map[string]string{"cps-e2e/probe": "no-such-node"}
	framework.WaitWebhookCalled(e.t, e.cp.Client, p.pod(), e.metricsText, 30*time.Second)
}

// waitWebhookNotCalled waits until the API server no longer calls the turn-gate webhook,
// probing as waitWebhookCalled does.
func (e *env) waitWebhookNotCalled(p podSpec) {
	e.t.Helper()
	p.selector = map[string]string{"cps-e2e/probe": "no-such-node"}
	framework.WaitWebhookNotCalled(e.t, e.cp.Client, p.pod(), e.metricsText, 30*time.Second)
}

// gatedHandover checks second, created behind jobs that hold the room it needs: its pods
// must wait with the turn gate alone (from their spec or the webhook), never tried by
// kube-scheduler, with the extender's WaitingForTurn Event saying why; once the jobs in gone
// are deleted (in order: the last frees the room), second is bound whole within 5 s.
func (e *env) gatedHandover(rec *bindRecorder, second jobSpec, gone ...jobSpec) {
	t := e.t
	t.Helper()
	e.waitWaiting(second)
	e.waitJobEvent(second, "WaitingForTurn", "waits for its turn")
	time.Sleep(3 * time.Second) // recomputes come and go; the gate stays
	for _, p := range second.pods() {
		if got := e.gatesOf(p.name); !slices.Equal(got, []string{turnGate}) {
			t.Errorf("%s waits for its turn with gates %q, want %q", p.name, got, turnGate)
		}
		if msgs := e.failedSchedulingMessages("default", p.name); len(msgs) != 0 {
			t.Errorf("kube-scheduler tried %s while it was gated: %q", p.name, msgs)
		}
	}
	for _, j := range gone {
		e.deleteJob(j)
	}
	freed := time.Now()
	e.waitJobBound(second, 30*time.Second)
	last := gone[len(gone)-1]
	took := lastBound(t, rec, second).Sub(freed)
	t.Logf("%s bound %v after %s was gone", second.name, took.Round(time.Millisecond), last.name)
	if took > 5*time.Second {
		t.Errorf("bound %v after its turn; want within 5s", took.Round(time.Millisecond))
	}
	checkWhole(t, rec, last, second)
}
