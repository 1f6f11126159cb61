//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// observeModel ranks by user tier only, so that P and every waiting sentence stay the same
// while the test watches them (no waiting-time term), under reserve: the sentences name the
// head's reservation.
const observeModel = `model:
  weights: {user: 1, job: 0, wait: 0, parallelism: 0}
  policy: reserve
  userTiers: {alice: gold}
events:
  waitingInterval: 1m
reload:
  interval: 1s
`

// TestExplainEventsMetricsAndReload runs two waiting jobs behind a running one and checks,
// on the real control plane: /debug/queue names each waiting job's position and sentence;
// the pod's FailedScheduling events quote the filter's sentence (what it waits for, no
// position or P); each waiting job gets one WaitingForTurn Event with the whole reason
// however often the scheduler retries its pods; /metrics shows the queue and the filter decisions; `cps-extender
// explain` prints the table; an invalid config file is rejected and a valid weight change
// reorders the queue.
func TestExplainEventsMetricsAndReload(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 1, "8", "16Gi")...)
	e.startExtender(observeModel)
	e.startScheduler(true)

	hog := jobSpec{name: "hog", ps: 1, workers: 3}
	e.createJobs(hog)
	e.waitJobBound(hog, 60*time.Second)
	// hog leaves 4 of 8 CPU: each pod below fits on its own, so the scheduler's plugins
	// pass the node and the extender decides, but neither gang fits whole. x (gold user,
	// gang 2) ranks above y (bronze, gang 4) by user tier; by parallelism y would rank first.
	x := jobSpec{name: "x", ps: 1, workers: 1, cpu: "3", user: "alice"}
	y := jobSpec{name: "y", ps: 1, workers: 3, cpu: "2", user: "bob"}
	e.createJobs(x, y)
	e.waitWaiting(x, y)

	q, err := e.queue()
	if err != nil {
		t.Fatal(err)
	}
	if q["default/x"].Position != 1 || q["default/y"].Position != 2 {
		t.Fatalf("positions x %d, y %d: want 1 and 2", q["default/x"].Position, q["default/y"].Position)
	}
	yReason := q["default/y"].Reason
	if !strings.HasPrefix(yReason, "job default/y waits for its turn: 2nd of 2, behind default/x (P=1.00); ") || q["default/y"].Blocker == "" {
		t.Fatalf("y: reason %q, blocker %q: want its position, who it waits behind and what it waits for", yReason, q["default/y"].Blocker)
	}

	t.Run("events", func(t *testing.T) {
		defer e.use(t)()
		// Node updates requeue pods the extender rejected: each is a filter retry.
		before := e.filterRequests("default/y-ps-0")
		stop := e.churnNode("node-0", 300*time.Millisecond)
		framework.WaitFor(t, 60*time.Second, "many filter retries of y-ps-0", func() (bool, error) {
			n := e.filterRequests("default/y-ps-0") - before
			return n >= 8, fmt.Errorf("%d filter requests since the churn began", n)
		})
		stop()
		retries := e.filterRequests("default/y-ps-0")
		// One WaitingForTurn Event for job y, on whichever of its pods the extender was
		// told of first, however often the scheduler retried them.
		var evs []corev1.Event
		yPods := func() []corev1.Event {
			var all []corev1.Event
			for _, p := range y.pods() {
				all = append(all, e.waitingEvents(p.name)...)
			}
			return all
		}
		framework.WaitFor(t, 30*time.Second, "WaitingForTurn event of job y", func() (bool, error) {
			evs = yPods()
			return len(evs) > 0, fmt.Errorf("none yet")
		})
		// The recorder is asynchronous: give a wrongly sent second event time to arrive.
		time.Sleep(2 * time.Second)
		evs = yPods()
		total := 0
		for _, ev := range evs {
			total += eventCount(ev)
		}
		t.Logf("y-ps-0: %d filter requests; job y: %d WaitingForTurn event(s) with count %d", retries, len(evs), total)
		if len(evs) != 1 || total != 1 {
			t.Fatalf("job y got %d WaitingForTurn events with count %d after %d filter requests of y-ps-0; want one (one per job per minute)", len(evs), total, retries)
		}
		ev := evs[0]
		pod, err := e.cp.Client.CoreV1().Pods("default").Get(context.Background(), ev.InvolvedObject.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// kube-scheduler's FailedScheduling events quote the filter's sentence, which names
		// what y waits for and nothing that moves while it waits.
		yWait := q["default/y"].Wait
		answered := false
		for _, msg := range e.failedSchedulingMessages("default", "y-ps-0") {
			answered = answered || strings.Contains(msg, yWait)
		}
		if !answered || yWait != "job default/y waits for its turn: it does not fit beside the reservation of default/x: its 4 pods need cpu 8000m in all" {
			t.Errorf("y's filter sentence %q, FailedScheduling %q: want the sentence without position or P, quoted by kube-scheduler",
				yWait, e.failedSchedulingMessages("default", "y-ps-0"))
		}
		// The Event carries the whole reason of when it was sent: y's place in the queue.
		if !strings.HasPrefix(ev.Message, "job default/y waits for its turn: 2nd of 2, behind default/x") ||
			ev.Type != corev1.EventTypeNormal || ev.Source.Component != "cps-extender" ||
			ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.UID != types.UID(pod.UID) {
			t.Errorf("event %q (%s from %q on %s %s): want a sentence the filter answered for y's pods (now %q), Normal, from cps-extender, on the pod",
				ev.Message, ev.Type, ev.Source.Component, ev.InvolvedObject.Kind, ev.InvolvedObject.UID, yReason)
		}
		// x's one event carries x's sentence from when it was first filtered: 1st of 1 or 2,
		// depending on whether y's pods were in the view yet.
		var xEvents []corev1.Event
		for _, p := range x.pods() {
			xEvents = append(xEvents, e.waitingEvents(p.name)...)
		}
		if len(xEvents) != 1 || !strings.HasPrefix(xEvents[0].Message, "job default/x waits for its turn: 1st of ") {
			t.Errorf("job x's events %v: want its own one", xEvents)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		defer e.use(t)()
		body := e.extenderBody("/metrics")
		for _, want := range []string{
			`cps_extender_queue_jobs{state="waiting"} 2`,
			`cps_extender_queue_jobs{state="running"} 1`,
			`cps_extender_queue_length 2`,
			`cps_extender_held_binds 0`,
			`cps_extender_informer_synced{informer="pods"} 1`,
			`cps_extender_informer_synced{informer="nodes"} 1`,
		} {
			if !hasLine(body, want) {
				t.Errorf("/metrics has no line %q", want)
			}
		}
		for _, prefix := range []string{
			`cps_extender_requests_total{code="200",verb="filter"} `,
			`cps_extender_request_duration_seconds_bucket{verb="filter",le="0.0001"} `,
			`cps_extender_gate_decisions_total{outcome="waiting",verb="filter"} `,
			`cps_extender_gate_decisions_total{outcome="gathered",verb="bind"} `,
			`cps_extender_waiting_events_total{result="sent"} `,
			`cps_extender_waiting_events_total{result="suppressed"} `,
			`go_goroutines `,
			`process_resident_memory_bytes `,
		} {
			if !strings.Contains(body, "\n"+prefix) {
				t.Errorf("/metrics has no sample %q...", prefix)
			}
		}
	})

	t.Run("explain subcommand", func(t *testing.T) {
		defer e.use(t)()
		out, err := exec.Command(extenderBinary(t), "explain", "--url", "http://"+e.extAddr).CombinedOutput()
		if err != nil {
			t.Fatalf("cps-extender explain: %v\n%s", err, out)
		}
		t.Logf("cps-extender explain:\n%s", out)
		rows := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 2 {
				rows[f[1]] = strings.Join(f, " ")
			}
		}
		for job, want := range map[string]string{"default/x": "1 default/x Waiting 1.00", "default/y": "2 default/y Waiting 0.30", "default/hog": "- default/hog Running"} {
			if !strings.HasPrefix(rows[job], want) {
				t.Errorf("row of %s = %q, want prefix %q", job, rows[job], want)
			}
		}
	})

	t.Run("config reload", func(t *testing.T) {
		defer e.use(t)()
		e.writeExtenderConfig(strings.Replace(observeModel, "user: 1, job: 0", "user: 1, job: 1", 1))
		framework.WaitFor(t, 30*time.Second, "the invalid config rejected", func() (bool, error) {
			return e.extenderLogHas(`"msg":"config reload rejected`), fmt.Errorf("no rejection logged yet")
		})
		if q, err := e.queue(); err != nil || q["default/x"].Position != 1 || q["default/x"].P != 1 {
			t.Fatalf("after the invalid file: x %+v (%v), want the old model (1st, P=1)", q["default/x"], err)
		}
		e.writeExtenderConfig(strings.Replace(observeModel, "user: 1, job: 0, wait: 0, parallelism: 0", "user: 0, job: 0, wait: 0, parallelism: 1", 1))
		framework.WaitFor(t, 30*time.Second, "y first after the weight change", func() (bool, error) {
			q, err := e.queue()
			if err != nil {
				return false, err
			}
			return q["default/y"].Position == 1 && q["default/x"].Position == 2, fmt.Errorf("x %+v, y %+v", q["default/x"], q["default/y"])
		})
		q, _ := e.queue()
		if q["default/y"].P <= q["default/x"].P || q["default/x"].P == 1 {
			t.Errorf("P after the reload: x %.2f, y %.2f: want the parallelism term (y's gang is larger)", q["default/x"].P, q["default/y"].P)
		}
		if !e.extenderLogHas(`"msg":"config reloaded"`) {
			t.Error("no 'config reloaded' log line")
		}
	})
}

