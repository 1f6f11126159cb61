package priority_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

// fullCluster is nodes nodes of 8000m in racks of two, each running one bronze job of two
// 4000m pods that started runFor ago: job ns/run-<i> on n0<i>. The nodes are full.
func fullCluster(nodes int, runFor time.Duration) ([]priority.Node, []priority.Job) {
	var ns []priority.Node
	var jobs []priority.Job
	for i := range nodes {
		name := fmt.Sprintf("n%02d", i)
		n := node(name, res(0, 0))
		n.Capacity = res(8000, 64*gi)
		n.Labels = map[string]string{rackKey: fmt.Sprintf("r%d", i/2)}
		ns = append(ns, n)
		j := mkJob(fmt.Sprintf("ns/run-%d", i)).prio(100000).created(t0.Add(-2*time.Hour)).pods(
			mkPod(fmt.Sprintf("run-%d-w-0", i), priority.RoleWorker, 0).req(res(4000, 0)).bound(name),
			mkPod(fmt.Sprintf("run-%d-w-1", i), priority.RoleWorker, 1).req(res(4000, 0)).bound(name),
		).obj()
		j.RunningSince = t0.Add(-runFor)
		jobs = append(jobs, j)
	}
	return ns, jobs
}

// urgentJob is an urgent gold job of n 4000m workers and no PS.
func urgentJob(n int) priority.Job {
	return mkJob("ns/urgent").user("alice").urgent().gang(0, nil, n, res(4000, 0)).obj()
}

