package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/internal/fixture"

	"github.com/cps-extender/cps-extender/extender/turns"
	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/server"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/extender/wire"
	"github.com/cps-extender/cps-extender/priority"
)

// fakeDecider knows a fixed set of nodes, makes pods named in waiting (queued) or unseen
// (not in the view yet) wait with their reason, rejects the node pairs in conflicts, and
// scores nodes from scores.
type fakeDecider struct {
	nodes     map[string]bool
	waiting   map[string]string // pod name -> reason
	unseen    map[string]string // pod name -> reason
	next      map[string]string // pod name -> reason, of job ns/a, which has the turn by now
	gathering map[string]string // pod name -> reason, of job default/g, whose gang is being created
	conflicts map[string]string // "pod/node" -> reason
	scores    map[string]int64  // node -> score
	planned   map[string]string // pod name -> the node its job's plan puts it on
	refuse    map[string]string // "pod/node" -> why BindCheck refuses the bind
	claimed   map[string]bool   // "pod/node" -> the pod fits there only in room a queued gang counts on
	// changes and latest are the snapshot's and the view's change counts, on every answer.
	changes, latest uint64
}

func (f *fakeDecider) NodeName(b []byte) (string, bool) {
	name := string(b)
	return name, f.nodes[name]
}

func (f *fakeDecider) Admit(pod *corev1.Pod) view.Admission {
	adm := f.admit(pod)
	adm.Changes, adm.Latest = f.changes, f.latest
	return adm
}

func (f *fakeDecider) admit(pod *corev1.Pod) view.Admission {
	if reason, wait := f.waiting[pod.Name]; wait {
		return view.Admission{Reason: reason, Queued: true, Job: "default/w"}
	}
	if reason, unseen := f.unseen[pod.Name]; unseen {
		return view.Admission{Reason: reason, Job: "default/n", Retry: true}
	}
	if reason, next := f.next[pod.Name]; next {
		return view.Admission{Reason: reason, Queued: true, Job: "ns/a"}
	}
	if reason, gathering := f.gathering[pod.Name]; gathering {
		return view.Admission{Reason: reason, Queued: true, Job: "default/g", Gathering: true}
	}
	return view.Admission{OK: true}
}

func (f *fakeDecider) NodeCheck(pod *corev1.Pod) func(string) (bool, string) {
	return func(node string) (bool, string) {
		reason, ok := f.conflicts[pod.Name+"/"+node]
		return ok, reason
	}
}

func (f *fakeDecider) MayPreempt(pod *corev1.Pod) bool {
	_, wait := f.waiting[pod.Name]
	return !wait
}

func (f *fakeDecider) Planned(pod *corev1.Pod) string { return f.planned[pod.Name] }

func (f *fakeDecider) Unclaimed(pod *corev1.Pod) func(string) bool {
	return func(node string) bool { return !f.claimed[pod.Name+"/"+node] }
}

func (f *fakeDecider) BindCheck(_ context.Context, pod gang.PodRef, node string) error {
	if why, ok := f.refuse[pod.Name+"/"+node]; ok {
		return errors.New(why)
	}
	return nil
}

func (f *fakeDecider) MayEvict(victim gang.PodRef) bool {
	return !strings.HasPrefix(string(victim.UID), "gang-") && !strings.HasPrefix(victim.Name, "gang-")
}

func (f *fakeDecider) Score(_ *corev1.Pod, nodes []string, _ extenderv1.HostPriorityList) extenderv1.HostPriorityList {
	out := extenderv1.HostPriorityList{}
	for _, n := range nodes {
		out = append(out, extenderv1.HostPriority{Host: n, Score: f.scores[n]})
	}
	return out
}

// fakeBinder records binds and fails those whose pod name is in fail.
type fakeBinder struct {
	mu    sync.Mutex
	binds []string
	fail  map[string]error
}

func (f *fakeBinder) Bind(ctx context.Context, pod gang.PodRef, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := f.fail[pod.Name]; err != nil {
		return err
	}
	f.binds = append(f.binds, pod.String()+"->"+node)
	return nil
}

type readyFlag bool

func (r readyFlag) Ready() bool { return bool(r) }

type testServer struct {
	srv     *server.Server
	binder  *fakeBinder
	logs    *observer.ObservedLogs
	metrics *metrics.Metrics
	waiting *fakeNotifier
	turns   *recordingTurns
}

// fakeNotifier records the waiting pods it is told about.
type fakeNotifier struct {
	mu    sync.Mutex
	calls []string // "namespace/name: reason"
}

