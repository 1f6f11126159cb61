// Package monitoring checks deploy/monitoring: the alert rules load as Prometheus loads a rule
// file, every PromQL expression of the rules and of the Grafana dashboard parses with
// Prometheus's own parser, and every metric they name is one that cps-extender serves.
package monitoring

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/cps-extender/cps-extender/extender/metrics"
)

const dir = "../../../deploy/monitoring"

// served lists the series names cps-extender serves on /metrics: its own metrics, and the
// Go runtime and process collectors that main registers beside them.
func served(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range metrics.New(prometheus.NewRegistry()).Names() {
		out[n] = true
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		out[f.GetName()] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[f.GetName()+"_bucket"], out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = true, true
		}
	}
	return out
}

var promql = parser.NewParser(parser.Options{})

// metricNames parses expr and returns the metric names its selectors name.
func metricNames(t *testing.T, where, expr string) []string {
	t.Helper()
	node, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			if name == "" {
				t.Errorf("%s: %q selects series without a metric name", where, expr)
			}
			names = append(names, name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: %q names no metric", where, expr)
	}
	return names
}

// checkNames fails for each name the extender does not serve.
func checkNames(t *testing.T, where string, names []string, known map[string]bool) {
	t.Helper()
	for _, n := range names {
		if !known[n] {
			t.Errorf("%s names %s, which cps-extender does not serve", where, n)
		}
	}
}

func TestAlertRules(t *testing.T) {
	path := filepath.Join(dir, "alerts.yaml")
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promql, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("%s: %v", path, err)
	}
	if groups == nil {
		t.FailNow()
	}
	known := served(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			checkNames(t, "alert "+r.Alert, metricNames(t, "alert "+r.Alert, r.Expr), known)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.For == 0 {
				t.Errorf("alert %s: severity %q, summary %q, description %q, for %v: want all four", r.Alert,
					r.Labels["severity"], r.Annotations["summary"], r.Annotations["description"], r.For)
			}
		}
	}
	slices.Sort(alerts)
	if want := []string{"CPSExtenderHoldTimeoutsRising", "CPSExtenderJobStarving", "CPSExtenderNoLeader", "CPSExtenderNotReady", "CPSExtenderPreemptionIncomplete", "CPSExtenderStaleView"}; !slices.Equal(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}
}

// grafanaVariables are the dashboard's variables and Grafana's built-in intervals, replaced
// by values of the same kind before an expression is parsed.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "${job}", "cps-extender", "$job", "cps-extender")

// labelValues reads the metric of a label_values(metric, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// panel is what the test reads of a Grafana panel.
type panel struct {
	Title      string         `json:"title"`
	Type       string         `json:"type"`
	Datasource map[string]any `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID, Title    string
		SchemaVersion int `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || dash.SchemaVersion == 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want all three", dash.UID, dash.Title, dash.SchemaVersion)
	}
	known := served(t)
	used := map[string]bool{}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		m := labelValues.FindStringSubmatch(strings.TrimSpace(toString(q["query"])))
		if m == nil {
			t.Errorf("variable %s: query %v is no label_values(metric, label)", v.Name, v.Query)
			continue
		}
		checkNames(t, "variable "+v.Name, m[1:2], known)
	}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || len(p.Targets) == 0 || p.Datasource["uid"] != "${datasource}" {
				t.Errorf("panel %q (%s): %d targets, datasource %v: want a title, a query and the dashboard's datasource", p.Title, p.Type, len(p.Targets), p.Datasource)
			}
			for _, target := range p.Targets {
				names := metricNames(t, "panel "+p.Title, grafanaVariables.Replace(target.Expr))
				checkNames(t, "panel "+p.Title, names, known)
				for _, n := range names {
					used[n] = true
				}
			}
		}
	}
	walk(dash.Panels)
	// The dashboard is built on the job metrics: each of them is on it.
	for _, n := range []string{
		"cps_extender_job_admission_wait_seconds_bucket", "cps_extender_job_bound_wait_seconds_bucket", "cps_extender_pending_jobs",
		"cps_extender_starved_jobs", "cps_extender_gang_gather_seconds_bucket", "cps_extender_hold_timeouts_total", "cps_extender_ready",
	} {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}
