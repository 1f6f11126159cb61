package server

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/cps-extender/cps-extender/extender/wire"
	"github.com/cps-extender/cps-extender/priority"
)

// QueueSource gives the explain endpoint the current admission queue and when it was
// computed (nil before the first).
type QueueSource interface {
	Queue() (*priority.Queue, time.Time)
}

// queueReport is the JSON of /debug/queue: the queue in order, then the unschedulable jobs,
// then the running jobs.
type queueReport struct {
	Computed time.Time `json:"computed"`
	// Topology is each configured topology level as the nodes carry it.
	Topology []priority.TopologyLevel `json:"topology,omitempty"`
	Jobs     []*priority.Decision     `json:"jobs"`
}

// debugQueue answers /debug/queue: the admission queue as JSON, or as a text table with
// ?format=table.
func (s *Server) debugQueue(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q, computed := s.queue.Queue()
	if q == nil {
		wire.WriteJSON(w, http.StatusServiceUnavailable, wire.ErrorBody{Error: "no queue computed yet: cluster view not synced"})
		return
	}
	report := queueReport{Computed: computed, Topology: q.Levels, Jobs: slices.Concat(q.Order, q.Unschedulable, q.Running)}
	switch format := r.URL.Query().Get("format"); format {
	case "", "json":
		wire.WriteJSON(w, http.StatusOK, report)
	case "table":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeQueueTable(w, report)
	default:
		wire.WriteJSON(w, http.StatusBadRequest, wire.ErrorBody{Error: fmt.Sprintf("unknown format %q: want json or table", format)})
	}
}

// writeQueueTable renders the queue for people: a summary line, one row per job, then a
// line per urgent job saying where its urgency comes from.
func writeQueueTable(w io.Writer, report queueReport) {
	queued := 0
	for _, d := range report.Jobs {
		if d.Position > 0 {
			queued++
		}
	}
	unschedulable := 0
	for _, d := range report.Jobs {
		if d.Phase == priority.PhaseUnschedulable {
			unschedulable++
		}
	}
	fmt.Fprintf(w, "queue computed %s: %d queued, %d unschedulable, %d running\n", report.Computed.UTC().Format(time.RFC3339),
		queued, unschedulable, len(report.Jobs)-queued-unschedulable)
	if len(report.Topology) > 0 {
		fmt.Fprintf(w, "topology: %s\n", TopologyLevels(report.Topology))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tJOB\tPHASE\tP\tUSER\tJOB-PRIO\tWAIT\tPARALLEL\tGANG\tPLACEMENT\tWAITS FOR")
	for _, d := range report.Jobs {
		pos := "-"
		if d.Position > 0 {
			pos = fmt.Sprint(d.Position)
		}
		gang := fmt.Sprintf("%d/%d bound", d.Bound, d.MinMember)
		if d.Held > 0 {
			gang += fmt.Sprintf(", %d held", d.Held)
		}
		blocker := d.Blocker
		switch {
		case d.Phase == priority.PhaseAdmitted && d.Held > 0:
			blocker = "its gang gathering at bind"
		case d.Phase == priority.PhaseAdmitted || d.Phase == priority.PhaseRunning:
			blocker = ""
		}
		placement := d.Placement.String()
		if placement == "" {
			placement = "-"
		} else if d.Phase == priority.PhaseWaiting || d.Phase == priority.PhasePreempting {
			placement = "reserved: " + placement
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\n", pos, d.Key, d.Phase, d.P,
			d.Terms.User, d.Terms.Job, d.Terms.Wait, d.Terms.Parallelism, gang, placement, strings.TrimSpace(blocker))
	}
	_ = tw.Flush()
	for _, d := range report.Jobs {
		if d.Urgent {
			fmt.Fprintf(w, "urgent: %s by %s\n", d.Key, d.UrgentFrom)
		}
	}
}

// TopologyLevels says how the nodes carry the configured topology levels, for people:
// "example.com/rack on 32 nodes in 8 domains; topology.kubernetes.io/zone on no node (left
// out of the placement)".
func TopologyLevels(levels []priority.TopologyLevel) string {
	parts := make([]string, len(levels))
	for i, l := range levels {
		parts[i] = l.String()
	}
	return strings.Join(parts, "; ")
}