func TestPreemption(t *testing.T) {
	m := priority.DefaultModel()
	m.UserTiers = map[string]string{"alice": "gold"}
	tests := []struct {
		name    string
		modify  func(m *priority.Model, s *priority.State)
		job     priority.Job
		phase   priority.JobPhase
		victims []string
		blocker string // a part of it
	}{
		{
			name:    "an urgent gang of two pods evicts one whole gang: the fewest jobs",
			job:     urgentJob(2),
			phase:   priority.PhasePreempting,
			victims: []string{"ns/run-0"},
		},
		{
			name:    "a preferred anti-affinity does not stop it: the same one gang",
			job:     preferring(mkJob("ns/urgent").user("alice").urgent().gang(0, nil, 2, res(4000, 0)), preferApartByHost, true).obj(),
			phase:   priority.PhasePreempting,
			victims: []string{"ns/run-0"},
		},
		{
			name:    "four pods: two gangs, in one rack",
			job:     urgentJob(4),
			phase:   priority.PhasePreempting,
			victims: []string{"ns/run-0", "ns/run-1"},
		},
		{
			name: "the gang that lost the least work goes first",
			modify: func(_ *priority.Model, s *priority.State) {
				s.Jobs[2].RunningSince = t0.Add(-20 * time.Minute) // run-2 ran 20m, the others 1h
			},
			job:     urgentJob(2),
			phase:   priority.PhasePreempting,
			victims: []string{"ns/run-2"},
		},
		{
			name:    "preemption off: the urgent job waits",
			modify:  func(m *priority.Model, _ *priority.State) { m.Preemption = priority.PreemptOff },
			job:     urgentJob(2),
			phase:   priority.PhaseWaiting,
			blocker: "the most free on any node is 0m",
		},
		{
			name:    "a job that is not urgent does not preempt under urgent",
			job:     mkJob("ns/gold").user("alice").prio(900000).gang(0, nil, 2, res(4000, 0)).obj(),
			phase:   priority.PhaseWaiting,
			blocker: "the most free on any node is 0m",
		},
		{
			name:    "under priority, the head preempts",
			modify:  func(m *priority.Model, _ *priority.State) { m.Preemption = priority.PreemptPriority },
			job:     mkJob("ns/gold").user("alice").prio(900000).gang(0, nil, 2, res(4000, 0)).obj(),
			phase:   priority.PhasePreempting,
			victims: []string{"ns/run-0"},
		},
		{
			name:    "never a job of about the same P",
			modify:  func(m *priority.Model, _ *priority.State) { m.Preemption = priority.PreemptPriority },
			job:     mkJob("ns/peer").prio(100000).created(t0.Add(-2*time.Hour)).gang(0, nil, 2, res(4000, 0)).obj(),
			phase:   priority.PhaseWaiting,
			blocker: "it may not preempt: no running job may be evicted for it (jobs not urgent, P at least 0.10 lower, running 10m0s or more)",
		},
		{
			name: "never a job inside its minimum run time",
			modify: func(m *priority.Model, s *priority.State) {
				m.Preemption = priority.PreemptPriority
				for i := range s.Jobs {
					s.Jobs[i].RunningSince = t0.Add(-5 * time.Minute)
				}
			},
			job:     mkJob("ns/gold").user("alice").prio(900000).gang(0, nil, 2, res(4000, 0)).obj(),
			phase:   priority.PhaseWaiting,
			blocker: "it may not preempt: no running job may be evicted for it",
		},
		{
			// Urgency is a class: gold jobs of the top priority that started seconds ago
			// make way for an urgent bronze job, whose P is far below theirs.
			name: "an urgent job evicts jobs that are not, whatever their P and however young",
			modify: func(_ *priority.Model, s *priority.State) {
				for i := range s.Jobs {
					s.Jobs[i].User, s.Jobs[i].Priority = "alice", 1000000
					s.Jobs[i].RunningSince = t0.Add(-5 * time.Second)
				}
			},
			job:     mkJob("ns/urgent").user("carol").urgent().gang(0, nil, 2, res(4000, 0)).obj(),
			phase:   priority.PhasePreempting,
			victims: []string{"ns/run-0"},
		},
		{
			name: "model.urgentMinRunTime shields young jobs from an urgent one",
			modify: func(m *priority.Model, s *priority.State) {
				m.UrgentMinRunTime = 10 * time.Minute
				for i := range s.Jobs {
					s.Jobs[i].RunningSince = t0.Add(-5 * time.Minute)
				}
			},
			job:     urgentJob(2),
			phase:   priority.PhaseWaiting,
			blocker: "it may not preempt: no running job may be evicted for it (jobs not urgent running 10m0s or more; urgent ones P at least 0.10 lower, running 10m0s or more)",
		},
		{
			name: "urgent against urgent: the margin, as before",
			modify: func(_ *priority.Model, s *priority.State) {
				for i := range s.Jobs {
					s.Jobs[i].User, s.Jobs[i].Urgent = "alice", true
				}
			},
			job:     urgentJob(2),
			phase:   priority.PhaseWaiting,
			blocker: "it may not preempt: no running job may be evicted for it",
		},
		{
			name: "a starved job never evicts an urgent one, whatever the P",
			modify: func(_ *priority.Model, s *priority.State) {
				for i := range s.Jobs {
					s.Jobs[i].Urgent, s.Jobs[i].Priority, s.Jobs[i].Created = true, 0, t0
					s.Jobs[i].RunningSince = t0.Add(-time.Hour)
				}
			},
			job:     mkJob("ns/starved").user("alice").prio(1000000).created(t0.Add(-time.Hour)).gang(0, nil, 2, res(4000, 0)).obj(),
			phase:   priority.PhaseWaiting,
			blocker: "it may not preempt: no running job may be evicted for it",
		},
		{
			name: "never a protected job, and the sentence says so",
			modify: func(_ *priority.Model, s *priority.State) {
				s.Protected = map[string]time.Time{}
				for _, j := range s.Jobs {
					s.Protected[j.Key] = t0.Add(time.Minute)
				}
			},
			job:     urgentJob(2),
			phase:   priority.PhaseWaiting,
			blocker: "ns/run-0, ns/run-1, ns/run-2, ns/run-3 may not be evicted: an eviction of its pods was refused (a PodDisruptionBudget)",
		},
		{
			name:    "the budget spent: no preemption",
			modify:  func(m *priority.Model, s *priority.State) { s.Preempted = m.MaxPreemptions },
			job:     urgentJob(2),
			phase:   priority.PhaseWaiting,
			blocker: "preemption is paused: 4 jobs were evicted in the last 10m0s",
		},
		{
			name:    "the budget left bounds the victims",
			modify:  func(m *priority.Model, s *priority.State) { s.Preempted = m.MaxPreemptions - 1 },
			job:     urgentJob(4),
			phase:   priority.PhaseWaiting,
			blocker: "evicting the jobs it may evict would not make room for it",
		},
		{
			name: "victims on their way out: no more victims, it waits for them",
			modify: func(_ *priority.Model, s *priority.State) {
				s.Nodes[0].Leaving = res(8000, 0, "pods", 2)
				s.Jobs = s.Jobs[1:] // run-0's pods are being deleted: no longer in the job
			},
			job:   urgentJob(2),
			phase: priority.PhasePreempting,
		},
		{
			name: "a victim half evicted: its other pod's room is on its way, no second victim",
			modify: func(_ *priority.Model, s *priority.State) {
				s.Nodes[0].Leaving = res(4000, 0, "pods", 1)
				s.Jobs[0].Pods, s.Jobs[0].Leaving, s.Jobs[0].MinMember = s.Jobs[0].Pods[:1], 1, 2
			},
			job:   urgentJob(2),
			phase: priority.PhasePreempting,
		},
		{
			name: "a running job losing a pod is no victim: its room is on its way",
			modify: func(_ *priority.Model, s *priority.State) {
				s.Nodes[0].Leaving = res(4000, 0, "pods", 1)
				s.Jobs[0].Pods, s.Jobs[0].Leaving = s.Jobs[0].Pods[:1], 1 // every pod left is its minimum
			},
			job:   urgentJob(2),
			phase: priority.PhasePreempting,
		},
		{
			name: "a job that fits spread and waits for one rack by choice (spreadAfter) evicts nobody",
			modify: func(_ *priority.Model, s *priority.State) {
				// n01 and n03 free: two racks have half their room each; a small job
				// behind it uses some of that room, so its wait leaves none idle.
				s.Nodes[1].Free, s.Nodes[3].Free = res(8000, 64*gi), res(8000, 64*gi)
				s.Jobs = []priority.Job{s.Jobs[0], s.Jobs[2], mkJob("ns/small").user("carol").gang(0, nil, 1, res(4000, 0)).obj()}
			},
			job:     urgentJob(4),
			phase:   priority.PhaseWaiting,
			blocker: "rather than spread over several",
		},
		{
			name: "its own job losing pods frees no room for it",
			modify: func(_ *priority.Model, s *priority.State) {
				s.Nodes[0].Leaving = res(4000, 0, "pods", 1)
				s.Jobs = s.Jobs[1:] // n00 holds the urgent job's bound pod and its leaving one
			},
			job: func() priority.Job {
				// A repair: one of its pods is bound on n00 and another of them is leaving;
				// the leaving one's room takes one pod, the other needs a victim.
				j := mkJob("ns/urgent").user("alice").urgent().min(3).pods(
					mkPod("urgent-w-0", priority.RoleWorker, 0).req(res(4000, 0)).bound("n00"),
					mkPod("urgent-w-1", priority.RoleWorker, 1).req(res(4000, 0)),
					mkPod("urgent-w-2", priority.RoleWorker, 2).req(res(4000, 0)),
				).obj()
				j.Leaving = 1
				return j
			}(),
			phase:   priority.PhasePreempting,
			victims: []string{"ns/run-1"},
		},
		{
			name: "a job that needs one rack waits for the rack its victims leave",
			modify: func(_ *priority.Model, s *priority.State) {
				s.Nodes[0].Leaving = res(8000, 0, "pods", 2)
				s.Nodes[1].Leaving = res(8000, 0, "pods", 2)
				s.Jobs = s.Jobs[2:]
			},
			job: func() priority.Job {
				j := urgentJob(4)
				j.Topology.Required = rackKey
				return j
			}(),
			phase: priority.PhasePreempting,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, running := fullCluster(4, time.Hour)
			m := m
			s := priority.State{Nodes: nodes, Jobs: running, Topology: priority.NewNodeIndex(nodes, []string{rackKey}, nil)}
			if tt.modify != nil {
				tt.modify(&m, &s)
			}
			s.Jobs = append(s.Jobs, tt.job)
			s.Topology = priority.NewNodeIndex(s.Nodes, []string{rackKey}, nil)
			q := m.Admit(s, t0)
			d, _ := q.Lookup(tt.job.Key)
			if d.Phase != tt.phase || !strings.Contains(d.Blocker, tt.blocker) {
				t.Fatalf("phase %s, blocker %q; want %s with %q", d.Phase, d.Blocker, tt.phase, tt.blocker)
			}
			var got []string
			for _, v := range d.Victims {
				got = append(got, v.Key)
				if v.Pods != 2 || !tt.job.Urgent && v.P >= d.P-m.PreemptionMargin {
					t.Errorf("victim %+v of a job with P %.2f", v, d.P)
				}
			}
			if diff := cmp.Diff(tt.victims, got); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if d.Phase == priority.PhasePreempting && d.Wait != "job "+tt.job.Key+" waits while the jobs evicted for it leave" {
				t.Errorf("wait sentence %q", d.Wait)
			}
		})
	}
}

