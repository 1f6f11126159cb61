package volcano

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/server"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/extender/wire"
	"github.com/cps-extender/cps-extender/priority"
)

// volcanoFixtures holds the Volcano request fixtures, usable with curl too (README.md there).
const volcanoFixtures = "../../test/testdata/volcano"

// volcanoNow is the clock of the contract tests: the fixtures' jobs were created 2 to 60
// minutes before it.
var volcanoNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// volcanoServer is a real Server with the Volcano verbs, configured by the fixtures'
// config.yaml, and a fake kube-scheduler side.
type volcanoServer struct {
	srv   *server.Server
	verbs *Verbs
	logs  *observer.ObservedLogs
}

// newVolcanoServer builds the server at volcanoNow; edit changes the fixture config before
// it is used.
func newVolcanoServer(t *testing.T, maxBytes int64, edit func(*config.Config)) *volcanoServer {
	t.Helper()
	return newVolcanoServerAt(t, volcanoNow, maxBytes, edit)
}

// newVolcanoServerAt is newVolcanoServer with the clock stopped at now.
func newVolcanoServerAt(t *testing.T, now time.Time, maxBytes int64, edit func(*config.Config)) *volcanoServer {
	t.Helper()
	return newVolcanoServerOn(t, testingclock.NewFakePassiveClock(now), maxBytes, edit)
}

// newVolcanoServerOn is newVolcanoServer on the clock clk.
func newVolcanoServerOn(t *testing.T, clk clock.PassiveClock, maxBytes int64, edit func(*config.Config)) *volcanoServer {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	srv, verbs := buildVolcanoServer(t, zap.New(core), clk, maxBytes, edit)
	return &volcanoServer{srv: srv, verbs: verbs, logs: logs}
}

// buildVolcanoServer builds the Server of newVolcanoServerOn with the given logger.
func buildVolcanoServer(tb testing.TB, log *zap.Logger, clk clock.PassiveClock, maxBytes int64, edit func(*config.Config)) (*server.Server, *Verbs) {
	tb.Helper()
	cfg, errs := config.LoadConfig(filepath.Join(volcanoFixtures, "config.yaml"))
	if edit != nil {
		edit(&cfg)
	}
	if errs = append(errs, cfg.Validate()...); len(errs) > 0 {
		tb.Fatalf("fixture config: %v", errs)
	}
	volcano, err := New(log, cfg.Volcano, cfg.Model.PriorityModel(), cfg.Affinity, cfg.Gang, clk)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := server.New(server.Options{Access: server.OpenAccess, Log: log, MaxRequestBytes: maxBytes, Ready: readyFlag(true), Routes: slices.Concat(viewRoutes(cfg.URLPrefix), volcano.Routes())})
	if err != nil {
		tb.Fatal(err)
	}
	return srv, volcano
}

// post sends body to /volcano/<verb> through the server's ServeHTTP.
func (vs *volcanoServer) post(verb, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/volcano/"+verb, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	vs.srv.ServeHTTP(rec, req)
	return rec
}

// mustPost posts and fails the test unless the answer is 200 JSON.
func (vs *volcanoServer) mustPost(t *testing.T, verb, body string) []byte {
	t.Helper()
	rec := vs.post(verb, body)
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: status %d, body %s", verb, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", verb, ct)
	}
	return rec.Body.Bytes()
}