func (f *fakeNotifier) NotifyWaiting(pod *corev1.Pod, adm view.Admission) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, podKey(pod)+": "+adm.Reason)
}

func (f *fakeNotifier) Warn(pod *corev1.Pod, warning view.Warning) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, podKey(pod)+": "+warning.Reason+" "+warning.Message)
}

func newTestServer(t *testing.T, ready bool, maxBytes int64) *testServer {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	binder := &fakeBinder{fail: map[string]error{"gone": errors.New("pod default/gone no longer exists: not bound to n1")}}
	decider := &fakeDecider{
		nodes:     map[string]bool{"n1": true, "n2": true},
		waiting:   map[string]string{"waiter": "job default/w waits for its turn: 2nd of 2, behind default/a (P=0.80)"},
		unseen:    map[string]string{"newcomer": "job default/n is not in the extender's view yet; it is retried shortly"},
		next:      map[string]string{"next": "job default/x waits for its turn: 1st of 1"},
		conflicts: map[string]string{"ps1/n2": "node n2 already hosts ps default/a-ps-0 of job default/a (hard PS anti-affinity)"},
		scores:    map[string]int64{"n1": 10, "n2": 3},
		// ps1's planned node fails its check: the other passing nodes stay.
		planned: map[string]string{"planned": "n2", "ps1": "n2", "elsewhere": "n9"},
		refuse:  map[string]string{"other/n1": `pod default/other is of scheduler "default-scheduler", not one this extender binds for (cps-scheduler)`},
		claimed: map[string]bool{"loose/n2": true, "crowded/n1": true, "crowded/n2": true},
	}
	// The newest snapshot Turns has seen gives job ns/a the turn.
	tu := &recordingTurns{Turns: turns.New(turns.Options{Log: log, Nudger: noNudger{}})}
	tu.Published(view.SnapshotOf([]priority.Job{fixture.ThreePodJob()}, fixture.BigNodes(), priority.DefaultModel(), time.Unix(1_700_000_000, 0)))
	verbs, err := New(log, fixed(decider), binder, tu)
	if err != nil {
		t.Fatal(err)
	}
	metrics := metrics.New(prometheus.NewRegistry())
	waiting := &fakeNotifier{}
	verbs.Observe(metrics, waiting)
	srv, err := server.New(server.Options{Access: server.OpenAccess, Log: log, MaxRequestBytes: maxBytes, Ready: readyFlag(ready), Metrics: metrics, Routes: verbs.Routes("/scheduler")})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{srv: srv, binder: binder, logs: logs, metrics: metrics, waiting: waiting, turns: tu}
}

func (ts *testServer) do(method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	ts.srv.ServeHTTP(rec, req)
	return rec
}

const podJSON = `{"metadata":{"name":"p1","namespace":"default","uid":"u1"},"spec":{"containers":[{"name":"c","image":"fake"}]}}`

const waiterReason = "job default/w waits for its turn: 2nd of 2, behind default/a (P=0.80)"

