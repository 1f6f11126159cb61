package extender

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cps-extender/cps-extender/priority"
)

type nilQueue struct{}

func (nilQueue) Snapshot() *Snapshot { return nil }

// queueTestServer serves /debug/queue from a snapshot of: a running job, a job that has the
// turn, one that waits because it does not fit beside it, and one that fits no node at all.
func queueTestServer(t *testing.T, queue QueueSource) *Server {
	t.Helper()
	verbs, err := NewSchedulerVerbs(zap.NewNop(), &fakeDecider{}, &fakeBinder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerOptions{Log: zap.NewNop(), URLPrefix: "/scheduler", MaxRequestBytes: 1 << 20, Ready: readyFlag(true), Scheduler: verbs, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func queueJobs(t *testing.T) *fakeJobView {
	running := priority.Job{Key: "ns/run", MinMember: 1, Created: time.Unix(1_600_000_000, 0), Pods: []priority.Pod{
		gangPod("run-0", priority.RoleWorker, 0, priority.PodBound, "n1"),
	}}
	tooBig := priority.Job{Key: "ns/big", MinMember: 1, Created: time.Unix(1_600_000_000, 0), Pods: []priority.Pod{
		{UID: "uid-big-0", Name: "ns/big-0", Role: priority.RoleWorker, Request: priority.Resources{"cpu": 90000}},
	}}
	wait := priority.Job{Key: "ns/wait", MinMember: 2, Created: time.Unix(1_600_000_000, 0), Pods: []priority.Pod{
		{UID: "uid-wait-0", Name: "ns/wait-0", Role: priority.RoleWorker, Request: priority.Resources{"cpu": 7000}},
		{UID: "uid-wait-1", Name: "ns/wait-1", Role: priority.RoleWorker, Request: priority.Resources{"cpu": 7000}},
	}}
	nodes := bigNodes()
	for i := range nodes {
		nodes[i].Capacity = nodes[i].Free // nothing but jobs on them
	}
	return newFakeJobView(t, []priority.Job{running, tooBig, threePodJob(), wait}, nodes)
}

func get(srv http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestDebugQueueJSON(t *testing.T) {
	rec := get(queueTestServer(t, queueJobs(t)), "/debug/queue")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var report struct {
		Jobs []struct {
			Job       string         `json:"job"`
			Phase     string         `json:"phase"`
			Position  int            `json:"position"`
			P         float64        `json:"p"`
			Terms     map[string]any `json:"terms"`
			Bound     int            `json:"bound"`
			Held      int            `json:"held"`
			MinMember int            `json:"minMember"`
			Blocker   string         `json:"blocker"`
			Reason    string         `json:"reason"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &report); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, j := range report.Jobs {
		order = append(order, j.Job+" "+j.Phase)
		if len(j.Terms) != 4 || j.Reason == "" || j.MinMember == 0 {
			t.Errorf("%s: terms %v, reason %q, minMember %d: want the four terms, a reason and the gang minimum", j.Job, j.Terms, j.Reason, j.MinMember)
		}
		if j.Phase != "Running" && j.Phase != "Unschedulable" && (j.Position == 0 || j.P <= 0) {
			t.Errorf("%s: position %d, P %v: a queued job needs both", j.Job, j.Position, j.P)
		}
		if j.Phase == "Waiting" && (j.Blocker == "" || !strings.Contains(j.Reason, "waits for its turn: 2nd of 2")) {
			t.Errorf("%s: blocker %q, reason %q: want what it waits for", j.Job, j.Blocker, j.Reason)
		}
	}
	if got, want := strings.Join(order, ", "), "ns/a Admitted, ns/wait Waiting, ns/big Unschedulable, ns/run Running"; got != want {
		t.Errorf("jobs %s, want %s (queue order, then the unschedulable, then the running)", got, want)
	}
}

func TestDebugQueueTable(t *testing.T) {
	rec := get(queueTestServer(t, queueJobs(t)), "/debug/queue?format=table")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	lines := strings.Split(strings.TrimSpace(rec.Body.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("table has %d lines, want a summary, a header and 4 rows:\n%s", len(lines), rec.Body)
	}
	if !strings.HasSuffix(lines[0], ": 2 queued, 1 unschedulable, 1 running") {
		t.Errorf("summary %q", lines[0])
	}
	for i, want := range []string{
		"POS JOB PHASE P USER JOB-PRIO WAIT PARALLEL GANG WAITS FOR",
		"1 ns/a Admitted",
		"2 ns/wait Waiting",
		"- ns/big Unschedulable",
		"- ns/run Running",
	} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); !strings.HasPrefix(got, want) {
			t.Errorf("line %d = %q, want prefix %q", i+1, got, want)
		}
	}
	if !strings.Contains(lines[3], "0/2 bound") || !strings.Contains(lines[3], "needs cpu 7000m") {
		t.Errorf("waiting row %q: want its gang progress and what it waits for", lines[3])
	}
	if !strings.Contains(lines[4], "0/1 bound") || !strings.Contains(lines[4], "never fits: worker ns/big-0 needs cpu 90000m") {
		t.Errorf("unschedulable row %q: want its gang progress and why it never fits", lines[4])
	}
}

func TestDebugQueueErrors(t *testing.T) {
	if rec := get(queueTestServer(t, queueJobs(t)), "/debug/queue?format=xml"); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `unknown format \"xml\"`) {
		t.Errorf("bad format: %d %s", rec.Code, rec.Body)
	}
	if rec := get(queueTestServer(t, nilQueue{}), "/debug/queue"); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("before the first queue: %d %s, want 503", rec.Code, rec.Body)
	}
}