// openSession posts an onSessionOpen body.
func (vs *volcanoServer) openSession(t *testing.T, body string) {
	t.Helper()
	if got := string(vs.mustPost(t, VerbOnSessionOpen, body)); got != "{}\n" {
		t.Fatalf("onSessionOpen answered %q, want {}", got)
	}
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(volcanoFixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fixtureEvictees returns the raw evictees of a preemptable/reclaimable fixture.
func fixtureEvictees(t *testing.T, name string) []json.RawMessage {
	t.Helper()
	var req struct {
		Evictees []json.RawMessage `json:"evictees"`
	}
	if err := json.Unmarshal([]byte(fixture(t, name)), &req); err != nil {
		t.Fatal(err)
	}
	return req.Evictees
}

// sameJSON compares raw JSON by meaning, so echoed victims are compared field by field.
var sameJSON = cmp.Comparer(func(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
})

// decodeAs decodes body into a new value of want's type.
func decodeAs(t *testing.T, want any, body []byte) any {
	t.Helper()
	got := reflect.New(reflect.TypeOf(want))
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(got.Interface()); err != nil {
		t.Fatalf("answer %s does not decode as %T: %v", body, want, err)
	}
	return got.Elem().Interface()
}

// TestVolcanoContract drives every verb with the fixtures, with and without the session
// snapshot of onSessionOpen.json, and checks each answer field by field. It does so at the
// fixtures' time and years later (every job then starved, so ordered by age, not P): the
// fixtures are built so that both give the same answers, which is what README.md there
// promises to whoever replays them with curl today.
func TestVolcanoContract(t *testing.T) {
	const conflict = "node node-a already hosts ps ml/train-a-ps-0 of job ml/train-a (hard PS anti-affinity)"
	preemptVictims := fixtureEvictees(t, "preemptable.json")
	if len(preemptVictims) != 1 {
		t.Fatalf("preemptable.json has %d evictees, want 1", len(preemptVictims))
	}
	defaults := func(c *config.Config) {
		c.Model, c.Affinity = config.DefaultConfig().Model, config.DefaultConfig().Affinity
	}
	tests := []struct {
		name    string
		session bool
		verb    string
		file    string
		want    any
		edit    func(*config.Config) // nil: the fixtures' config.yaml as it is
	}{
		{"session open", false, VerbOnSessionOpen, "onSessionOpen.json", map[string]any{}, nil},
		{"session close", true, VerbOnSessionClose, "onSessionClose.json", map[string]any{}, nil},
		{"predicate: a PS on its sibling's node fails, unresolvable", true, VerbPredicate, "predicate.json",
			PredicateResult{Status: conflict, Code: PredicateUnschedulableAndUnresolvable}, nil},
		{"predicate without a session: the node's tasks show the sibling", false, VerbPredicate, "predicate.json",
			PredicateResult{Status: conflict, Code: PredicateUnschedulableAndUnresolvable}, nil},
		{"predicate: a PS on a free node passes", true, VerbPredicate, "predicate-pass.json", PredicateResult{}, nil},
		// With the session, the job's plan: worker-1 serves ps-1, which goes to node-b beside
		// ps-0's rack (node-a holds ps-0 and worker-0; PS are kept apart).
		{"prioritize: the node the session's plan puts the worker on, then its PS's node, rack, zone", true, VerbPrioritize, "prioritize.json",
			PrioritizeResult{NodeScore: map[string]float64{"node-a": 80, "node-b": 100, "node-c": 30}}, nil},
		{"prioritize without a session", false, VerbPrioritize, "prioritize.json",
			PrioritizeResult{NodeScore: map[string]float64{"node-a": 100, "node-b": 60, "node-c": 30}}, nil},
		{"jobEnqueueable: the head of the queue, Tasks {}, fits", true, VerbJobEnqueueable, "jobEnqueueable.json",
			EnqueueResult{Status: Permit}, nil},
		{"jobEnqueueable without a session: alone, nothing to compare", false, VerbJobEnqueueable, "jobEnqueueable.json",
			EnqueueResult{Status: Permit}, nil},
		{"jobEnqueueable: second in line and short of cpu", true, VerbJobEnqueueable, "jobEnqueueable-veto.json",
			EnqueueResult{Status: Reject}, nil},
		{"jobEnqueueable without a session: no jobs ahead", false, VerbJobEnqueueable, "jobEnqueueable-veto.json",
			EnqueueResult{Status: Permit}, nil},
		{"jobReady: 1 of minimum 1 running", true, VerbJobReady, "jobReady.json", JobReadyResult{Status: true}, nil},
		{"jobReady: 2 of minimum 4 running", true, VerbJobReady, "jobReady-not-ready.json", JobReadyResult{Status: false}, nil},
		{"preemptable: the victim's job ran 30m and ranks well below, permit and echo it", true, VerbPreemptable, "preemptable.json",
			EvictResult{Status: Permit, Victims: preemptVictims}, nil},
		{"preemptable without a session", false, VerbPreemptable, "preemptable.json",
			EvictResult{Status: Permit, Victims: preemptVictims}, nil},
		{"default config (preemption: urgent): not urgent, but waiting 1h, past the starvation bound: permit", true, VerbPreemptable, "preemptable.json",
			EvictResult{Status: Permit, Victims: preemptVictims}, defaults},
		{"preemptable with null evictees", true, VerbPreemptable, "preemptable-null.json",
			EvictResult{Status: Abstain, Victims: []json.RawMessage{}}, nil},
		{"reclaimable: the victim's job ranks above, reject", true, VerbReclaimable, "reclaimable.json",
			EvictResult{Status: Reject, Victims: []json.RawMessage{}}, nil},
		{"reclaimable without a session", false, VerbReclaimable, "reclaimable.json",
			EvictResult{Status: Reject, Victims: []json.RawMessage{}}, nil},
		{"queueOverused", true, VerbQueueOverused, "queueOverused.json", QueueOverusedResult{}, nil},
		{"default config: soft anti-affinity, the PS passes", true, VerbPredicate, "predicate.json", PredicateResult{}, defaults},
		{"default config: zone is the only topology level", true, VerbPrioritize, "prioritize.json",
			PrioritizeResult{NodeScore: map[string]float64{"node-a": 80, "node-b": 100, "node-c": 60}}, defaults},
		{"default config: the same enqueue votes", true, VerbJobEnqueueable, "jobEnqueueable-veto.json",
			EnqueueResult{Status: Reject}, defaults},
	}
	for _, now := range []time.Time{volcanoNow, volcanoNow.AddDate(5, 0, 0)} {
		for _, tt := range tests {
			t.Run(now.Format("2006")+" "+tt.name, func(t *testing.T) {
				vs := newVolcanoServerAt(t, now, 1<<20, tt.edit)
				if tt.session {
					vs.openSession(t, fixture(t, "onSessionOpen.json"))
				}
				got := decodeAs(t, tt.want, vs.mustPost(t, tt.verb, fixture(t, tt.file)))
				if diff := cmp.Diff(tt.want, got, sameJSON); diff != "" {
					t.Errorf("%s answer (-want +got):\n%s", tt.verb, diff)
				}
			})
		}
	}
}

// TestVolcanoSchedulerConf checks the shipped Volcano scheduler configuration against the
// server: the extender plugin points at the default prefix and every verb it names is served.
func TestVolcanoSchedulerConf(t *testing.T) {
	b, err := os.ReadFile("../../scheduler-config/volcano-scheduler.conf")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Actions string `json:"actions"`
		Tiers   []struct {
			Plugins []struct {
				Name              string         `json:"name"`
				EnablePreemptable *bool          `json:"enablePreemptable"`
				Arguments         map[string]any `json:"arguments"`
			} `json:"plugins"`
		} `json:"tiers"`
	}
	if err := yaml.UnmarshalStrict(b, &conf); err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	for _, tier := range conf.Tiers {
		for _, p := range tier.Plugins {
			if p.Name == "extender" {
				args = p.Arguments
			}
		}
	}
	if args == nil {
		t.Fatal("no extender plugin")
	}
	if got := args["extender.urlPrefix"]; got != "http://127.0.0.1:8888"+config.DefaultConfig().Volcano.URLPrefix {
		t.Errorf("urlPrefix %v", got)
	}
	if args["extender.ignorable"] != false || args["extender.httpTimeout"] != "1s" {
		t.Errorf("ignorable %v, httpTimeout %v; want false, 1s", args["extender.ignorable"], args["extender.httpTimeout"])
	}
	vs := newVolcanoServer(t, 1<<20, nil)
	verbs := []string{VerbOnSessionOpen, VerbOnSessionClose, VerbPredicate, VerbPrioritize,
		VerbPreemptable, VerbReclaimable, VerbQueueOverused, VerbJobEnqueueable, VerbJobReady}
	for _, verb := range verbs {
		key := "extender." + verb + "Verb"
		if args[key] != verb {
			t.Errorf("%s = %v, want %s", key, args[key], verb)
		}
		if rec := vs.post(verb, `{}`); rec.Code != http.StatusOK {
			t.Errorf("%s: status %d", verb, rec.Code)
		}
	}
}

// TestVolcanoFixtureShapes pins what the fixtures are meant to exercise, so that a change
// to them cannot silently stop covering a Volcano shape.
func TestVolcanoFixtureShapes(t *testing.T) {
	var session volcanoSessionRequest
	if err := json.Unmarshal([]byte(fixture(t, "onSessionOpen.json")), &session); err != nil {
		t.Fatal(err)
	}
	if len(session.Jobs) < 3 || len(session.Nodes) < 3 || len(session.Queues) < 2 {
		t.Errorf("session has %d jobs, %d nodes, %d queues; want several of each", len(session.Jobs), len(session.Nodes), len(session.Queues))
	}
	if j := session.Jobs["ml/train-b"]; j == nil || j.Tasks == nil || len(j.Tasks) != 0 || j.TaskMinAvailable["worker"] != 2 {
		t.Errorf("ml/train-b should be a Volcano Job with Tasks {} and TaskMinAvailable set: %+v", j)
	}
	for uid, task := range session.Jobs["research/batch-e"].Tasks {
		if task.TaskRole != "" || task.Pod.Annotations[gang.VolcanoTaskSpec] != "run" {
			t.Errorf("batch-e task %s should have no TaskRole and the role in its annotation", uid)
		}
	}
	for uid, task := range session.Jobs["ml/train-a"].Tasks {
		if task.TaskRole == "" {
			t.Errorf("train-a task %s should carry TaskRole", uid)
		}
	}
	if n := session.Nodes["node-d"]; n == nil || n.State.Phase != NodeNotReady {
		t.Errorf("node-d should be NotReady: %+v", n)
	}
	var enqueue struct {
		Job map[string]json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal([]byte(fixture(t, "jobEnqueueable.json")), &enqueue); err != nil {
		t.Fatal(err)
	}
	if got := string(enqueue.Job["WaitingTime"]); got != "null" {
		t.Errorf("jobEnqueueable.json WaitingTime = %s, want null", got)
	}
	if got := string(enqueue.Job["Tasks"]); got != "{}" {
		t.Errorf("jobEnqueueable.json Tasks = %s, want {}", got)
	}
}

// TestVolcanoEmptyBody pins the safe answer of every verb to an empty body and to {}: no
// opinion (pass, score 0, abstain, ready, not overused), in the exact JSON Volcano reads.
func TestVolcanoEmptyBody(t *testing.T) {
	tests := []struct {
		verb string
		want string
	}{
		{VerbOnSessionOpen, `{}`},
		{VerbOnSessionClose, `{}`},
		{VerbPredicate, `{"status":"","code":0}`},
		{VerbPrioritize, `{"nodeScore":{},"errorMessage":""}`},
		{VerbPreemptable, `{"status":0,"victims":[]}`},
		{VerbReclaimable, `{"status":0,"victims":[]}`},
		{VerbJobEnqueueable, `{"status":0}`},
		{VerbJobReady, `{"status":true}`},
		{VerbQueueOverused, `{"overused":false}`},
	}
	for _, tt := range tests {
		for _, body := range []string{"", " \n", "{}", "null"} {
			t.Run(fmt.Sprintf("%s %q", tt.verb, body), func(t *testing.T) {
				vs := newVolcanoServer(t, 1<<20, nil)
				vs.openSession(t, fixture(t, "onSessionOpen.json"))
				if got := string(vs.mustPost(t, tt.verb, body)); got != tt.want+"\n" {
					t.Errorf("answer %q, want %q", got, tt.want)
				}
			})
		}
	}
}

// TestVolcanoBadInput: every verb but onSessionOpen answers malformed input with a JSON
// error; onSessionOpen answers 200 {} whatever it gets.
func TestVolcanoBadInput(t *testing.T) {
	big := `{"task":{"Name":"` + strings.Repeat("x", 4096) + `"}}`
	type badCase struct {
		name       string
		body       string
		wantStatus int
		wantError  string
	}
	common := []badCase{
		{"truncated", `{"job":`, 400, "ends in the middle"},
		{"syntax error", `{nope}`, 400, "not valid JSON"},
		{"trailing data", `{} {}`, 400, "data after"},
		{"not an object", `[1,2]`, 400, "wrong type"},
		{"over the limit", big, 413, "larger than the limit of 2048 bytes"},
	}
	perVerb := map[string][]badCase{
		VerbPredicate:      {{"status as a string", `{"task":{"Status":"Running"}}`, 400, "wrong type"}},
		VerbPrioritize:     {{"nodes as an object", `{"nodes":{"Name":"n1"}}`, 400, "wrong type"}},
		VerbPreemptable:    {{"an evictee that is a number", `{"evictees":[7]}`, 400, "wrong type"}},
		VerbReclaimable:    {{"evictees as a string", `{"evictees":"all"}`, 400, "wrong type"}},
		VerbJobEnqueueable: {{"MinAvailable as a string", `{"job":{"MinAvailable":"3"}}`, 400, "wrong type"}},
		VerbJobReady:       {{"Tasks as a list", `{"job":{"Tasks":[]}}`, 400, "wrong type"}},
		VerbQueueOverused:  {{"Weight as a string", `{"queue":{"Weight":"x"}}`, 400, "wrong type"}},
		VerbOnSessionClose: {},
	}
	for verb, extra := range perVerb {
		for _, tt := range append(append([]badCase{}, common...), extra...) {
			t.Run(verb+" "+tt.name, func(t *testing.T) {
				vs := newVolcanoServer(t, 2048, nil)
				rec := vs.post(verb, tt.body)
				if rec.Code != tt.wantStatus {
					t.Fatalf("status %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
				}
				var got wire.ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
					t.Fatalf("error body is not JSON: %v: %s", err, rec.Body)
				}
				if !strings.Contains(got.Error, tt.wantError) {
					t.Errorf("error %q does not contain %q", got.Error, tt.wantError)
				}
			})
		}
	}
	for _, tt := range append(common, badCase{name: "binary", body: "\x00\xff\xfe"}, badCase{name: "wrong types", body: `{"Jobs":[1],"Nodes":"x"}`}) {
		t.Run("onSessionOpen "+tt.name, func(t *testing.T) {
			vs := newVolcanoServer(t, 2048, nil)
			if got := string(vs.mustPost(t, VerbOnSessionOpen, tt.body)); got != "{}\n" {
				t.Errorf("answer %q, want {}", got)
			}
		})
	}
	t.Run("wrong method", func(t *testing.T) {
		vs := newVolcanoServer(t, 2048, nil)
		rec := httptest.NewRecorder()
		vs.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/volcano/predicate", nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("status %d, want 405", rec.Code)
		}
	})
	t.Run("unknown verb", func(t *testing.T) {
		vs := newVolcanoServer(t, 2048, nil)
		if rec := vs.post("allocateFunc", `{}`); rec.Code != http.StatusNotFound {
			t.Errorf("status %d, want 404", rec.Code)
		}
	})
}

// TestVolcanoSessionLifecycle: the snapshot lives from onSessionOpen to onSessionClose (or
// its TTL); a garbage onSessionOpen drops the previous one. Without it, jobEnqueueable of
// the second job in line answers from its payload alone (permit).
func TestVolcanoSessionLifecycle(t *testing.T) {
	veto := fixture(t, "jobEnqueueable-veto.json")
	status := func(t *testing.T, vs *volcanoServer) int {
		t.Helper()
		var got EnqueueResult
		if err := json.Unmarshal(vs.mustPost(t, VerbJobEnqueueable, veto), &got); err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	vs := newVolcanoServer(t, 1<<20, func(c *config.Config) { c.Volcano.SessionTTL = metav1.Duration{Duration: time.Hour} })
	steps := []struct {
		name string
		do   func(t *testing.T)
		want int
	}{
		{"no session yet", func(*testing.T) {}, Permit},
		{"session open", func(t *testing.T) { vs.openSession(t, fixture(t, "onSessionOpen.json")) }, Reject},
		{"garbage open drops it", func(t *testing.T) { vs.openSession(t, `{"Jobs":`) }, Permit},
		{"reopened", func(t *testing.T) { vs.openSession(t, fixture(t, "onSessionOpen.json")) }, Reject},
		{"closed", func(t *testing.T) { vs.mustPost(t, VerbOnSessionClose, `{}`) }, Permit},
	}
	for _, st := range steps {
		st.do(t)
		if got := status(t, vs); got != st.want {
			t.Fatalf("%s: jobEnqueueable status %d, want %d", st.name, got, st.want)
		}
	}

	t.Run("expires after sessionTTL", func(t *testing.T) {
		clk := testingclock.NewFakePassiveClock(volcanoNow)
		vs := newVolcanoServerOn(t, clk, 1<<20, func(c *config.Config) { c.Volcano.SessionTTL = metav1.Duration{Duration: time.Hour} })
		vs.openSession(t, fixture(t, "onSessionOpen.json"))
		clk.SetTime(volcanoNow.Add(time.Hour - time.Second))
		if got := status(t, vs); got != Reject {
			t.Fatalf("fresh session: status %d, want %d", got, Reject)
		}
		clk.SetTime(volcanoNow.Add(time.Hour))
		if got := status(t, vs); got != Permit {
			t.Errorf("expired session: status %d, want %d", got, Permit)
		}
	})
}

// --- builders ---------------------------------------------------------------------------

// jobB builds a JobInfo: a Pending PodGroup in namespace ns.
type jobB struct{ j *JobInfo }

func newJob(ns, name string) jobB {
	return jobB{&JobInfo{
		UID: ns + "/" + name, Name: name, Namespace: ns, Tasks: map[string]*TaskInfo{},
		CreationTimestamp: metav1.NewTime(volcanoNow.Add(-time.Minute)),
		PodGroup: &PodGroup{
			Metadata: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}},
			Status:   PodGroupStatus{Phase: PodGroupPending},
		},
	}}
}