func TestFilter(t *testing.T) {
	tests := []struct {
		name string
		body string
		want extenderv1.ExtenderFilterResult
		// notified are the waiting pods told why (an Event each, rate limited elsewhere).
		notified []string
	}{
		{
			name: "node names: known pass, unknown fail with a reason",
			body: `{"Pod":` + podJSON + `,"NodeNames":["n1","ghost","n2"]}`,
			want: extenderv1.ExtenderFilterResult{
				NodeNames:                  &[]string{"n1", "n2"},
				FailedNodes:                extenderv1.FailedNodesMap{"ghost": "node ghost is not in the extender's cluster view (yet)"},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "a pod in no job goes around the room queued gangs count on; the node left out is not listed",
			body: `{"Pod":{"metadata":{"name":"loose","namespace":"default"}},"NodeNames":["n1","n2"]}`,
			want: extenderv1.ExtenderFilterResult{
				NodeNames:                  &[]string{"n1"},
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "a pod in no job that fits only in claimed room goes anywhere",
			body: `{"Pod":{"metadata":{"name":"crowded","namespace":"default"}},"NodeNames":["n1","n2"]}`,
			want: extenderv1.ExtenderFilterResult{
				NodeNames:                  &[]string{"n1", "n2"},
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "a waiting pod gets every node as unresolvable with its reason",
			body: `{"Pod":{"metadata":{"name":"waiter","namespace":"default"}},"NodeNames":["n1","n2"]}`,
			want: extenderv1.ExtenderFilterResult{
				NodeNames:   &[]string{},
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"n1": waiterReason,
					"n2": waiterReason,
				},
			},
			notified: []string{"default/waiter: " + waiterReason},
		},
		{
			name: "a pod whose job the view has not seen gets an error to retry, and is not told it waits for its turn",
			body: `{"Pod":{"metadata":{"name":"newcomer","namespace":"default"}},"NodeNames":["n1"]}`,
			want: extenderv1.ExtenderFilterResult{
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
				Error:                      "job default/n is not in the extender's view yet; it is retried shortly",
			},
		},
		{
			name: "a pod whose job got the turn since, yet waits on every snapshot decided again, gets an error to retry",
			body: `{"Pod":{"metadata":{"name":"next","namespace":"default"}},"NodeNames":["n1"]}`,
			want: extenderv1.ExtenderFilterResult{
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
				Error:                      "job default/x waits for its turn: 1st of 1",
			},
			notified: []string{"default/next: job default/x waits for its turn: 1st of 1"},
		},
		{
			name: "a node conflict fails that node only",
			body: `{"Pod":{"metadata":{"name":"ps1","namespace":"default"}},"NodeNames":["n1","n2"]}`,
			want: extenderv1.ExtenderFilterResult{
				NodeNames:                  &[]string{"n1"},
				FailedNodes:                extenderv1.FailedNodesMap{"n2": "node n2 already hosts ps default/a-ps-0 of job default/a (hard PS anti-affinity)"},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "full node objects of a waiting pod are all unresolvable",
			body: `{"Pod":{"metadata":{"name":"waiter","namespace":"default"}},"Nodes":{"items":[{"metadata":{"name":"x1"}}]}}`,
			want: extenderv1.ExtenderFilterResult{
				Nodes:                      &corev1.NodeList{Items: []corev1.Node{}},
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"x1": waiterReason},
			},
			notified: []string{"default/waiter: " + waiterReason},
		},
		{
			name: "an admitted pod with a plan passes its planned node alone; the node left out is not listed",
			body: `{"Pod":{"metadata":{"name":"planned","namespace":"default"}},"NodeNames":["n1","ghost","n2"]}`,
			want: extenderv1.ExtenderFilterResult{
				NodeNames: &[]string{"n2"},
				FailedNodes: extenderv1.FailedNodesMap{
					"ghost": "node ghost is not in the extender's cluster view (yet)",
				},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "full node objects: the planned node alone",
			body: `{"Pod":{"metadata":{"name":"planned","namespace":"default"}},"Nodes":{"items":[{"metadata":{"name":"n1"}},{"metadata":{"name":"n2"}}]}}`,
			want: extenderv1.ExtenderFilterResult{
				Nodes:                      &corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}},
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "a plan whose node is not a candidate leaves every passing node",
			body: `{"Pod":{"metadata":{"name":"elsewhere","namespace":"default"}},"NodeNames":["n1","n2"]}`,
			want: extenderv1.ExtenderFilterResult{
				NodeNames:                  &[]string{"n1", "n2"},
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "lower-case keys are accepted",
			body: `{"pod":` + podJSON + `,"nodenames":["n1"]}`,
			want: extenderv1.ExtenderFilterResult{
				NodeNames:                  &[]string{"n1"},
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "full node objects are returned whole",
			body: `{"Pod":` + podJSON + `,"Nodes":{"items":[{"metadata":{"name":"x1","labels":{"rack":"r1"}}}]}}`,
			want: extenderv1.ExtenderFilterResult{
				Nodes:                      &corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "x1", Labels: map[string]string{"rack": "r1"}}}}},
				FailedNodes:                extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, true, 1<<20)
			rec := ts.do(http.MethodPost, "/scheduler/filter", tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, body %s", rec.Code, rec.Body)
			}
			var got extenderv1.ExtenderFilterResult
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("filter result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.notified, ts.waiting.calls); diff != "" {
				t.Errorf("waiting pods told (-want +got):\n%s", diff)
			}
			// Only a pod turned away (every node unresolvable) is recorded as parked.
			parked := ts.turns.parked
			var wantParked []string
			if len(tt.want.FailedAndUnresolvableNodes) > 0 {
				wantParked = []string{"default/waiter (job default/w)"}
			}
			if diff := cmp.Diff(wantParked, parked); diff != "" {
				t.Errorf("parked pods (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrioritizePassesScoresThrough(t *testing.T) {
	ts := newTestServer(t, true, 1<<20)
	rec := ts.do(http.MethodPost, "/scheduler/prioritize", `{"Pod":`+podJSON+`,"NodeNames":["n1","n2"]}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %s", rec.Code, rec.Body)
	}
	var got extenderv1.HostPriorityList
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := extenderv1.HostPriorityList{{Host: "n1", Score: 10}, {Host: "n2", Score: 3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(rec.Body.Len()) {
		t.Errorf("Content-Length %q, body of %d bytes", cl, rec.Body.Len())
	}
}

func TestBind(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantError string
		wantBinds []string
	}{
		{
			name:      "binds through the binder",
			body:      `{"PodName":"p1","PodNamespace":"default","PodUID":"u1","Node":"n1"}`,
			wantBinds: []string{"default/p1->n1"},
		},
		{
			name:      "a bind the view refuses (another scheduler's pod) is never posted",
			body:      `{"PodName":"other","PodNamespace":"default","PodUID":"u3","Node":"n1"}`,
			wantError: `pod default/other is of scheduler "default-scheduler", not one this extender binds for (cps-scheduler)`,
		},
		{
			name:      "a pod that no longer exists answers an Error saying so",
			body:      `{"PodName":"gone","PodNamespace":"default","PodUID":"u2","Node":"n1"}`,
			wantError: "pod default/gone no longer exists: not bound to n1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, true, 1<<20)
			rec := ts.do(http.MethodPost, "/scheduler/bind", tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, body %s", rec.Code, rec.Body)
			}
			var got extenderv1.ExtenderBindingResult
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Error != tt.wantError {
				t.Errorf("Error = %q, want %q", got.Error, tt.wantError)
			}
			if diff := cmp.Diff(tt.wantBinds, ts.binder.binds); diff != "" {
				t.Errorf("binds (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	big := `{"Pod":` + podJSON + `,"NodeNames":["` + strings.Repeat("n", 4096) + `"]}`
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		ready      bool
		wantStatus int
		wantError  string // a substring of the JSON error
	}{
		{"malformed JSON", "POST", "/scheduler/filter", `{"Pod":`, true, 400, "ends in the middle"},
		{"syntax error", "POST", "/scheduler/filter", `{"Pod": nope}`, true, 400, "not valid JSON"},
		{"empty body", "POST", "/scheduler/prioritize", ``, true, 400, "body is empty"},
		{"missing Pod", "POST", "/scheduler/filter", `{"NodeNames":["n1"]}`, true, 400, "no Pod"},
		{"missing nodes", "POST", "/scheduler/filter", `{"Pod":` + podJSON + `}`, true, 400, "neither NodeNames"},
		{"pod without name", "POST", "/scheduler/prioritize", `{"Pod":{"metadata":{}},"NodeNames":[]}`, true, 400, "no metadata.name"},
		{"wrong type", "POST", "/scheduler/filter", `{"Pod":` + podJSON + `,"NodeNames":"n1"}`, true, 400, "wrong type"},
		{"trailing data", "POST", "/scheduler/filter", `{"Pod":` + podJSON + `,"NodeNames":[]} {}`, true, 400, "data after"},
		{"bind without node", "POST", "/scheduler/bind", `{"PodName":"p1","PodNamespace":"default"}`, true, 400, "no Node"},
		{"bind without anything", "POST", "/scheduler/bind", `{}`, true, 400, "no PodName, PodNamespace, Node"},
		{"body over the limit", "POST", "/scheduler/filter", big, true, 413, "larger than the limit of 2048 bytes"},
		{"unknown verb", "POST", "/scheduler/reserve", `{}`, true, 404, `unknown verb "reserve"`},
		{"preempt without Pod", "POST", "/scheduler/preempt", `{}`, true, 400, "no Pod"},
		{"unknown path", "POST", "/elsewhere", `{}`, true, 404, "no such endpoint"},
		{"wrong method", "GET", "/scheduler/filter", ``, true, 405, "method GET is not allowed"},
		{"not ready", "POST", "/scheduler/filter", `{"Pod":` + podJSON + `,"NodeNames":["n1"]}`, false, 503, "not ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, tt.ready, 2048)
			rec := ts.do(tt.method, tt.path, tt.body)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var got wire.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("error body is not JSON: %v: %s", err, rec.Body)
			}
			if !strings.Contains(got.Error, tt.wantError) {
				t.Errorf("error %q does not contain %q", got.Error, tt.wantError)
			}
			if len(ts.binder.binds) != 0 {
				t.Errorf("bad input led to binds %v", ts.binder.binds)
			}
		})
	}
}

func TestHealthAndReadiness(t *testing.T) {
	for _, tt := range []struct {
		name       string
		ready      bool
		path       string
		wantStatus int
	}{
		{"healthz while syncing", false, "/healthz", 200},
		{"readyz while syncing", false, "/readyz", 503},
		{"readyz synced", true, "/readyz", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, tt.ready, 1024)
			if rec := ts.do(http.MethodGet, tt.path, ""); rec.Code != tt.wantStatus {
				t.Errorf("%s: status %d, want %d", tt.path, rec.Code, tt.wantStatus)
			}
		})
	}
}

func TestAccessLog(t *testing.T) {
	for _, tt := range []struct {
		verb, body, decision string
	}{
		{"bind", `{"PodName":"p1","PodNamespace":"default","PodUID":"u1","Node":"n2"}`, "bound to n2"},
		{"filter", `{"Pod":` + podJSON + `,"NodeNames":["n1","n2","n9"]}`, "passed 2, failed 1, unresolvable 0"},
		{"prioritize", `{"Pod":` + podJSON + `,"NodeNames":["n1","n2"]}`, "scored 2 nodes"},
	} {
		t.Run(tt.verb, func(t *testing.T) {
			ts := newTestServer(t, true, 1<<20)
			ts.do(http.MethodPost, "/scheduler/"+tt.verb, tt.body)
			entries := ts.logs.FilterMessage("request").All()
			if len(entries) != 1 {
				t.Fatalf("got %d access log lines, want 1", len(entries))
			}
			fields := entries[0].ContextMap()
			want := map[string]any{"verb": tt.verb, "method": "POST", "path": "/scheduler/" + tt.verb, "status": int64(200), "pod": "default/p1", "decision": tt.decision}
			for k, v := range want {
				if fields[k] != v {
					t.Errorf("log field %s = %v, want %v", k, fields[k], v)
				}
			}
			if _, ok := fields["duration"]; !ok {
				t.Error("log line has no duration")
			}
		})
	}
}

// TestDecisionDescribedOnlyWhenLogged: filter and prioritize describe their decision for
// the access log only when the log prints it (debug level).
func TestDecisionDescribedOnlyWhenLogged(t *testing.T) {
	verbs, err := New(zap.NewNop(), fixed(&fakeDecider{}), &fakeBinder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"Pod":{"metadata":{"name":"p1","namespace":"default"}},"NodeNames":["n1"]}`
	for _, route := range verbs.Routes("/scheduler")[:2] {
		for _, detailed := range []bool{false, true} {
			req := httptest.NewRequest(http.MethodPost, route.Path, strings.NewReader(body))
			note := route.Handler(httptest.NewRecorder(), req, wire.Call{MaxBytes: 1 << 20, Detailed: detailed})
			if described := note != (wire.Note{}); described != detailed {
				t.Errorf("%s, detailed %t: note %+v", route.Verb, detailed, note)
			}
		}
	}
}

func TestNewSchedulerVerbsRequiresDependencies(t *testing.T) {
	if _, err := New(nil, nil, nil, nil); err == nil {
		t.Error("New accepted nil dependencies")
	}
}

// TestBindHandsTheRequestsCancellationToTheGate: the binder (the gate) gets the request's
// own context, so a bind held while its gang gathers is dropped when the scheduler gives
// up on it; the gate itself finishes a Binding under way (extender/gate's
// TestGateCancellation). Found: with the cancellation cut off here, a hold the gate never
// answered waited for ever.
func TestBindHandsTheRequestsCancellationToTheGate(t *testing.T) {
	ts := newTestServer(t, true, 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodPost, "/scheduler/bind", bytes.NewBufferString(`{"PodName":"p1","PodNamespace":"default","Node":"n1"}`)).WithContext(ctx)
	rec := httptest.NewRecorder()
	ts.srv.ServeHTTP(rec, req)
	var got extenderv1.ExtenderBindingResult
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if !strings.Contains(got.Error, context.Canceled.Error()) || len(ts.binder.binds) != 0 {
		t.Errorf("answer %+v, binds %v: want the binder to see the request cancelled", got, ts.binder.binds)
	}
}

func TestPreempt(t *testing.T) {
	tests := []struct {
		name string
		body string
		want extenderv1.ExtenderPreemptionResult
	}{
		{
			name: "a waiting job's pod may preempt nothing",
			body: `{"Pod":{"metadata":{"name":"waiter","namespace":"default"}},"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"plain-1"}]}}}`,
			want: extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}},
		},
		{
			name: "nodes whose victims include a gang member are dropped",
			body: `{"Pod":` + podJSON + `,"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"plain-1"}],"NumPDBViolations":1},"n2":{"Pods":[{"UID":"plain-2"},{"UID":"gang-3"}]}}}`,
			want: extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"n1": {Pods: []*extenderv1.MetaPod{{UID: "plain-1"}}, NumPDBViolations: 1},
			}},
		},
		{
			name: "full victim pods are answered by UID",
			body: `{"Pod":` + podJSON + `,"NodeNameToVictims":{"n1":{"Pods":[{"metadata":{"name":"p","namespace":"default","uid":"plain-9"}}]},"n2":{"Pods":[{"metadata":{"name":"gang-a","namespace":"default","uid":"u"}}]}}}`,
			want: extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"n1": {Pods: []*extenderv1.MetaPod{{UID: "plain-9"}}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, true, 1<<20)
			rec := ts.do(http.MethodPost, "/scheduler/preempt", tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, body %s", rec.Code, rec.Body)
			}
			var got extenderv1.ExtenderPreemptionResult
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("preemption result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnswersDoNotLeakBetweenCalls: one server answers a run of filter and prioritize calls
// of different sizes and outcomes, each twice (the second time on memory the others used);
// every answer equals the one a fresh server gives.
func TestAnswersDoNotLeakBetweenCalls(t *testing.T) {
	calls := []struct{ path, body string }{
		{"/scheduler/filter", `{"Pod":` + podJSON + `,"NodeNames":["n1","ghost","n2","n1"]}`},
		{"/scheduler/filter", `{"Pod":{"metadata":{"name":"ps1","namespace":"default"}},"NodeNames":["n2"]}`},
		{"/scheduler/filter", `{"Pod":` + podJSON + `,"NodeNames":["n2"]}`},
		{"/scheduler/prioritize", `{"Pod":` + podJSON + `,"NodeNames":["n1","n2","n1"]}`},
		{"/scheduler/prioritize", `{"Pod":` + podJSON + `,"NodeNames":["n2"]}`},
		{"/scheduler/filter", `{"Pod":` + podJSON + `,"NodeNames":[]}`},
	}
	want := make([]string, len(calls))
	for i, c := range calls {
		want[i] = newTestServer(t, true, 1<<20).do(http.MethodPost, c.path, c.body).Body.String()
	}
	shared := newTestServer(t, true, 1<<20)
	for round := range 2 {
		for i, c := range calls {
			if got := shared.do(http.MethodPost, c.path, c.body).Body.String(); got != want[i] {
				t.Errorf("round %d, call %d (%s): answer %s, a fresh server answers %s", round, i, c.path, got, want[i])
			}
		}
	}
}

// recordingTurns is a real Turns that records the pods it parks.
type recordingTurns struct {
	*turns.Turns
	parked []string // "namespace/name (job key)"
}

func (r *recordingTurns) Parked(pod *corev1.Pod, job string) bool {
	turnCame := r.Turns.Parked(pod, job)
	if !turnCame {
		r.parked = append(r.parked, fmt.Sprintf("%s/%s (job %s)", pod.Namespace, pod.Name, job))
	}
	return turnCame
}

// noNudger nudges nothing.
type noNudger struct{}

func (noNudger) Nudge(context.Context, gang.PodRef, time.Time) error { return nil }

// inTurn is the Decider that gives each of snapshots in turn, the last again and again,
// counting its calls in calls.
func inTurn(snapshots []Decisions, calls *int) Decider {
	return func() Decisions {
		d := snapshots[min(*calls, len(snapshots)-1)]
		*calls++
		return d
	}
}

// fixed is the Decider of one Decisions.
func fixed(d Decisions) Decider { return func() Decisions { return d } }

// TestFilterAwaitsView pins the catch-up of AwaitView: a pod the view has not seen yet, or
// whose gang is still being created, is decided on the first snapshot that has seen it and
// the whole gang, and only after ViewCatchUp with nothing newer is it answered with the
// retry (unseen) or turned away (gathering). A waiting pod decided on a snapshot older than
// the changes the view had then is decided on the first snapshot that has them.
func TestFilterAwaitsView(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "newcomer", Namespace: "default"}}
	unseen := &fakeDecider{unseen: map[string]string{"newcomer": "job default/n is not in the extender's view yet; it is retried shortly"}}
	gathering := &fakeDecider{gathering: map[string]string{"newcomer": "job default/g waits for its turn: gang incomplete: 2 of 3 pods exist"}}
	seen := &fakeDecider{}
	waitingAt := func(changes, latest uint64) *fakeDecider {
		return &fakeDecider{waiting: map[string]string{"newcomer": "job default/w waits for its turn: it does not fit yet"}, changes: changes, latest: latest}
	}
	admittedAt := func(changes, latest uint64) *fakeDecider { return &fakeDecider{changes: changes, latest: latest} }
	closed := make(chan struct{})
	close(closed)
	tests := []struct {
		name      string
		await     bool
		snapshots []Decisions // what the decider gives, call by call; the last repeats
		published bool        // whether newer snapshots get published
		wantRetry bool
		wantOK    bool
		wantCalls int
		wantCause string // the cause of the wait counted in the metrics; "" when none
	}{
		{name: "without AwaitView the retry is answered at once", snapshots: []Decisions{unseen, seen}, published: true, wantRetry: true, wantCalls: 0},
		{name: "a seen pod is decided without waiting", await: true, snapshots: []Decisions{seen}, published: true, wantOK: true, wantCalls: 0},
		{name: "the view catches up after two publications", await: true, snapshots: []Decisions{unseen, unseen, seen}, published: true, wantOK: true, wantCalls: 3, wantCause: "unseen"},
		{name: "the view stays behind: the retry after ViewCatchUp", await: true, snapshots: []Decisions{unseen}, wantRetry: true, wantCalls: 1, wantCause: "unseen"},
		{name: "without AwaitView a gathering gang is decided at once", snapshots: []Decisions{gathering, seen}, published: true, wantCalls: 0},
		{name: "the rest of a gang being created is awaited", await: true, snapshots: []Decisions{gathering, gathering, seen}, published: true, wantOK: true, wantCalls: 3, wantCause: "gathering"},
		{name: "a gang that stays incomplete is decided after ViewCatchUp", await: true, snapshots: []Decisions{gathering}, wantCalls: 1, wantCause: "gathering"},
		{name: "an unseen pod of a gathering gang is awaited too", await: true, snapshots: []Decisions{unseen, gathering, seen}, published: true, wantOK: true, wantCalls: 3, wantCause: "unseen"},
		{name: "a waiting pod on a snapshot with every change is turned away at once", await: true, snapshots: []Decisions{waitingAt(5, 5)}, published: true, wantCalls: 0},
		{name: "a waiting pod on a snapshot behind the view is decided on the one with the changes", await: true, snapshots: []Decisions{waitingAt(4, 5), waitingAt(4, 5), admittedAt(5, 5)}, published: true, wantOK: true, wantCalls: 3, wantCause: "behind"},
		{name: "changes that come while it waits do not make it wait longer", await: true, snapshots: []Decisions{waitingAt(4, 5), waitingAt(5, 7), admittedAt(7, 7)}, published: true, wantCalls: 2, wantCause: "behind"},
		{name: "a view that does not recompute: turned away after ViewCatchUp", await: true, snapshots: []Decisions{waitingAt(4, 5)}, wantCalls: 1, wantCause: "behind"},
		{name: "without AwaitView a waiting pod behind the view is decided at once", snapshots: []Decisions{waitingAt(4, 5), admittedAt(5, 5)}, published: true, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			decider := inTurn(tt.snapshots, &calls)
			v, err := New(zap.NewNop(), decider, &fakeBinder{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			v.Observe(metrics.New(reg), nil)
			fc := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			if tt.await {
				next := func() <-chan struct{} {
					if tt.published {
						return closed
					}
					return make(chan struct{}) // nothing newer ever comes
				}
				v.AwaitView(next, ViewCatchUp, fc)
			}
			done := make(chan Decisions)
			go func() {
				d, adm := v.fresh(context.Background(), tt.snapshots[0], pod)
				if !reflect.DeepEqual(adm, d.Admit(pod)) {
					t.Errorf("admission %+v is not that of the decisions returned", adm)
				}
				done <- d
			}()
			if tt.await && !tt.published {
				for deadline := time.Now().Add(5 * time.Second); !fc.HasWaiters(); time.Sleep(time.Millisecond) {
					select {
					case <-done:
						t.Fatal("answered before ViewCatchUp passed")
					default:
					}
					if time.Now().After(deadline) {
						t.Fatal("the filter neither answered nor waited for a newer snapshot")
					}
				}
				fc.Step(ViewCatchUp)
			}
			got := <-done
			if waits := viewWaits(t, reg); tt.wantCause == "" && len(waits) > 0 || tt.wantCause != "" && (len(waits) != 1 || waits[tt.wantCause] != 1) {
				t.Errorf("view waits counted %v, want one of cause %q", waits, tt.wantCause)
			}
			if retry := got.Admit(pod).Retry; retry != tt.wantRetry {
				t.Errorf("retry = %v, want %v", retry, tt.wantRetry)
			}
			if ok := got.Admit(pod).OK; ok != tt.wantOK {
				t.Errorf("admitted = %v, want %v", ok, tt.wantOK)
			}
			if calls != tt.wantCalls {
				t.Errorf("decider called %d times, want %d", calls, tt.wantCalls)
			}
		})
	}
}

// viewWaits counts the filter's view waits in reg by cause.
func viewWaits(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "cps_extender_filter_view_wait_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" {
					out[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// TestFilterDecidesAgainWhenTheTurnCame: a pod decided on a snapshot older than the one that
// gives its job the turn is decided again on the newest snapshot, instead of being answered
// with a retry (a trip through kube-scheduler's backoff); a pod that waits on the newest
// snapshot is parked; one that keeps waiting on snapshots older than its turn gets the retry
// after redecideLimit.
func TestFilterDecidesAgainWhenTheTurnCame(t *testing.T) {
	stale := &fakeDecider{next: map[string]string{"p": "job default/x waits for its turn: 1st of 1"}}
	waiting := &fakeDecider{waiting: map[string]string{"p": "job default/w waits for its turn: 2nd of 2"}}
	admitted := &fakeDecider{}
	tests := []struct {
		name       string
		first      Decisions
		newer      []Decisions // what the decider gives, call by call; the last repeats
		wantOK     bool
		wantParked bool
		wantCalls  int
	}{
		{name: "admitted on the newest snapshot", first: stale, newer: []Decisions{admitted}, wantOK: true, wantCalls: 1},
		{name: "admitted after two newer snapshots", first: stale, newer: []Decisions{stale, admitted}, wantOK: true, wantCalls: 2},
		{name: "older than its turn every time: a retry", first: stale, newer: []Decisions{stale}, wantCalls: redecideLimit},
		{name: "a job that waits is parked at once", first: waiting, newer: []Decisions{admitted}, wantParked: true, wantCalls: 0},
		{name: "an admitted pod is neither decided again nor parked", first: admitted, newer: []Decisions{stale}, wantOK: true, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			decider := inTurn(tt.newer, &calls)
			// The newest snapshot Turns has seen gives job ns/a the turn.
			tu := &recordingTurns{Turns: turns.New(turns.Options{Log: zap.NewNop(), Nudger: noNudger{}})}
			tu.Published(view.SnapshotOf([]priority.Job{fixture.ThreePodJob()}, fixture.BigNodes(), priority.DefaultModel(), time.Unix(1_700_000_000, 0)))
			v, err := New(zap.NewNop(), decider, &fakeBinder{}, tu)
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
			d, adm, parked := v.settle(tt.first, tt.first.Admit(pod), pod)
			if !reflect.DeepEqual(adm, d.Admit(pod)) {
				t.Errorf("admission %+v is not that of the decisions returned", adm)
			}
			if adm.OK != tt.wantOK || parked != tt.wantParked {
				t.Errorf("admitted %v, parked %v; want %v, %v", adm.OK, parked, tt.wantOK, tt.wantParked)
			}
			if calls != tt.wantCalls {
				t.Errorf("decider called %d times, want %d", calls, tt.wantCalls)
			}
			if got := len(tu.parked) > 0; got != tt.wantParked {
				t.Errorf("recorded as parked: %v (%v), want %v", got, tu.parked, tt.wantParked)
			}
		})
	}
}

func TestFilterSummary(t *testing.T) {
	names := func(n ...string) *[]string { return &n }
	for _, tc := range []struct {
		name   string
		answer filterAnswer
		want   string
	}{
		{"every node passes", filterAnswer{ExtenderFilterResult: extenderv1.ExtenderFilterResult{NodeNames: names("n1", "n2")}},
			"passed 2, failed 0, unresolvable 0"},
		{"the plan's node alone, the others counted as left out", filterAnswer{
			ExtenderFilterResult: extenderv1.ExtenderFilterResult{NodeNames: names("n2"), FailedNodes: extenderv1.FailedNodesMap{"ghost": "unknown"}},
			leftOut:              998, why: notPlannedReason("n2")},
			"passed 1, failed 1, unresolvable 0, left out 998 (the job's plan puts this pod on node n2)"},
		{"a waiting pod", filterAnswer{ExtenderFilterResult: extenderv1.ExtenderFilterResult{NodeNames: names()},
			unresolvable: []string{"n1", "n2"}, reason: "waits"},
			"passed 0, failed 0, unresolvable 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.answer.summary(); got != tc.want {
				t.Errorf("summary %q, want %q", got, tc.want)
			}
		})
	}
}
