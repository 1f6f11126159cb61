package scheduler

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/internal/fixture"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/priority"
)

func TestMetricsCountRequestsAndFilterDecisions(t *testing.T) {
	ts := newTestServer(t, true, 1<<20)
	for _, body := range []string{
		`{"Pod":` + podJSON + `,"NodeNames":["n1"]}`,
		`{"Pod":{"metadata":{"name":"waiter","namespace":"default"}},"NodeNames":["n1"]}`,
		`{"Pod":{"metadata":{"name":"waiter","namespace":"default"}},"NodeNames":["n1"]}`,
		`{"NodeNames":["n1"]}`, // 400: no Pod
	} {
		ts.do(http.MethodPost, "/scheduler/filter", body)
	}
	ts.do(http.MethodPost, "/scheduler/bind", `{"PodName":"p1","PodNamespace":"default","PodUID":"u1","Node":"n2"}`)
	ts.do(http.MethodGet, "/healthz", "")
	rec := ts.do(http.MethodGet, "/metrics", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	fixture.WantSamples(t, body,
		`cps_extender_requests_total{code="200",verb="filter"} 3`,
		`cps_extender_requests_total{code="400",verb="filter"} 1`,
		`cps_extender_requests_total{code="200",verb="bind"} 1`,
		`cps_extender_request_duration_seconds_count{verb="filter"} 4`,
		`cps_extender_request_duration_seconds_bucket{verb="bind",le="+Inf"} 1`,
		`cps_extender_gate_decisions_total{outcome="admitted",verb="filter"} 1`,
		`cps_extender_gate_decisions_total{outcome="waiting",verb="filter"} 2`,
	)
	if strings.Contains(body, `verb=""`) {
		t.Errorf("requests outside the verbs (healthz, metrics) were counted:\n%s", body)
	}
	// The smallest bucket is 100µs: the hot path is sub-millisecond.
	if !strings.Contains(body, `cps_extender_request_duration_seconds_bucket{verb="filter",le="0.0001"}`) {
		t.Error("no 100µs bucket")
	}
}

func TestMetricsErrorAnswersAreLoggedWithContext(t *testing.T) {
	ts := newTestServer(t, true, 1<<20)
	ts.do(http.MethodPost, "/scheduler/filter", `{"NodeNames":["n1"]}`)
	entries := ts.logs.FilterMessage("request").All()
	if len(entries) != 1 {
		t.Fatalf("got %d access log lines, want 1", len(entries))
	}
	fields := entries[0].ContextMap()
	if entries[0].Level.String() != "warn" || fields["verb"] != "filter" || !strings.Contains(fields["error"].(string), "request has no Pod") {
		t.Errorf("error answer logged at %s with %v: want warn, verb filter and the error", entries[0].Level, fields)
	}
}

type fakeInformers map[string]bool

func (f fakeInformers) InformersSynced() map[string]bool { return f }

func TestMetricsQueueGaugesAndInformers(t *testing.T) {
	running := priority.Job{Key: "ns/run", MinMember: 1, Created: time.Unix(1_600_000_000, 0), Pods: []priority.Pod{
		fixture.GangPod("run-0", priority.RoleWorker, 0, priority.PodBound, "n1"),
	}}
	tooBig := priority.Job{Key: "ns/big", MinMember: 1, Created: time.Unix(1_600_000_000, 0), Pods: []priority.Pod{
		{UID: "uid-big-0", Name: "ns/big-0", Role: priority.RoleWorker, Request: priority.Resources{"cpu": 90000}},
	}}
	q := priority.DefaultModel().Admit(priority.State{Jobs: []priority.Job{running, tooBig, fixture.ThreePodJob()}, Nodes: fixture.BigNodes()}, time.Unix(1_700_000_000, 0))
	m := metrics.New(prometheus.NewRegistry())
	m.ObserveQueue(q, 2)
	m.WatchInformers(fakeInformers{"pods": true, "nodes": true, "volcano-podgroups": false})
	fixture.WantSamples(t, fixture.Scrape(t, m),
		`cps_extender_queue_jobs{state="running"} 1`,
		`cps_extender_queue_jobs{state="admitted"} 1`,
		`cps_extender_queue_jobs{state="waiting"} 1`,
		`cps_extender_queue_length 2`,
		`cps_extender_held_binds 2`,
		`cps_extender_informer_synced{informer="pods"} 1`,
		`cps_extender_informer_synced{informer="nodes"} 1`,
		`cps_extender_informer_synced{informer="volcano-podgroups"} 0`,
	)
}

func TestMetricsAreNilSafe(t *testing.T) {
	var m *metrics.Metrics
	m.ObserveRequest("filter", 200, time.Millisecond)
	m.GateDecision(VerbBind, metrics.OutcomePassed)
	m.BindFailed()
	m.WaitingEvent(true)
	m.ConfigReload(true)
	m.ObserveQueue(&priority.Queue{}, 0)
	m.WatchInformers(fakeInformers{})
}