func (b jobB) user(u string) jobB    { b.j.PodGroup.Metadata.Labels["cps-extender.io/user"] = u; return b }
func (b jobB) priority(p int32) jobB { b.j.Priority = p; return b }
func (b jobB) min(n int32) jobB      { b.j.MinAvailable = n; return b }
func (b jobB) phase(p string) jobB   { b.j.PodGroup.Status.Phase = p; return b }
func (b jobB) age(d time.Duration) jobB {
	b.j.CreationTimestamp = metav1.NewTime(volcanoNow.Add(-d))
	return b
}

// needs sets the PodGroup's minResources, e.g. needs("cpu", "4", "memory", "8Gi").
func (b jobB) needs(kv ...string) jobB {
	b.j.PodGroup.Spec.MinResources = corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		b.j.PodGroup.Spec.MinResources[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return b
}

func (b jobB) tasks(ts ...*TaskInfo) jobB {
	for _, t := range ts {
		t.Job, t.Namespace, t.Pod.Namespace = b.j.UID, b.j.Namespace, b.j.Namespace
		b.j.Tasks[t.UID] = t
	}
	return b
}

func (b jobB) obj() *JobInfo { return b.j }

// taskB builds a pending TaskInfo whose role is in its pod's volcano.sh/task-spec
// annotation (the shape without TaskRole).
type taskB struct{ t *TaskInfo }

func newTask(name, role string) taskB {
	return taskB{&TaskInfo{
		UID: "uid-" + name, Name: name, Status: TaskPending, Resreq: &Resource{MilliCPU: 1000, Memory: 1 << 30},
		Pod: &PodObject{ObjectMeta: ObjectMeta{
			Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{gang.VolcanoTaskSpec: role},
			CreationTimestamp: metav1.NewTime(volcanoNow.Add(-time.Minute)), Labels: map[string]string{},
		}},
	}}
}

func (b taskB) on(node string, status int) taskB { b.t.NodeName, b.t.Status = node, status; return b }
func (b taskB) cpu(m float64) taskB              { b.t.Resreq.MilliCPU = m; return b }
func (b taskB) user(u string) taskB              { b.t.Pod.Labels["cps-extender.io/user"] = u; return b }
func (b taskB) job(uid string) taskB {
	ns, _, _ := strings.Cut(uid, "/")
	b.t.Job, b.t.Namespace, b.t.Pod.Namespace = uid, ns, ns
	return b
}
func (b taskB) urgent() taskB { b.t.Pod.Spec.PriorityClassName = "ml-urgent"; return b }

// ran places the task on n1, bound d before volcanoNow.
func (b taskB) ran(d time.Duration) taskB {
	b.t.NodeName, b.t.Status = "n1", TaskRunning
	b.t.Pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(volcanoNow.Add(-d))}}
	return b
}
func (b taskB) obj() *TaskInfo { return b.t }

// nodeB builds a ready NodeInfo with 8 cpu allocatable.
type nodeB struct{ n *NodeInfo }