// filterRequests counts the extender's filter requests for a pod (its debug access log).
func (e *env) filterRequests(pod string) int {
	e.t.Helper()
	data, err := os.ReadFile(e.ext.LogPath())
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"msg":"request"`) && strings.Contains(line, `"verb":"filter"`) && strings.Contains(line, `"pod":"`+pod+`"`) {
			n++
		}
	}
	return n
}

func (e *env) extenderLogHas(substr string) bool {
	e.t.Helper()
	data, err := os.ReadFile(e.ext.LogPath())
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Contains(string(data), substr)
}

// churnNode changes a label of the node every period until the returned stop is called.
func (e *env) churnNode(name string, period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"e2e-churn":"%d"}}}`, i)
			_, _ = e.cp.Client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()
	e.t.Cleanup(cancel)
	return func() { cancel(); <-done }
}

// waitingEvents lists the WaitingForTurn events of a pod in namespace default.
func (e *env) waitingEvents(pod string) []corev1.Event {
	e.t.Helper()
	list, err := e.cp.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", pod), fields.OneTermEqualSelector("reason", "WaitingForTurn")).String(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// eventCount is how many occurrences an Event stands for.
func eventCount(ev corev1.Event) int {
	if ev.Series != nil {
		return int(ev.Series.Count)
	}
	if ev.Count == 0 {
		return 1
	}
	return int(ev.Count)
}

// extenderBody GETs path from the extender and returns the body of a 200 answer.
func (e *env) extenderBody(path string) string {
	e.t.Helper()
	resp, err := e.extenderGet(path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		e.t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, body)
	}
	return string(body)
}

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}
