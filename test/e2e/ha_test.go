//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// fastLease is a leader election that hands over in seconds, for the tests.
const fastLease = "leaderElection: {leaseDuration: 6s, renewDeadline: 4s, retryPeriod: 1s}\n"

// replica is one more cps-extender process of the env's control plane, with its own
// listeners and the env's config otherwise.
type replica struct {
	p    *framework.Process
	addr string
}

// startReplica runs another cps-extender with extraConfig (the base config's listen
// replaced by a port of its own) and waits until it is ready.
func (e *env) startReplica(name, extraConfig string) replica {
	e.t.Helper()
	addr := freeAddr(e.t)
	cfg := fmt.Sprintf("listen: %s\nurlPrefix: /scheduler\nkubeconfig: %s\nlog:\n  format: json\n  level: debug\n%s", addr, e.extKube, extraConfig)
	path := filepath.Join(e.cp.Dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	p := e.cp.StartProcess(e.t, name, extenderBinary(e.t), []string{"--config=" + path}, nil)
	framework.WaitExtenderReady(e.t, p, 60*time.Second, framework.HTTPGet("http://"+addr+"/readyz"))
	return replica{p: p, addr: addr}
}

// metrics reads a replica's /metrics.
func (r replica) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// sample is the value of a metric's sample in a /metrics body ("" when absent).
func sample(body, name string) string {
	v, _ := framework.MetricSample(body, name+" ")
	return v
}

// waitLeader waits until exactly one of the replicas reports cps_extender_leader 1 and
// returns its index.
func waitLeader(t *testing.T, replicas ...replica) int {
	t.Helper()
	leader := -1
	framework.WaitFor(t, 60*time.Second, "one leader", func() (bool, error) {
		leader = -1
		var seen []string
		for i, r := range replicas {
			if r.p.Exited() {
				seen = append(seen, "gone")
				continue
			}
			v := sample(r.metrics(t), "cps_extender_leader")
			seen = append(seen, v)
			if v == "1" {
				if leader >= 0 {
					return false, fmt.Errorf("two leaders: %v", seen)
				}
				leader = i
			}
		}
		return leader >= 0, fmt.Errorf("cps_extender_leader by replica: %v", seen)
	})
	return leader
}

// TestTwoReplicasOneWriter: two extenders on one cluster, preemption on, the scheduler
// calling one of them; a cluster full of bronze gangs, an urgent gang. One replica leads:
// it alone evicts, each victim pod once, and the gang is bound whole; the follower evicts
// nothing, lifts and nudges nothing, and says it follows.
func TestTwoReplicasOneWriter(t *testing.T) {
	e := newEnv(t, rackedNodes(8, 2)...)
	cfg := preemptionConfig("urgent", "1s") + fastLease
	e.startExtender(cfg)
	other := e.startReplica("cps-extender-b", cfg)
	e.startScheduler(true)
	replicas := []replica{{p: e.ext, addr: e.extAddr}, other}
	leader := waitLeader(t, replicas...)
	follower := replicas[1-leader]

	bronze := bronzeGangs(4)
	e.createJobs(bronze...)
	for _, j := range bronze {
		e.waitJobBound(j, 60*time.Second)
	}
	time.Sleep(1500 * time.Millisecond) // past their minimum run time
	urgent := jobSpec{name: "urgent", user: "alice", urgent: true, workers: 4, cpu: "4"}
	watch := e.watchPartial(append(bronze, urgent))
	e.createJobs(urgent)
	e.waitJobBound(urgent, 60*time.Second)
	if p := watch.Stop(); len(p) > 0 {
		t.Errorf("jobs seen partly bound: %v", p)
	}
	// Each evicted pod has one Preempted Event, from one replica, counted once.
	framework.WaitFor(t, 30*time.Second, "one victim gang gone", func() (bool, error) {
		gone := 0
		for _, j := range bronze {
			if e.countBound(j) == 0 {
				gone++
			}
		}
		return gone == 1, fmt.Errorf("%d gangs gone", gone)
	})
	events, err := e.cp.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perPod := map[string]int{}
	for _, ev := range events.Items {
		if ev.Reason == "Preempted" {
			perPod[ev.InvolvedObject.Name] += eventCount(ev)
		}
	}
	if len(perPod) != 4 {
		t.Errorf("Preempted Events on %d pods, want the 4 of one victim gang: %v", len(perPod), perPod)
	}
	for pod, n := range perPod {
		if n != 1 {
			t.Errorf("pod %s was preempted %d times", pod, n)
		}
	}
	lm, fm := replicas[leader].metrics(t), follower.metrics(t)
	if got := sample(lm, `cps_extender_evicted_pods_total{reason="preempted"}`); got != "4" {
		t.Errorf("the leader evicted %q pods, want 4", got)
	}
	for _, s := range []string{`cps_extender_evicted_pods_total{reason="preempted"}`, `cps_extender_turn_nudges_total{result="sent"}`,
		`cps_extender_turn_gate_lifts_total{result="sent"}`, `cps_extender_preemptions_total{result="evicted"}`} {
		if got := sample(fm, s); got != "" && got != "0" {
			t.Errorf("the follower's %s = %s, want 0", s, got)
		}
	}
	if got := sample(fm, "cps_extender_leader"); got != "0" {
		t.Errorf("the follower's cps_extender_leader = %q", got)
	}
	log, err := os.ReadFile(follower.p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "the leader is another replica") {
		t.Errorf("the follower's log does not say it follows")
	}
}

// TestLeaderKilled: a job waits, gated, behind a running one, with two replicas; the leader
// is killed (SIGKILL: no release of its Lease) and the room is freed. The other replica
// takes over within the Lease's duration, lifts the gates, and the job is bound whole within
// the Lease's duration and 10 s of the kill.
func TestLeaderKilled(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "8", "16Gi")...)
	hookA, hookB := freeAddr(t), freeAddr(t)
	// The webhook and the scheduler call B, which survives; A leads, since it starts first.
	framework.RegisterRepoTurnGateWebhook(t, e.cp.Client, hookB)
	e.startExtender(fastLease + framework.TurnGateWebhookConfig(hookA))
	aAddr := e.extAddr
	waitLeader(t, replica{p: e.ext, addr: aAddr})
	b := e.startReplica("cps-extender-b", fastLease+framework.TurnGateWebhookConfig(hookB))
	e.extAddr = b.addr // the scheduler's extender
	e.startScheduler(true)
	if waitLeader(t, replica{p: e.ext, addr: aAddr}, b) != 0 {
		t.Fatal("the first replica does not lead")
	}

	running := jobSpec{name: "running", workers: 4, cpu: "4"}
	e.createJobs(running)
	e.waitJobBound(running, 60*time.Second)
	// A job waits whole: the leader switches the webhook's calls on, and the pods made from
	// then on are gated at creation.
	first := jobSpec{name: "first", workers: 1, cpu: "4"}
	e.createJobs(first)
	e.waitWaiting(first)
	framework.WaitTurnGateWebhook(t, e.cp.Client, hookB, true, 30*time.Second)
	waiting := jobSpec{name: "waiting", workers: 3, cpu: "4"}
	var want []podSpec
	for _, p := range waiting.pods() {
		want = append(want, p)
	}
	e.createWithGates([]string{turnGate}, want...)
	e.waitWaiting(waiting)

	rec := e.recordBindings("default")
	e.ext.Kill()
	killed := time.Now()
	e.deleteJob(running)
	framework.WaitFor(t, 60*time.Second, "the waiting job bound whole", func() (bool, error) {
		b := e.bound("default")
		n := 0
		for _, p := range want {
			if b[p.name] != "" {
				n++
			}
		}
		return n == len(want), fmt.Errorf("%d of %d bound", n, len(want))
	})
	var last time.Time
	for _, p := range want {
		at, ok := rec.BoundAt(p.name)
		if ok && at.After(last) {
			last = at
		}
	}
	if took := last.Sub(killed); took > 16*time.Second {
		t.Errorf("the waiting job was bound %v after the leader was killed, want within the Lease's 6 s and 10 s", took.Round(time.Millisecond))
	} else {
		t.Logf("the waiting job was bound whole %v after the leader was killed", took.Round(time.Millisecond))
	}
	if got := sample(b.metrics(t), "cps_extender_leader"); got != "1" {
		t.Errorf("the replica left does not lead: cps_extender_leader %q", got)
	}
}