func newNode(name, rack string) nodeB {
	return nodeB{&NodeInfo{
		NodeHead: NodeHead{
			Name: name,
			Node: &NodeObject{ObjectMeta: ObjectMeta{Name: name, Labels: map[string]string{
				"example.com/rack": rack, priority.ZoneLabel: "z1",
			}}},
			State:       NodeState{Phase: 1},
			Idle:        &Resource{MilliCPU: 8000, Memory: 32 << 30},
			Allocatable: &Resource{MilliCPU: 8000, Memory: 32 << 30},
		},
		Tasks: map[string]*TaskInfo{},
	}}
}

func (b nodeB) idle(cpuMilli float64) nodeB { b.n.Idle.MilliCPU = cpuMilli; return b }
func (b nodeB) scalar(name string, idle, alloc float64) nodeB {
	b.n.Idle.ScalarResources = map[string]float64{name: idle}
	b.n.Allocatable.ScalarResources = map[string]float64{name: alloc}
	return b
}
func (b nodeB) notReady() nodeB {
	b.n.State = NodeState{Phase: NodeNotReady, Reason: "NotReady"}
	return b
}
func (b nodeB) cordoned() nodeB { b.n.Node.Spec.Unschedulable = true; return b }
func (b nodeB) running(ts ...*TaskInfo) nodeB {
	for _, t := range ts {
		b.n.Tasks[t.UID] = t
	}
	return b
}
func (b nodeB) obj() *NodeInfo { return b.n }

// sessionBody marshals an onSessionOpen body. The project's structs have no json tags, so
// they marshal with Go field names, as Volcano's do.
func sessionBody(t *testing.T, jobs []*JobInfo, nodes []*NodeInfo) string {
	t.Helper()
	body := struct {
		Jobs   map[string]*JobInfo
		Nodes  map[string]*NodeInfo
		Queues map[string]*QueueInfo
	}{map[string]*JobInfo{}, map[string]*NodeInfo{}, map[string]*QueueInfo{"default": {UID: "default", Name: "default", Weight: 1}}}
	for _, j := range jobs {
		body.Jobs[j.UID] = j
	}
	for _, n := range nodes {
		body.Nodes[n.Name] = n
	}
	return mustJSON(t, body)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// enqueueStatuses asks jobEnqueueable for each job, in the order given, and returns the votes.
func enqueueStatuses(t *testing.T, vs *volcanoServer, jobs ...*JobInfo) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, j := range jobs {
		var got EnqueueResult
		if err := json.Unmarshal(vs.mustPost(t, VerbJobEnqueueable, mustJSON(t, map[string]any{"job": j})), &got); err != nil {
			t.Fatal(err)
		}
		out[j.UID] = got.Status
	}
	return out
}

