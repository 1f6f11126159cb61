package priority_test

import (
	"strings"
	"testing"

	"github.com/cps-extender/cps-extender/priority"
)

// TestAdmitMayNotFit: a job whose pods ask for what the fit does not count (Pod.MayNotFit)
// says so at the end of its Reason and its Wait, admitted, waiting or unschedulable alike,
// each phrase once; a running job and a job whose count is exact say nothing of it.
func TestAdmitMayNotFit(t *testing.T) {
	const (
		cons = "DRA constraints between requests"
		all  = "allocationMode All counted as one device"
	)
	w := func(name string, cpu int64, notes ...string) *podB {
		return mkPod(name, priority.RoleWorker, 0).req(res(cpu, gi)).mayNotFit(notes...)
	}
	tests := []struct {
		name       string
		job        priority.Job
		phase      priority.JobPhase
		wantReason string // the note the Reason ends with; "" for none
		wantWait   string // the note the Wait ends with; "" for none (or no Wait)
	}{
		{name: "admitted, one phrase", job: mkJob("ns/a").pods(w("a-0", 1000, cons), w("a-1", 1000, cons)).obj(),
			phase:      priority.PhaseAdmitted,
			wantReason: "; may not fit: DRA constraints between requests, which the fit does not count"},
		{name: "waiting: the pods' phrases each once, sorted", job: mkJob("ns/b").pods(w("b-0", 3000, cons), w("b-1", 3000, all, cons)).obj(),
			phase:      priority.PhaseWaiting,
			wantReason: "; may not fit: DRA constraints between requests, allocationMode All counted as one device, which the fit does not count",
			wantWait:   "; may not fit: DRA constraints between requests, allocationMode All counted as one device, which the fit does not count"},
		{name: "unschedulable", job: mkJob("ns/c").pods(w("c-0", 9000, all)).obj(),
			phase:      priority.PhaseUnschedulable,
			wantReason: "; may not fit: allocationMode All counted as one device, which the fit does not count",
			wantWait:   "; may not fit: allocationMode All counted as one device, which the fit does not count"},
		{name: "exact count: nothing said", job: mkJob("ns/d").pods(w("d-0", 3000)).obj(), phase: priority.PhaseWaiting},
		{name: "running: nothing said", job: mkJob("ns/e").pods(w("e-0", 1000, cons).bound("n1")).obj(), phase: priority.PhaseRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Two nodes of 2 cpu, 4 cpu capacity: 3000m waits, 9000m never fits.
			nodes := capNodes(4000, 2000, 2000)
			q := priority.DefaultModel().Admit(priority.State{Nodes: nodes, Jobs: []priority.Job{tt.job}}, t0)
			d, ok := q.Lookup(tt.job.Key)
			if !ok {
				t.Fatalf("no decision for %s", tt.job.Key)
			}
			if d.Phase != tt.phase {
				t.Fatalf("phase %v, want %v (%s)", d.Phase, tt.phase, d.Reason)
			}
			checkNote(t, "Reason", d.Reason, tt.wantReason)
			checkNote(t, "Wait", d.Wait, tt.wantWait)
		})
	}
}

// checkNote checks that sentence ends with note, once, or says nothing of "may not fit"
// when note is "".
func checkNote(t *testing.T, what, sentence, note string) {
	t.Helper()
	if n := strings.Count(sentence, "may not fit"); note == "" && n > 0 || note != "" && (n != 1 || !strings.HasSuffix(sentence, note)) {
		t.Errorf("%s %q, want it to end with %q", what, sentence, note)
	}
}