// TestUngateAndUninstall: with the extender gone for good, `cps-extender ungate` lifts its
// gate from the waiting pods and leaves another system's gate; after an uninstall as
// docs/deploy.md has it (the webhook configuration first, then the extender), no pod is
// left with the turn gate.
func TestUngateAndUninstall(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 1, "8", "16Gi")...)
	hook := freeAddr(t)
	framework.RegisterRepoTurnGateWebhook(t, e.cp.Client, hook)
	e.startExtender(fastLease + framework.TurnGateWebhookConfig(hook) + "  offAfter: 0s\n") // calls always on
	e.startScheduler(true)
	framework.WaitTurnGateWebhook(t, e.cp.Client, hook, true, 30*time.Second)
	running := jobSpec{name: "running", workers: 2, cpu: "4"}
	e.createJobs(running)
	e.waitJobBound(running, 60*time.Second)
	// A job waits: from now on the webhook gates the pods it is called for.
	queued := jobSpec{name: "queued", workers: 1, cpu: "4"}
	e.createJobs(queued)
	e.waitWaiting(queued)

	t.Run("ungate", func(t *testing.T) {
		defer e.use(t)()
		waiting := jobSpec{name: "waiting", workers: 2, cpu: "4", gates: []string{"example.com/hold"}}
		e.createJobs(waiting)
		held := podSpec{name: "held", cpu: "1", labels: map[string]string{"cps-extender.io/job": "held"}}
		e.createWithGates([]string{turnGate}, held)
		for _, p := range waiting.pods() {
			if got := e.gatesOf(p.name); !slices.Contains(got, turnGate) {
				t.Fatalf("%s gates %v: the test needs it gated", p.name, got)
			}
		}
		e.ext.Kill() // gone for good
		out, err := exec.Command(extenderBinary(t), "ungate", "--kubeconfig="+e.cp.Kubeconfig, "--namespace=default").CombinedOutput()
		if err != nil {
			t.Fatalf("cps-extender ungate: %v\n%s", err, out)
		}
		t.Logf("cps-extender ungate: %s", strings.TrimSpace(string(out)))
		for _, p := range waiting.pods() {
			if got := e.gatesOf(p.name); !slices.Equal(got, []string{"example.com/hold"}) {
				t.Errorf("%s gates %v after ungate, want the other system's gate alone", p.name, got)
			}
		}
		if got := e.gatesOf("held"); len(got) != 0 {
			t.Errorf("held gates %v after ungate", got)
		}
		e.deleteJob(waiting)
		e.deletePods("default", "held")
	})

	t.Run("uninstall", func(t *testing.T) {
		defer e.use(t)()
		e.startExtender(fastLease + framework.TurnGateWebhookConfig(hook) + "  offAfter: 0s\n")
		// The killed extender's Lease runs out first (6 s): then this one leads.
		waitLeader(t, replica{p: e.ext, addr: e.extAddr})
		framework.WaitTurnGateWebhook(t, e.cp.Client, hook, true, 30*time.Second)
		waiting := jobSpec{name: "waiting-2", workers: 2, cpu: "4"}
		e.createJobs(waiting)
		e.waitWaiting(waiting)
		for _, p := range waiting.pods() {
			if got := e.gatesOf(p.name); !slices.Equal(got, []string{turnGate}) {
				t.Fatalf("%s gates %v: the test needs it gated", p.name, got)
			}
		}
		// docs/deploy.md: the webhook configuration first, then the rest.
		if err := e.cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), "cps-extender-turn-gate", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.ext.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := e.ext.Wait(30 * time.Second); err != nil {
			t.Logf("the extender's exit: %v", err)
		}
		pods, err := e.cp.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, g := range p.Spec.SchedulingGates {
				if g.Name == turnGate {
					t.Errorf("pod %s kept the turn gate after the uninstall", p.Name)
				}
			}
		}
		// Nothing is stranded: a scheduler without the extender (its profile is uninstalled
		// with it) places them.
		e.stopScheduler()
		e.startScheduler(false)
		e.deleteJob(running)
		e.deleteJob(queued)
		e.waitJobBound(waiting, 60*time.Second)
	})
}