// TestVolcanoEnqueueScenario: three jobs of different users and priorities, created in the
// reverse of their combined-priority order, are enqueued in P order: while idle resources
// are short only those that fit together with every job ahead are permitted, and all are
// once enough is idle. The answers do not depend on the order Volcano asks in.
func TestVolcanoEnqueueScenario(t *testing.T) {
	jobs := func() (high, mid, low *JobInfo) {
		low = newJob("lab", "low").user("carol").priority(0).min(2).age(20*time.Minute).needs("cpu", "4").obj()
		mid = newJob("lab", "mid").user("bob").priority(500000).min(2).age(10*time.Minute).needs("cpu", "4").obj()
		high = newJob("lab", "high").user("alice").priority(1000000).min(2).age(5*time.Minute).needs("cpu", "4").obj()
		return high, mid, low
	}
	tests := []struct {
		name  string
		idle  []float64 // per node, millicores
		edit  func(high, mid, low *JobInfo)
		wantH int
		wantM int
		wantL int
	}{
		{"4 cpu idle: only the highest", []float64{4000}, nil, 1, -1, -1},
		{"8 cpu idle: the two highest", []float64{4000, 4000}, nil, 1, 1, -1},
		{"16 cpu idle: not short, all", []float64{8000, 8000}, nil, 1, 1, 1},
		{"3 cpu idle: none, not even the head", []float64{3000}, nil, -1, -1, -1},
		{"8 cpu idle, the highest already Inqueue reserves its 4", []float64{8000},
			func(high, _, _ *JobInfo) { high.PodGroup.Status.Phase = PodGroupInqueue }, 1, 1, -1},
		{"an urgent low job passes the middle one", []float64{4000, 4000},
			func(_, _, low *JobInfo) { low.PodGroup.Spec.PriorityClassName = "ml-urgent" }, 1, -1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			high, mid, low := jobs()
			if tt.edit != nil {
				tt.edit(high, mid, low)
			}
			var nodes []*NodeInfo
			for i, idle := range tt.idle {
				nodes = append(nodes, newNode(fmt.Sprintf("n%d", i), "r1").idle(idle).obj())
			}
			vs := newVolcanoServer(t, 1<<20, nil)
			vs.openSession(t, sessionBody(t, []*JobInfo{low, mid, high}, nodes))
			want := map[string]int{high.UID: tt.wantH, mid.UID: tt.wantM, low.UID: tt.wantL}
			// Volcano asks for pending jobs only; the Inqueue one is asked anyway, to show
			// that a job the snapshot holds as Inqueue is judged as pending when asked.
			for _, order := range [][]*JobInfo{{low, mid, high}, {high, mid, low}} {
				if diff := cmp.Diff(want, enqueueStatuses(t, vs, order...)); diff != "" {
					t.Errorf("votes (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestVolcanoEnqueueRule pins the parts of the enqueue rule one by one.
func TestVolcanoEnqueueRule(t *testing.T) {
	head := func() jobB { return newJob("ns", "head").user("alice").priority(1000000).min(1) }
	next := func() jobB { return newJob("ns", "next").user("carol").priority(0).min(1) }
	tests := []struct {
		name  string
		jobs  []*JobInfo
		nodes []*NodeInfo
		ask   string
		want  int
	}{
		{
			name:  "a job too big for the whole cluster holds nobody back",
			jobs:  []*JobInfo{head().needs("cpu", "64").obj(), next().needs("cpu", "2").obj()},
			nodes: []*NodeInfo{newNode("n1", "r1").obj()},
			ask:   "ns/next", want: Permit,
		},
		{
			name:  "the too big job itself is vetoed",
			jobs:  []*JobInfo{head().needs("cpu", "64").obj()},
			nodes: []*NodeInfo{newNode("n1", "r1").obj()},
			ask:   "ns/head", want: Reject,
		},
		{
			name:  "NotReady and cordoned nodes do not count",
			jobs:  []*JobInfo{head().needs("cpu", "10").obj()},
			nodes: []*NodeInfo{newNode("n1", "r1").obj(), newNode("n2", "r1").notReady().obj(), newNode("n3", "r1").cordoned().obj()},
			ask:   "ns/head", want: Reject,
		},
		{
			name: "without minResources the first MinAvailable tasks count, PS first",
			jobs: []*JobInfo{
				head().min(2).tasks(newTask("w1", "worker").cpu(6000).obj(), newTask("ps0", "ps").cpu(1000).obj(), newTask("w0", "worker").cpu(1000).obj()).obj(),
				next().needs("cpu", "1").obj(),
			},
			nodes: []*NodeInfo{newNode("n1", "r1").idle(3000).obj()},
			// head needs ps0 + w0 (workers of unknown index go by name) = 2000m, not w1's 6000m
			ask: "ns/next", want: Permit,
		},
		{
			name:  "a resource no node reports is not compared",
			jobs:  []*JobInfo{head().needs("cpu", "1", "ephemeral-storage", "100Gi").obj()},
			nodes: []*NodeInfo{newNode("n1", "r1").obj()},
			ask:   "ns/head", want: Permit,
		},
		{
			name:  "a scalar resource the nodes report is compared",
			jobs:  []*JobInfo{head().needs("cpu", "1", "nvidia.com/gpu", "2").obj()},
			nodes: []*NodeInfo{newNode("n1", "r1").scalar("nvidia.com/gpu", 1000, 2000).obj()},
			ask:   "ns/head", want: Reject,
		},
		{
			name: "a session without nodes has nothing to compare",
			jobs: []*JobInfo{head().needs("cpu", "1").obj()},
			ask:  "ns/head", want: Permit,
		},
		{
			name:  "a job of unknown size takes nothing",
			jobs:  []*JobInfo{head().obj(), next().needs("cpu", "8").obj()},
			nodes: []*NodeInfo{newNode("n1", "r1").obj()},
			ask:   "ns/next", want: Permit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := newVolcanoServer(t, 1<<20, nil)
			vs.openSession(t, sessionBody(t, tt.jobs, tt.nodes))
			var asked *JobInfo
			for _, j := range tt.jobs {
				if j.UID == tt.ask {
					asked = j
				}
			}
			if got := enqueueStatuses(t, vs, asked)[tt.ask]; got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
		})
	}
}

// TestVolcanoEnqueueReasonInAccessLog pins the reason a veto is logged with.
func TestVolcanoEnqueueReasonInAccessLog(t *testing.T) {
	vs := newVolcanoServer(t, 1<<20, nil)
	vs.openSession(t, fixture(t, "onSessionOpen.json"))
	vs.mustPost(t, VerbJobEnqueueable, fixture(t, "jobEnqueueable-veto.json"))
	vs.mustPost(t, VerbJobEnqueueable, fixture(t, "jobEnqueueable.json"))
	entries := vs.logs.FilterMessage("request").All()
	var got []map[string]any
	for _, e := range entries[1:] {
		f := e.ContextMap()
		got = append(got, map[string]any{"path": f["path"], "pod": f["pod"], "decision": f["decision"]})
	}
	want := []map[string]any{
		{"path": "/volcano/jobEnqueueable", "pod": "research/eval-c", "decision": "reject: job research/eval-c may not enqueue yet: " +
			"2nd of 2 pending (P=0.18: user 0.30, job 0.00, wait 0.18, parallelism 0.26), behind ml/train-b (P=0.40); " +
			"short of cpu: 14000m needed with the jobs ahead, 8000m free"},
		{"path": "/volcano/jobEnqueueable", "pod": "ml/train-b", "decision": "permit: job ml/train-b may enqueue: " +
			"1st of 2 pending (P=0.40: user 0.60, job 0.10, wait 0.63, parallelism 0.33); " +
			"with the jobs ahead it needs cpu 6000m of 8000m, memory 12Gi of 68Gi free"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("access log (-want +got):\n%s", diff)
	}
	if f := entries[0].ContextMap(); f["decision"] != "session kept: 5 jobs, 4 nodes, 2 queues" {
		t.Errorf("onSessionOpen decision %q", f["decision"])
	}
}

// TestVolcanoPrioritizeFavoursPSNode: a worker's prioritize puts its PS's node first, whether
// the PS is known from the session snapshot or only from the nodes' task lists (allocated
// earlier in the same session).
func TestVolcanoPrioritizeFavoursPSNode(t *testing.T) {
	const job = "ml/j"
	ps := func() *TaskInfo { return newTask("j-ps-0", "ps").job(job).on("n2", TaskRunning).obj() }
	worker := func() *TaskInfo { return newTask("j-worker-0", "worker").job(job).obj() }
	nodes := func(withPS bool) []*NodeInfo {
		n2 := newNode("n2", "r1")
		if withPS {
			n2.running(ps())
		}
		return []*NodeInfo{newNode("n1", "r1").obj(), n2.obj(), newNode("n3", "r2").obj()}
	}
	want := map[string]float64{"n1": 60, "n2": 100, "n3": 30}
	tests := []struct {
		name        string
		session     bool
		nodesWithPS bool
		want        map[string]float64
	}{
		{"PS in the snapshot, nodes without tasks", true, false, want},
		{"PS only on the node's task list, no snapshot", false, true, want},
		{"both", true, true, want},
		{"nothing placed: no preference", false, false, map[string]float64{"n1": 0, "n2": 0, "n3": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := newVolcanoServer(t, 1<<20, nil)
			if tt.session {
				j := newJob("ml", "j").min(2).phase(PodGroupInqueue).tasks(ps(), worker()).obj()
				vs.openSession(t, sessionBody(t, []*JobInfo{j}, nodes(false)))
			}
			body := mustJSON(t, map[string]any{"task": worker(), "nodes": nodes(tt.nodesWithPS)})
			got := decodeAs(t, PrioritizeResult{}, vs.mustPost(t, VerbPrioritize, body))
			if diff := cmp.Diff(PrioritizeResult{NodeScore: tt.want}, got); diff != "" {
				t.Errorf("prioritize (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVolcanoPrioritizeFollowsThePlan: with nothing of the job placed yet, prioritize still
// agrees for every task on where the job goes: the session's placement plan keeps the whole
// gang in the one rack that holds it, each PS on its own node, each worker beside its PS.
func TestVolcanoPrioritizeFollowsThePlan(t *testing.T) {
	const job = "ml/j"
	var tasks []*TaskInfo
	for i := range 2 {
		tasks = append(tasks, newTask(fmt.Sprintf("j-ps-%d", i), "ps").job(job).obj())
	}
	for i := range 4 {
		tasks = append(tasks, newTask(fmt.Sprintf("j-worker-%d", i), "worker").job(job).obj())
	}
	// r1 has 4 cpu left in all, r2 16: only r2 holds the 6 cpu gang.
	nodes := []*NodeInfo{newNode("n1", "r1").idle(2000).obj(), newNode("n2", "r1").idle(2000).obj(),
		newNode("n3", "r2").obj(), newNode("n4", "r2").obj()}
	vs := newVolcanoServer(t, 1<<20, func(c *config.Config) {
		c.Affinity.Topology = []string{"example.com/rack", priority.ZoneLabel}
	})
	vs.openSession(t, sessionBody(t, []*JobInfo{newJob("ml", "j").min(6).phase(PodGroupInqueue).tasks(tasks...).obj()}, nodes))
	top := map[string]string{}
	for _, task := range tasks {
		body := mustJSON(t, map[string]any{"task": task, "nodes": nodes})
		got := decodeAs(t, PrioritizeResult{}, vs.mustPost(t, VerbPrioritize, body)).(PrioritizeResult)
		best := ""
		for node, score := range got.NodeScore {
			if score == 100 {
				if best != "" {
					t.Fatalf("%s: two nodes score 100: %v", task.Name, got.NodeScore)
				}
				best = node
			}
		}
		if best != "n3" && best != "n4" {
			t.Errorf("%s: scores %v, want the plan's node in r2 (n3 or n4) at 100", task.Name, got.NodeScore)
		}
		top[task.Name] = best
	}
	if top["j-ps-0"] == top["j-ps-1"] {
		t.Errorf("both PS planned on %s; PS are kept apart", top["j-ps-0"])
	}
	for i := range 4 {
		if ps := top[fmt.Sprintf("j-ps-%d", i/2)]; top[fmt.Sprintf("j-worker-%d", i)] != ps {
			t.Errorf("worker %d planned on %s, its PS (ps-%d) on %s", i, top[fmt.Sprintf("j-worker-%d", i)], i/2, ps)
		}
	}
}

// TestVolcanoPredicate covers hard PS anti-affinity and every way to pass.
func TestVolcanoPredicate(t *testing.T) {
	const job = "ml/j"
	const reason = "node n1 already hosts ps ml/j-ps-0 of job ml/j (hard PS anti-affinity)"
	ps0 := func(status int) *TaskInfo { return newTask("j-ps-0", "ps").job(job).on("n1", status).obj() }
	ps1 := newTask("j-ps-1", "ps").job(job).obj()
	fail := PredicateResult{Status: reason, Code: PredicateUnschedulableAndUnresolvable}
	tests := []struct {
		name     string
		mode     priority.AntiAffinityMode
		session  []*TaskInfo // the job's tasks in the snapshot; nil: no snapshot
		task     *TaskInfo
		nodeTask *TaskInfo // on the node in the request
		want     PredicateResult
	}{
		{"hard: sibling PS on the node's task list", priority.AntiAffinityHard, nil, ps1, ps0(TaskRunning), fail},
		{"hard: sibling PS allocated in this session", priority.AntiAffinityHard, nil, ps1, ps0(TaskAllocated), fail},
		{"hard: sibling PS known from the snapshot only", priority.AntiAffinityHard, []*TaskInfo{ps0(TaskBound)}, ps1, nil, fail},
		{"hard: a releasing sibling PS does not count", priority.AntiAffinityHard, nil, ps1, ps0(TaskReleasing), PredicateResult{}},
		{"hard: a worker is never rejected", priority.AntiAffinityHard, nil, newTask("j-w-0", "worker").job(job).obj(), ps0(TaskRunning), PredicateResult{}},
		{"hard: another job's PS does not count", priority.AntiAffinityHard, nil, ps1, newTask("k-ps-0", "ps").job("ml/k").on("n1", TaskRunning).obj(), PredicateResult{}},
		{"soft: always passes", priority.AntiAffinitySoft, nil, ps1, ps0(TaskRunning), PredicateResult{}},
		{"off: always passes", priority.AntiAffinityOff, nil, ps1, ps0(TaskRunning), PredicateResult{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := newVolcanoServer(t, 1<<20, func(c *config.Config) { c.Affinity.PSAntiAffinity = tt.mode })
			if tt.session != nil {
				j := newJob("ml", "j").min(2).phase(PodGroupInqueue).tasks(tt.session...).obj()
				vs.openSession(t, sessionBody(t, []*JobInfo{j}, []*NodeInfo{newNode("n1", "r1").obj()}))
			}
			node := newNode("n1", "r1")
			if tt.nodeTask != nil {
				node.running(tt.nodeTask)
			}
			body := mustJSON(t, map[string]any{"task": tt.task, "node": node.obj()})
			got := decodeAs(t, PredicateResult{}, vs.mustPost(t, VerbPredicate, body))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("predicate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVolcanoEvict covers preemptable and reclaimable: the queue's preemption rule decides
// which evictees may go (echoed whole, with a permit), and an evictor's job that may not
// preempt, or evictees none of which may go, get a reject.
func TestVolcanoEvict(t *testing.T) {
	alice := func(name string) taskB { return newTask(name, "worker").job("ml/a").user("alice") }
	carol := func(name, job string) taskB { return newTask(name, "worker").job(job).user("carol") }
	urgentAlice := alice("a-1").urgent().obj()
	ranHour := carol("c-1", "lab/c").ran(time.Hour).obj()
	raw := func(t *testing.T, ts ...*TaskInfo) []json.RawMessage {
		out := []json.RawMessage{}
		for _, x := range ts {
			out = append(out, json.RawMessage(mustJSON(t, x)))
		}
		return out
	}
	mode := func(m string) func(*config.Config) {
		return func(c *config.Config) { c.Model.Preemption = config.PreemptionSetting(m) }
	}
	none := []json.RawMessage{}
	tests := []struct {
		name  string
		edit  func(*config.Config)
		build func(t *testing.T) (string, EvictResult)
	}{
		{name: "an urgent evictor: every job that is not urgent may go, also one that has just started", build: func(t *testing.T) (string, EvictResult) {
			young := carol("d-1", "lab/d").ran(5 * time.Minute).obj()
			return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": []any{ranHour, young}}),
				EvictResult{Status: Permit, Victims: raw(t, ranHour, young)}
		}},
		{name: "an urgent evictor: urgentMinRunTime shields the young job", edit: func(c *config.Config) { c.Model.UrgentMinRunTime.Duration = 10 * time.Minute },
			build: func(t *testing.T) (string, EvictResult) {
				young := carol("d-1", "lab/d").ran(5 * time.Minute).obj()
				return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": []any{ranHour, young}}),
					EvictResult{Status: Permit, Victims: raw(t, ranHour)}
			}},
		{name: "an urgent evictor never evicts an urgent job of about its P (gold too)", build: func(t *testing.T) (string, EvictResult) {
			urgentGold := newTask("u-1", "worker").job("lab/u").user("alice").urgent().ran(time.Hour).obj()
			return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": []any{urgentGold}}),
				EvictResult{Status: Reject, Victims: none}
		}},
		{name: "the urgent label in a namespace not allowed: not urgent, preempts nobody", build: func(t *testing.T) (string, EvictResult) {
			labelled := alice("a-1").obj()
			labelled.Pod.Labels["cps-extender.io/urgent"] = "true"
			return mustJSON(t, map[string]any{"evictor": labelled, "evictees": []any{ranHour}}),
				EvictResult{Status: Reject, Victims: none}
		}},
		{name: "the urgent label in a namespace of gang.urgentLabelNamespaces: urgent", edit: func(c *config.Config) { c.Gang.UrgentLabelNamespaces = []string{"ml"} },
			build: func(t *testing.T) (string, EvictResult) {
				labelled := alice("a-1").obj()
				labelled.Pod.Labels["cps-extender.io/urgent"] = "true"
				return mustJSON(t, map[string]any{"evictor": labelled, "evictees": []any{ranHour}}),
					EvictResult{Status: Permit, Victims: raw(t, ranHour)}
			}},
		{name: "under urgent, a job that is not urgent preempts nobody", build: func(t *testing.T) (string, EvictResult) {
			return mustJSON(t, map[string]any{"evictor": alice("a-1").obj(), "evictees": []any{ranHour}}),
				EvictResult{Status: Reject, Victims: none}
		}},
		{name: "preemption off", edit: mode("off"), build: func(t *testing.T) (string, EvictResult) {
			return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": []any{ranHour}}),
				EvictResult{Status: Reject, Victims: none}
		}},
		{name: "under priority, any job, but never over a higher job", edit: mode("priority"), build: func(t *testing.T) (string, EvictResult) {
			return mustJSON(t, map[string]any{"evictor": carol("c-9", "lab/e").obj(), "evictees": []any{alice("a-2").ran(time.Hour).obj()}}),
				EvictResult{Status: Reject, Victims: none}
		}},
		{name: "under priority, never a job of about the same P", edit: mode("priority"), build: func(t *testing.T) (string, EvictResult) {
			return mustJSON(t, map[string]any{"evictor": carol("c-9", "lab/e").obj(), "evictees": []any{ranHour}}),
				EvictResult{Status: Reject, Victims: none}
		}},
		{name: "under priority, a gold job over a bronze one", edit: mode("priority"), build: func(t *testing.T) (string, EvictResult) {
			return mustJSON(t, map[string]any{"evictor": alice("a-1").obj(), "evictees": []any{ranHour}}),
				EvictResult{Status: Permit, Victims: raw(t, ranHour)}
		}},
		{name: "never a task in an exempt namespace", build: func(t *testing.T) (string, EvictResult) {
			sys := newTask("s-1", "worker").job("kube-system/s").ran(time.Hour).obj()
			return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": []any{sys}}),
				EvictResult{Status: Reject, Victims: none}
		}},
		{name: "never a task in no job, also one whose name is the evictor's job's", build: func(t *testing.T) (string, EvictResult) {
			loose := newTask("a", "worker").ran(time.Hour).obj() // ml/a, as the evictor's job
			loose.Namespace, loose.Pod.Namespace = "ml", "ml"
			return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": []any{loose}}),
				EvictResult{Status: Reject, Victims: none}
		}},
		{name: "the evictor's own job's tasks go", build: func(t *testing.T) (string, EvictResult) {
			own := alice("a-2").obj()
			return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": []any{own}}),
				EvictResult{Status: Permit, Victims: raw(t, own)}
		}},
		{name: "null elements are dropped", build: func(t *testing.T) (string, EvictResult) {
			return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": []any{nil, ranHour, nil}}),
				EvictResult{Status: Permit, Victims: raw(t, ranHour)}
		}},
		{name: "no evictor: abstain, echoed", build: func(t *testing.T) (string, EvictResult) {
			return mustJSON(t, map[string]any{"evictees": []any{alice("a-1").obj()}}),
				EvictResult{Status: Abstain, Victims: raw(t, alice("a-1").obj())}
		}},
		{name: "null evictees", build: func(t *testing.T) (string, EvictResult) {
			return mustJSON(t, map[string]any{"evictor": urgentAlice, "evictees": nil}),
				EvictResult{Status: Abstain, Victims: none}
		}},
		{name: "unknown fields of an evictee are echoed too", build: func(t *testing.T) (string, EvictResult) {
			e := `{"UID":"x-1","Job":"lab/c","Name":"x-1","Namespace":"lab","NodeName":"n1","Status":32,` +
				`"Pod":{"metadata":{"name":"x-1","namespace":"lab"},"status":{"conditions":[` +
				`{"type":"PodScheduled","status":"True","lastTransitionTime":"2025-03-01T10:00:00Z"}]}},` +
				`"NumaInfo":{"Policies":{"cpu":"none"}},"Custom":[1,2]}`
			return `{"evictor":` + mustJSON(t, urgentAlice) + `,"evictees":[` + e + `]}`,
				EvictResult{Status: Permit, Victims: []json.RawMessage{json.RawMessage(e)}}
		}},
	}
	for _, verb := range []string{VerbPreemptable, VerbReclaimable} {
		for _, tt := range tests {
			t.Run(verb+" "+tt.name, func(t *testing.T) {
				edit := tt.edit
				if edit == nil {
					edit = mode("urgent") // the default; the fixtures' config.yaml says priority
				}
				vs := newVolcanoServer(t, 1<<20, edit)
				body, want := tt.build(t)
				got := decodeAs(t, want, vs.mustPost(t, verb, body))
				if diff := cmp.Diff(want, got, sameJSON); diff != "" {
					t.Errorf("%s (-want +got):\n%s", verb, diff)
				}
			})
		}
	}
	t.Run("the snapshot's JobInfo decides", func(t *testing.T) {
		// Without a session the victim's job is what its task says: bronze, not urgent. The
		// snapshot says its job is urgent too: about the evictor's P, so no victim.
		vs := newVolcanoServer(t, 1<<20, mode("urgent"))
		victim := carol("v-1", "lab/v").ran(time.Hour).obj()
		evictor := carol("e-1", "lab/e").urgent().obj()
		body := mustJSON(t, map[string]any{"evictor": evictor, "evictees": []any{victim}})
		if got := decodeAs(t, EvictResult{}, vs.mustPost(t, VerbPreemptable, body)).(EvictResult); got.Status != Permit {
			t.Fatalf("without a session: status %d, want permit", got.Status)
		}
		vj := newJob("lab", "v").user("carol").min(1).phase("Running").tasks(victim).obj()
		vj.PodGroup.Spec.PriorityClassName = "ml-urgent"
		vs.openSession(t, sessionBody(t, []*JobInfo{vj}, nil))
		if got := decodeAs(t, EvictResult{}, vs.mustPost(t, VerbPreemptable, body)).(EvictResult); got.Status != Reject {
			t.Errorf("with the session: status %d, want reject", got.Status)
		}
	})
}

// TestVolcanoJobReady counts the placed tasks against MinAvailable.
func TestVolcanoJobReady(t *testing.T) {
	task := func(name string, status int) *TaskInfo { return newTask(name, "worker").on("n1", status).obj() }
	tests := []struct {
		name  string
		min   int32
		tasks []*TaskInfo
		want  bool
	}{
		{"running and allocated reach the minimum", 2, []*TaskInfo{task("a", TaskRunning), task("b", TaskAllocated), task("c", TaskPending)}, true},
		{"pipelined, binding and bound count", 3, []*TaskInfo{task("a", TaskPipelined), task("b", TaskBinding), task("c", TaskBound)}, true},
		{"releasing, succeeded and pending do not", 2, []*TaskInfo{task("a", TaskRunning), task("b", TaskReleasing), task("c", TaskSucceeded), task("d", TaskPending)}, false},
		{"no tasks yet", 3, nil, false},
		{"minimum 0", 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := newVolcanoServer(t, 1<<20, nil)
			j := newJob("ml", "j").min(tt.min).phase("Running").tasks(tt.tasks...).obj()
			got := decodeAs(t, JobReadyResult{}, vs.mustPost(t, VerbJobReady, mustJSON(t, map[string]any{"job": j})))
			if diff := cmp.Diff(JobReadyResult{Status: tt.want}, got); diff != "" {
				t.Errorf("jobReady (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVolcanoTaskRole: the role comes from TaskRole when Volcano sends it (v1.12+), else from
// the pod.
func TestVolcanoTaskRole(t *testing.T) {
	gangCfg := config.DefaultConfig().Gang
	pod := func(labels, annotations map[string]string) *PodObject {
		return &PodObject{ObjectMeta: ObjectMeta{Labels: labels, Annotations: annotations}}
	}
	tests := []struct {
		name string
		task TaskInfo
		want priority.Role
	}{
		{"TaskRole", TaskInfo{TaskRole: "ps", Pod: pod(nil, map[string]string{gang.VolcanoTaskSpec: "worker"})}, priority.RolePS},
		{"task-spec annotation", TaskInfo{Pod: pod(nil, map[string]string{gang.VolcanoTaskSpec: "ps"})}, priority.RolePS},
		{"task-spec label", TaskInfo{Pod: pod(map[string]string{gang.VolcanoTaskSpec: "chief"}, nil)}, priority.RoleChief},
		{"Kubeflow replica type", TaskInfo{Pod: pod(map[string]string{gang.KubeflowReplicaType: "PS"}, nil)}, priority.RolePS},
		{"the project's role label", TaskInfo{Pod: pod(map[string]string{"cps-extender.io/role": "evaluator"}, nil)}, priority.RoleEvaluator},
		{"no pod", TaskInfo{}, priority.RoleOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := volcanoRole(gangCfg, &tt.task); got != tt.want {
				t.Errorf("role %v, want %v", got, tt.want)
			}
		})
	}
}

// TestVolcanoConcurrentCalls runs predicates, prioritizes and enqueue votes while sessions
// open and close, for the race detector.
func TestVolcanoConcurrentCalls(t *testing.T) {
	vs := newVolcanoServer(t, 1<<20, nil)
	session := fixture(t, "onSessionOpen.json")
	calls := []struct{ verb, body string }{
		{VerbPredicate, fixture(t, "predicate.json")},
		{VerbPrioritize, fixture(t, "prioritize.json")},
		{VerbJobEnqueueable, fixture(t, "jobEnqueueable-veto.json")},
		{VerbJobEnqueueable, fixture(t, "jobEnqueueable.json")},
		{VerbPreemptable, fixture(t, "preemptable.json")},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				for _, c := range calls {
					if rec := vs.post(c.verb, c.body); rec.Code != http.StatusOK {
						errs <- fmt.Sprintf("%s: %d %s", c.verb, rec.Code, rec.Body)
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 10; i++ {
			vs.post(VerbOnSessionOpen, session)
			vs.post(VerbOnSessionClose, `{}`)
		}
	}()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestVolcanoVerbsChecksItsConfig: the constructor lists every problem.
func TestVolcanoVerbsChecksItsConfig(t *testing.T) {
	def := config.DefaultConfig()
	t.Run("constructor lists every problem", func(t *testing.T) {
		bad := priority.DefaultModel()
		bad.Tau = 0
		_, err := New(nil, config.VolcanoConfig{}, bad, priority.Affinity{PSAntiAffinity: "Hard"}, def.Gang, nil)
		for _, want := range []string{"log is required", "volcano.urlPrefix", "volcano.sessionTTL", "model.tau", "affinity.psAntiAffinity"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v does not name %q", err, want)
			}
		}
	})
	t.Run("server refuses the kube-scheduler prefix", func(t *testing.T) {
		log := zap.NewNop()
		v, err := New(log, config.VolcanoConfig{URLPrefix: "/scheduler", SessionTTL: metav1.Duration{Duration: time.Second}}, def.Model.PriorityModel(), def.Affinity, def.Gang, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := server.New(server.Options{Access: server.OpenAccess, Log: log, MaxRequestBytes: 1024, Ready: readyFlag(true), Routes: slices.Concat(viewRoutes("/scheduler"), v.Routes())}); err == nil {
			t.Error("NewServer accepted the same prefix twice")
		}
	})
}

// TestVolcanoNotReady: the Volcano verbs answer before the cluster view has synced (they
// need no informers); the kube-scheduler verbs do not.
func TestVolcanoNotReady(t *testing.T) {
	log := zap.NewNop()
	def := config.DefaultConfig()
	v, err := New(log, def.Volcano, def.Model.PriorityModel(), def.Affinity, def.Gang, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Access: server.OpenAccess, Log: log, MaxRequestBytes: 1024, Ready: readyFlag(false), Routes: slices.Concat(viewRoutes("/scheduler"), v.Routes())})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"/volcano/onSessionOpen":  http.StatusOK, // Volcano's path needs no informers
		"/volcano/jobEnqueueable": http.StatusOK,
		"/scheduler/filter":       http.StatusServiceUnavailable,
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{}`)))
		if rec.Code != want {
			t.Errorf("%s: status %d, want %d", path, rec.Code, want)
		}
	}
}

// FuzzVolcano drives every Volcano verb with arbitrary bodies, with the fixtures' session
// open: the answer is 200, or 400/413 with a JSON error, never a panic (which the router
// would turn into a 500). The session verbs go to a second server, so the session under the
// other verbs stays the fixtures'.
//
//	go test -run '^$' -fuzz FuzzVolcano -fuzztime 60s -parallel 1 ./extender/
func FuzzVolcano(f *testing.F) {
	verbs := []string{VerbPredicate, VerbPrioritize, VerbPreemptable, VerbReclaimable,
		VerbQueueOverused, VerbJobEnqueueable, VerbJobReady, VerbOnSessionOpen, VerbOnSessionClose}
	seeds := map[string]string{
		VerbPredicate: "predicate.json", VerbPrioritize: "prioritize.json", VerbPreemptable: "preemptable.json",
		VerbReclaimable: "reclaimable.json", VerbQueueOverused: "queueOverused.json",
		VerbJobEnqueueable: "jobEnqueueable.json", VerbJobReady: "jobReady-not-ready.json",
		VerbOnSessionClose: "onSessionClose.json",
	}
	for i, verb := range verbs {
		if name, ok := seeds[verb]; ok {
			b, err := os.ReadFile(filepath.Join(volcanoFixtures, name))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), b)
		}
		f.Add(uint8(i), []byte(`{"task":{"Status":1023,"Job":"ml/train-a","TaskRole":"ps","Resreq":{"MilliCPU":1e300,"Memory":-1}},"nodes":[null,{"Name":""}],"evictees":[null,{}],"job":{"MinAvailable":-5,"TaskMinAvailable":{"a":2147483647,"b":2147483647}}}`))
	}
	srv, _ := buildVolcanoServer(f, zap.NewNop(), testingclock.NewFakePassiveClock(volcanoNow), 1<<20, nil)
	sessionSrv, _ := buildVolcanoServer(f, zap.NewNop(), testingclock.NewFakePassiveClock(volcanoNow), 1<<20, nil)
	vs, session := &volcanoServer{srv: srv}, &volcanoServer{srv: sessionSrv}
	body, err := os.ReadFile(filepath.Join(volcanoFixtures, "onSessionOpen.json"))
	if err != nil {
		f.Fatal(err)
	}
	if rec := vs.post(VerbOnSessionOpen, string(body)); rec.Code != http.StatusOK {
		f.Fatalf("onSessionOpen: %d", rec.Code)
	}
	f.Fuzz(func(t *testing.T, verb uint8, body []byte) {
		v := verbs[int(verb)%len(verbs)]
		target := vs
		if v == VerbOnSessionOpen || v == VerbOnSessionClose {
			target = session
		}
		rec := target.post(v, string(body))
		switch rec.Code {
		case http.StatusOK:
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s: 200 with invalid JSON %q", v, rec.Body)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var e wire.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%s: %d without a JSON error: %q", v, rec.Code, rec.Body)
			}
			if v == VerbOnSessionOpen {
				t.Fatalf("onSessionOpen answered %d", rec.Code)
			}
		default:
			t.Fatalf("%s: status %d: %s", v, rec.Code, rec.Body)
		}
	})
}

type readyFlag bool

func (r readyFlag) Ready() bool { return bool(r) }

// viewRoutes stand in for the kube-scheduler verbs under prefix: routes that need the
// cluster view, answering {}.
func viewRoutes(prefix string) []wire.Route {
	answer := func(w http.ResponseWriter, _ *http.Request, _ wire.Call) wire.Note {
		wire.WriteJSON(w, http.StatusOK, struct{}{})
		return wire.Note{}
	}
	return []wire.Route{
		{Path: prefix + "/filter", Verb: "filter", Handler: answer, NeedsView: true},
		{Path: prefix + "/prioritize", Verb: "prioritize", Handler: answer, NeedsView: true},
	}
}

// TestVolcanoLargeBodiesOneAtATime: a body of bigBody bytes or more is decoded and answered
// only while no other such body is; a small one never waits, and a caller that goes away
// while it waits gets a 503 JSON error, not an answer. onSessionOpen still answers 200 {}.
func TestVolcanoLargeBodiesOneAtATime(t *testing.T) {
	vs := newVolcanoServer(t, 4*bigBody, nil)
	large := `{"task":{"Name":"` + strings.Repeat("x", bigBody) + `"},"nodes":[]}`
	post := func(ctx context.Context, verb, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/volcano/"+verb, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		vs.srv.ServeHTTP(rec, req)
		return rec
	}

	vs.verbs.big <- struct{}{} // another large body is being answered
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if rec := post(ctx, VerbPrioritize, large); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "waited for another large Volcano body") {
		t.Fatalf("a large body while another is answered, its caller gone: status %d, body %.200s; want 503", rec.Code, rec.Body)
	}
	unsized := httptest.NewRequestWithContext(ctx, http.MethodPost, "/volcano/"+VerbPrioritize, strings.NewReader(large))
	unsized.ContentLength = -1 // chunked: it waits once read
	rec := httptest.NewRecorder()
	vs.srv.ServeHTTP(rec, unsized)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a large body of unknown length while another is answered, its caller gone: status %d, body %.200s; want 503", rec.Code, rec.Body)
	}
	if rec := post(ctx, VerbOnSessionOpen, large); rec.Code != http.StatusOK || rec.Body.String() != "{}\n" {
		t.Fatalf("onSessionOpen: status %d, body %.200s; want 200 {}", rec.Code, rec.Body)
	}
	if rec := post(context.Background(), VerbPrioritize, `{"task":{"Name":"small"},"nodes":[]}`); rec.Code != http.StatusOK {
		t.Fatalf("a small body while a large one is answered: status %d, body %s; want 200", rec.Code, rec.Body)
	}

	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(context.Background(), VerbPrioritize, large) }()
	select {
	case rec := <-done:
		t.Fatalf("a large body was answered while another was: status %d", rec.Code)
	case <-time.After(200 * time.Millisecond):
	}
	<-vs.verbs.big // the other one is answered
	select {
	case rec := <-done:
		if rec.Code != http.StatusOK {
			t.Fatalf("the large body, once the other was answered: status %d, body %.200s", rec.Code, rec.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the large body was still waiting 30 s after the other was answered")
	}
	select {
	case vs.verbs.big <- struct{}{}: // released: free again
	default:
		t.Fatal("the large body's hold was not released after its answer")
	}
}

// TestVolcanoObjectsDecodeWhatIsRead: a pod and a node as Kubernetes JSON (what Volcano sends
// inside its TaskInfo and NodeInfo) decode into PodObject and NodeObject with every field the
// extender reads, whatever else they carry.
func TestVolcanoObjectsDecodeWhatIsRead(t *testing.T) {
	prio := int32(1000)
	scheduled := metav1.NewTime(volcanoNow.Add(-time.Minute).Truncate(time.Second))
	created := metav1.NewTime(volcanoNow.Add(-time.Hour).Truncate(time.Second))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "ml", UID: "uid-w-0", CreationTimestamp: created,
			Labels: map[string]string{"app": "train"}, Annotations: map[string]string{gang.VolcanoTaskSpec: "worker"}},
		Spec: corev1.PodSpec{Priority: &prio, PriorityClassName: "ml-urgent", NodeName: "n1",
			Containers: []corev1.Container{{Name: "c", Image: "trainer", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduled}}},
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"example.com/rack": "r1"}},
		Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"trainer"}, SizeBytes: 1 << 30}}},
	}
	var p PodObject
	var n NodeObject
	for _, c := range []struct {
		in  any
		out any
	}{{pod, &p}, {node, &n}} {
		b, err := json.Marshal(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, c.out); err != nil {
			t.Fatal(err)
		}
	}
	if p.Name != "w-0" || p.Namespace != "ml" || p.UID != "uid-w-0" || !p.CreationTimestamp.Equal(&created) ||
		p.Labels["app"] != "train" || p.Annotations[gang.VolcanoTaskSpec] != "worker" {
		t.Errorf("pod metadata: %+v", p.ObjectMeta)
	}
	if p.Spec.Priority == nil || *p.Spec.Priority != prio || p.Spec.PriorityClassName != "ml-urgent" {
		t.Errorf("pod spec: %+v", p.Spec)
	}
	if at := gang.ScheduledAtIn(p.Status.Conditions); !at.Equal(scheduled.Time) {
		t.Errorf("scheduled at %v, want %v", at, scheduled.Time)
	}
	if n.Name != "n1" || n.Labels["example.com/rack"] != "r1" || !n.Spec.Unschedulable {
		t.Errorf("node: %+v", n)
	}
}