// TestPreemptionReservesTheRoom: the room the victims leave is the preemptor's: a job behind
// it is not placed there, and once the victims are gone the preemptor is admitted on it.
func TestPreemptionReservesTheRoom(t *testing.T) {
	nodes, running := fullCluster(4, time.Hour)
	m := priority.DefaultModel()
	m.UserTiers = map[string]string{"alice": "gold"}
	urgent := urgentJob(2)
	q := m.Admit(priority.State{Nodes: nodes, Jobs: append(running, urgent), Topology: priority.NewNodeIndex(nodes, []string{rackKey}, nil)}, t0)
	d, _ := q.Lookup("ns/urgent")
	if d.Phase != priority.PhasePreempting || len(d.Victims) != 1 {
		t.Fatalf("phase %s, victims %v", d.Phase, d.Victims)
	}
	victim := d.Victims[0].Key
	// The victim's pods are gone; a small job arrives too.
	var left []priority.Job
	for _, j := range running {
		if j.Key != victim {
			left = append(left, j)
		}
	}
	freed := strings.TrimPrefix(victim, "ns/run-")
	nodes[mustAtoi(t, freed)].Free = res(8000, 64*gi)
	small := mkJob("ns/small").prio(800000).gang(0, nil, 1, res(4000, 0)).obj()
	s := priority.State{Nodes: nodes, Jobs: append(left, urgent, small), Topology: priority.NewNodeIndex(nodes, []string{rackKey}, nil), Previous: q}
	q = m.Admit(s, t0.Add(time.Second))
	d, _ = q.Lookup("ns/urgent")
	if d.Phase != priority.PhaseAdmitted {
		t.Fatalf("urgent after its victim left: %s (%s)", d.Phase, d.Blocker)
	}
	for _, n := range d.Plan {
		if n != nodes[mustAtoi(t, freed)].Name {
			t.Errorf("urgent planned on %s, want the freed %s", n, nodes[mustAtoi(t, freed)].Name)
		}
	}
	if ds, _ := q.Lookup("ns/small"); ds.Phase == priority.PhaseAdmitted {
		t.Errorf("the small job took room the urgent one needed: %v", ds.Plan)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestVictimBarAndMayPreemptAlone: the rule Volcano's preemptable and reclaimable share with
// the queue.
func TestVictimBarAndMayPreemptAlone(t *testing.T) {
	m := priority.DefaultModel()
	m.UserTiers = map[string]string{"alice": "gold"}
	ran := func(d time.Duration) priority.Job {
		j := mkJob("ns/run").created(t0.Add(-2*time.Hour)).gang(0, nil, 2, res(1000, 0)).obj()
		j.RunningSince = t0.Add(-d)
		return j
	}
	gold := mkJob("ns/gold").user("alice").prio(900000).gang(0, nil, 2, res(1000, 0)).obj()
	goldP := m.Combined(m.Terms(&gold, t0))
	leaving, hour, unknown := ran(time.Hour), ran(time.Hour), ran(0)
	leaving.Leaving, unknown.RunningSince = 1, time.Time{}
	urgentRan := func(d time.Duration) priority.Job {
		j := ran(d)
		j.Urgent = true
		return j
	}
	goldRan := func(d time.Duration) priority.Job { // P far above any bronze preemptor's
		j := mkJob("ns/goldrun").user("alice").prio(1000000).created(t0.Add(-2*time.Hour)).gang(0, nil, 64, res(1000, 0)).obj()
		j.RunningSince = t0.Add(-d)
		return j
	}
	strict := m
	strict.UrgentMinRunTime = 2 * time.Minute
	tests := []struct {
		name   string
		model  priority.Model
		victim priority.Job
		p      float64
		urgent bool   // the preemptor's
		want   string // a part of the bar; "" may go
	}{
		{"ran an hour, far below", m, ran(time.Hour), goldP, false, ""},
		{"inside the minimum run time", m, ran(5 * time.Minute), goldP, false, "has not run 10m0s"},
		{"start not known", m, unknown, goldP, false, "has not run"},
		{"about the same P", m, hour, m.RunningP(&hour, t0) + 0.05, false, "not 0.10 or more below"},
		{"leaving already", m, leaving, goldP, false, "leaving already"},
		// Urgency is a class: an urgent preemptor evicts a job that is not urgent whatever
		// its P, and without MinRunTime; UrgentMinRunTime alone shields it.
		{"urgent against a higher P", m, goldRan(time.Hour), 0.2, true, ""},
		{"urgent against one that started a second ago", m, goldRan(time.Second), 0.2, true, ""},
		{"urgent against one whose start is not known", m, unknown, 0.2, true, ""},
		{"urgent inside urgentMinRunTime", strict, goldRan(time.Minute), 0.2, true, "has not run 2m0s (model.urgentMinRunTime)"},
		{"urgent past urgentMinRunTime", strict, goldRan(3 * time.Minute), 0.2, true, ""},
		{"urgent, start not known, urgentMinRunTime", strict, unknown, 0.2, true, "has not run 2m0s"},
		{"urgent against a leaving job", m, leaving, 1, true, "leaving already"},
		// Urgent against urgent: the margin and MinRunTime, as before.
		{"urgent against urgent, same P", m, urgentRan(time.Hour), 0.3, true, "not 0.10 or more below"},
		{"urgent against urgent, far below", m, urgentRan(time.Hour), 1, true, ""},
		{"urgent against urgent, young", m, urgentRan(5 * time.Minute), 1, true, "has not run 10m0s"},
		// Nobody but an urgent job evicts an urgent one, whatever the P.
		{"starved against urgent", m, urgentRan(time.Hour), 1, false, "it is urgent, and the job preempting is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.model.VictimBar(&tt.victim, tt.p, tt.urgent, t0)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("VictimBar = %q, want %q", got, tt.want)
			}
		})
	}
	starved := mkJob("ns/old").created(t0.Add(-time.Hour)).gang(0, nil, 2, res(1000, 0)).obj()
	for _, c := range []struct {
		mode priority.PreemptionMode
		job  priority.Job
		want bool
	}{
		{priority.PreemptUrgent, gold, false},
		{priority.PreemptUrgent, urgentJob(2), true},
		{priority.PreemptUrgent, starved, true},
		{priority.PreemptPriority, gold, true},
		{priority.PreemptOff, urgentJob(2), false},
	} {
		m.Preemption = c.mode
		if got := m.MayPreemptAlone(&c.job, t0); got != c.want {
			t.Errorf("%s: MayPreemptAlone(%s) = %v, want %v", c.mode, c.job.Key, got, c.want)
		}
	}
}