// TestReadyzWhenTheAPIServerStops: with the API server stopped for 20 s the extender's view
// goes stale: /readyz answers 503 (and says why) within watchFailingAfter and a few
// seconds, and 200 again soon after the API server is back.
func TestReadyzWhenTheAPIServerStops(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 1, "8", "16Gi")...)
	e.startExtender("")
	readyz := func() (int, string) {
		resp, err := e.extenderGet("/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, strings.TrimSpace(b.String())
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz %d %s before the outage", code, body)
	}
	e.cp.StopAPIServer(t)
	stopped := time.Now()
	framework.WaitFor(t, 25*time.Second, "/readyz 503", func() (bool, error) {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "list and watch have failed"), fmt.Errorf("%d %s", code, body)
	})
	t.Logf("/readyz 503 %v after the API server stopped", time.Since(stopped).Round(100*time.Millisecond))
	time.Sleep(time.Until(stopped.Add(20 * time.Second)))
	e.cp.StartAPIServerAgain(t)
	back := time.Now()
	framework.WaitFor(t, 30*time.Second, "/readyz 200", func() (bool, error) {
		code, body := readyz()
		return code == http.StatusOK, fmt.Errorf("%d %s", code, body)
	})
	t.Logf("/readyz 200 %v after the API server was back", time.Since(back).Round(100*time.Millisecond))
}
