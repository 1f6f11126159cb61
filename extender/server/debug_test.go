package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/cps-extender/cps-extender/priority"
)

// fixedQueue serves one queue computed by the real model.
type fixedQueue struct {
	q  *priority.Queue
	at time.Time
}

func (f fixedQueue) Queue() (*priority.Queue, time.Time) { return f.q, f.at }

// queueTestServer serves /debug/queue from queue.
func queueTestServer(t *testing.T, queue QueueSource) *Server {
	t.Helper()
	srv, err := New(Options{Access: OpenAccess, Log: zap.NewNop(), MaxRequestBytes: 1 << 20, Ready: readyFlag(true), Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

type readyFlag bool

func (r readyFlag) Ready() bool { return bool(r) }

func pod(name string, role priority.Role, index int, state priority.PodState, node string, cpu int64) priority.Pod {
	return priority.Pod{UID: "uid-" + name, Name: "ns/" + name, Role: role, Index: index,
		Request: priority.Resources{"cpu": cpu}, State: state, Node: node}
}

// queueJobs is the queue of: a running job, a job that has the turn, one that waits
// because it does not fit beside it, and one that fits no node at all.
func queueJobs(t *testing.T) fixedQueue {
	t.Helper()
	created := time.Unix(1_600_000_000, 0)
	running := priority.Job{Key: "ns/run", MinMember: 1, Created: created, Pods: []priority.Pod{
		pod("run-0", priority.RoleWorker, 0, priority.PodBound, "n1", 1000),
	}}
	tooBig := priority.Job{Key: "ns/big", MinMember: 1, Created: created, Pods: []priority.Pod{
		pod("big-0", priority.RoleWorker, 0, priority.PodPending, "", 90000),
	}}
	turn := priority.Job{Key: "ns/a", MinMember: 3, Created: created, Urgent: true, UrgentFrom: "PriorityClass ml-urgent (gang.urgentPriorityClasses)", Pods: []priority.Pod{
		pod("a-w-1", priority.RoleWorker, 1, priority.PodPending, "", 1000),
		pod("a-ps-0", priority.RolePS, 0, priority.PodPending, "", 1000),
		pod("a-w-0", priority.RoleWorker, 0, priority.PodPending, "", 1000),
	}}
	wait := priority.Job{Key: "ns/wait", MinMember: 2, Created: created, Pods: []priority.Pod{
		pod("wait-0", priority.RoleWorker, 0, priority.PodPending, "", 7000),
		pod("wait-1", priority.RoleWorker, 1, priority.PodPending, "", 7000),
	}}
	var nodes []priority.Node
	for _, name := range []string{"n1", "n2"} {
		free := priority.Resources{"cpu": 8000}
		nodes = append(nodes, priority.Node{Name: name, Free: free, Capacity: free}) // nothing but jobs on them
	}
	now := time.Unix(1_700_000_000, 0)
	q := priority.DefaultModel().Admit(priority.State{Jobs: []priority.Job{running, tooBig, turn, wait}, Nodes: nodes}, now)
	return fixedQueue{q: q, at: now}
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
	if len(lines) != 7 {
		t.Fatalf("table has %d lines, want a summary, a header, 4 rows and where the urgent job's urgency comes from:\n%s", len(lines), rec.Body)
	}
	if want := "urgent: ns/a by PriorityClass ml-urgent (gang.urgentPriorityClasses)"; lines[6] != want {
		t.Errorf("last line %q, want %q", lines[6], want)
	}
	if !strings.HasSuffix(lines[0], ": 2 queued, 1 unschedulable, 1 running") {
		t.Errorf("summary %q", lines[0])
	}
	for i, want := range []string{
		"POS JOB PHASE P USER JOB-PRIO WAIT PARALLEL GANG PLACEMENT WAITS FOR",
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
	// The admitted job's plan: the one node that holds its PS and both workers.
	if !strings.Contains(lines[2], "0/3 bound  one node in n1; 2/2 workers near a PS") {
		t.Errorf("admitted row %q: want where its plan puts it", lines[2])
	}
	if !strings.Contains(lines[4], "0/1 bound") || !strings.Contains(lines[4], "never fits: worker ns/big-0 needs cpu 90000m") {
		t.Errorf("unschedulable row %q: want its gang progress and why it never fits", lines[4])
	}
}

func TestDebugQueueErrors(t *testing.T) {
	if rec := get(queueTestServer(t, queueJobs(t)), "/debug/queue?format=xml"); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `unknown format \"xml\"`) {
		t.Errorf("bad format: %d %s", rec.Code, rec.Body)
	}
	if rec := get(queueTestServer(t, fixedQueue{}), "/debug/queue"); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("before the first queue: %d %s, want 503", rec.Code, rec.Body)
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	_, err := New(Options{})
	if err == nil || !strings.Contains(err.Error(), "Log, Ready, MaxRequestBytes") {
		t.Errorf("err = %v, want all missing dependencies named", err)
	}
}

// TestDebugQueueTopology: /debug/queue, and so explain, say which configured topology
// levels the nodes carry: a level on no node is left out of the placement.
func TestDebugQueueTopology(t *testing.T) {
	nodes := []priority.Node{
		{Name: "n1", Free: priority.Resources{"cpu": 8000}, Labels: map[string]string{"example.com/rack": "r1"}},
		{Name: "n2", Free: priority.Resources{"cpu": 8000}, Labels: map[string]string{"example.com/rack": "r2"}},
		{Name: "n3", Free: priority.Resources{"cpu": 8000}, Labels: map[string]string{}},
	}
	topology := priority.NewNodeIndex(nodes, []string{"example.com/rack", "topology.kubernetes.io/zone"}, nil)
	now := time.Unix(1_700_000_000, 0)
	q := priority.DefaultModel().Admit(priority.State{Nodes: nodes, Topology: topology}, now)
	srv := queueTestServer(t, fixedQueue{q: q, at: now})

	var report struct {
		Topology []priority.TopologyLevel `json:"topology"`
	}
	if err := json.Unmarshal(get(srv, "/debug/queue").Body.Bytes(), &report); err != nil {
		t.Fatal(err)
	}
	want := []priority.TopologyLevel{{Key: "example.com/rack", Nodes: 2, Domains: 2}, {Key: "topology.kubernetes.io/zone"}}
	if diff := cmp.Diff(want, report.Topology); diff != "" {
		t.Errorf("topology (-want +got):\n%s", diff)
	}
	lines := strings.Split(get(srv, "/debug/queue?format=table").Body.String(), "\n")
	if len(lines) < 2 || lines[1] != "topology: example.com/rack on 2 nodes in 2 domains; topology.kubernetes.io/zone on no node (left out of the placement)" {
		t.Errorf("table's second line %q, want the levels the nodes carry", lines[1])
	}
}
