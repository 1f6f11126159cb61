package metrics

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cps-extender/cps-extender/priority"
)

type fixedStatus bool

func (f fixedStatus) InformersSynced() map[string]bool   { return map[string]bool{"pods": bool(f)} }
func (f fixedStatus) Ready() bool                        { return bool(f) }
func (f fixedStatus) SnapshotAge() (time.Duration, bool) { return time.Second, bool(f) }

// TestNamesAreWhatIsServed: with every metric observed once, the series served are exactly
// Names (the dashboard's and the alert rules' test relies on it).
func TestNamesAreWhatIsServed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.ObserveRequest("filter", 200, time.Millisecond)
	m.ObserveRefused("admin", 401)
	m.GateDecision("bind", OutcomeGathered)
	m.BindFailed()
	m.WaitingEvent(true)
	m.TurnNudge(NudgeSent)
	m.TurnLift(NudgeSent)
	m.ConfigReload(true)
	m.ObserveQueue(&priority.Queue{}, 1)
	m.WatchInformers(fixedStatus(true))
	m.WatchReady(fixedStatus(true))
	m.JobAdmitted("gold", "high", time.Minute)
	m.JobBound("gold", "high", time.Minute)
	m.PendingJobs(map[Pending]int{{Phase: priority.PhaseWaiting, Tier: "gold"}: 1}, 1)
	m.GangGathered(time.Second)
	m.HoldTimeout(4)
	m.Preemption(PreemptionEvicted)
	m.PodsEvicted("preempted", 2)
	m.ViewWait(ViewWaitGathering, time.Millisecond)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, f := range families {
		if f.GetType() == dto.MetricType_HISTOGRAM {
			served = append(served, f.GetName()+"_bucket", f.GetName()+"_sum", f.GetName()+"_count")
		} else {
			served = append(served, f.GetName())
		}
	}
	slices.Sort(served)
	if diff := cmp.Diff(m.Names(), served); diff != "" {
		t.Errorf("Names() (-) against the series served (+):\n%s", diff)
	}
}

func TestGangSizeLabel(t *testing.T) {
	for n, want := range map[int]string{0: "1-2", 1: "1-2", 2: "1-2", 3: "3-8", 8: "3-8", 9: "9-32", 32: "9-32", 33: "33-128", 128: "33-128", 129: "129+", 5000: "129+"} {
		if got := GangSizeLabel(n); got != want {
			t.Errorf("GangSizeLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestLabelsAreBounded: past maxClassLabels PriorityClasses the rest count as other; a pod
// with none counts as none.
func TestLabelsAreBounded(t *testing.T) {
	m := New(prometheus.NewRegistry())
	for i := range maxClassLabels + 5 {
		m.JobAdmitted("gold", fmt.Sprintf("class-%02d", i), time.Second)
	}
	m.JobAdmitted("gold", "", time.Second)
	m.JobAdmitted("gold", "class-00", time.Second) // known already: its own series
	got := map[string]uint64{}
	families, _ := m.gatherer.Gather()
	for _, f := range families {
		if f.GetName() != "cps_extender_job_admission_wait_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "priority_class" {
					got[l.GetValue()] = s.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if len(got) != maxClassLabels+2 || got[OtherLabel] != 5 || got[NoneLabel] != 1 || got["class-00"] != 2 {
		t.Errorf("series by priority_class: %v: want %d classes, other (5) and none (1)", got, maxClassLabels)
	}
}

// TestPendingJobsKeepsSeries: a phase and tier with no job left reads 0, not nothing.
func TestPendingJobsKeepsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.PendingJobs(map[Pending]int{{Phase: priority.PhaseWaiting, Tier: "gold"}: 2, {Phase: priority.PhaseUnschedulable, Tier: "bronze"}: 1}, 2)
	m.PendingJobs(map[Pending]int{{Phase: priority.PhaseAdmitted, Tier: "gold"}: 1}, 0)
	want := map[string]float64{"waiting/gold": 0, "unschedulable/bronze": 0, "admitted/gold": 1}
	got := map[string]float64{}
	families, _ := reg.Gather()
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "cps_extender_pending_jobs":
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				got[labels["phase"]+"/"+labels["tier"]] = s.GetGauge().GetValue()
			case "cps_extender_starved_jobs":
				if s.GetGauge().GetValue() != 0 {
					t.Errorf("starved jobs %v, want 0", s.GetGauge().GetValue())
				}
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pending jobs (-want +got):\n%s", diff)
	}
}

func TestJobMetricsAreNilSafe(t *testing.T) {
	var m *Metrics
	m.JobAdmitted("gold", "", time.Second)
	m.JobBound("gold", "", time.Second)
	m.PendingJobs(nil, 0)
	m.GangGathered(time.Second)
	m.HoldTimeout(3)
	m.WatchReady(fixedStatus(true))
}
