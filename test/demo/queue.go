package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/priority"
)

// settleFor is how long every job must stay fully bound or waiting before the cluster counts
// as settled.
const settleFor = 3 * time.Second

// queueReport is the JSON of the extender's GET /debug/queue: the queue in order, then the
// running jobs.
type queueReport struct {
	Computed time.Time            `json:"computed"`
	Jobs     []*priority.Decision `json:"jobs"`
}

// byKey indexes the report's decisions by job key.
func (q queueReport) byKey() map[string]*priority.Decision {
	out := make(map[string]*priority.Decision, len(q.Jobs))
	for _, d := range q.Jobs {
		out[d.Key] = d
	}
	return out
}

// extenderClient reads the extender's debug endpoints.
type extenderClient struct {
	base string // http://host:port
	http *http.Client
}

// newExtenderClient returns a client of the extender listening on addr (host:port).
func newExtenderClient(addr string) extenderClient {
	return extenderClient{base: "http://" + addr, http: &http.Client{Timeout: 10 * time.Second}}
}

// get returns the body of a GET of path, which must answer 200.
func (c extenderClient) get(path string) ([]byte, error) {
	resp, err := c.http.Get(c.base + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// Queue returns the admission queue (GET /debug/queue).
func (c extenderClient) Queue() (queueReport, error) {
	var q queueReport
	body, err := c.get("/debug/queue")
	if err != nil {
		return q, err
	}
	if err := json.Unmarshal(body, &q); err != nil {
		return q, fmt.Errorf("GET /debug/queue: %w", err)
	}
	return q, nil
}

// QueueTable returns the admission queue as the extender renders it for people
// (GET /debug/queue?format=table).
func (c extenderClient) QueueTable() (string, error) {
	body, err := c.get("/debug/queue?format=table")
	return string(body), err
}

// jobState says whether a job has settled: it is fully bound, or it waits for something
// only a change in the cluster can bring (capacity, its turn behind a job that cannot
// run). A job still gathering, admitted, or waiting for its own pods to exist has not.
func jobState(d *priority.Decision, bound, size int) (settled bool) {
	switch {
	case d == nil:
		return false // the extender has not seen it yet
	case d.Phase == priority.PhaseRunning:
		return bound == size
	case d.Phase == priority.PhaseWaiting:
		transient := strings.HasPrefix(d.Blocker, "gang incomplete") || strings.HasPrefix(d.Blocker, "scheduling gated")
		return d.Held == 0 && d.Bound == 0 && !transient
	default:
		return false
	}
}

// phaseWatcher prints a line whenever a job's phase (or a running job's bound count)
// changes, with the time since start.
type phaseWatcher struct {
	out   io.Writer
	start time.Time
	last  map[string]string
}

// newPhaseWatcher returns a watcher that prints to out, with times since start.
func newPhaseWatcher(out io.Writer, start time.Time) *phaseWatcher {
	return &phaseWatcher{out: out, start: start, last: map[string]string{}}
}

// observe prints what changed for the job named name since the last call: its phase, its
// place in the queue, its bound pods or what it waits for; not P alone, which drifts as the
// job waits.
func (w *phaseWatcher) observe(name string, d *priority.Decision) {
	if d == nil {
		return
	}
	var state, why string
	p := fmt.Sprintf(", P=%.2f", d.P)
	switch d.Phase {
	case priority.PhaseRunning:
		state, p = fmt.Sprintf("%-8s %d/%d pods bound", d.Phase, d.Bound, d.Pods), ""
	case priority.PhaseAdmitted:
		state = fmt.Sprintf("%-8s has the turn: %s of %d", d.Phase, priority.Ordinal(d.Position), d.QueueLen)
		if plan := d.Placement.String(); plan != "" {
			state += "; planned in " + plan
		}
	default:
		state = fmt.Sprintf("%-8s %s of %d", d.Phase, priority.Ordinal(d.Position), d.QueueLen)
		why = ": " + d.Blocker
	}
	if w.last[name] == state+why {
		return
	}
	w.last[name] = state + why
	fmt.Fprintf(w.out, "  %+7.1fs  %-10s %s%s%s\n", time.Since(w.start).Seconds(), name, state, p, why)
}
