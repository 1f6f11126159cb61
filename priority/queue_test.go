package priority_test

import (
	"encoding/json"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

// row is the part of a decision the admission tests pin; Reason texts have their own test.
type row struct {
	Key      string
	Phase    priority.JobPhase
	Position int
	Ahead    string
	Blocker  string
	Repair   bool
	Starved  bool
	// CoolingDown is compared too: the filter tells the scheduler to retry such a job.
	CoolingDown bool
}

func rowsOf(q *priority.Queue) []row {
	var out []row
	for _, list := range [][]*priority.Decision{q.Order, q.Running, q.Unschedulable} {
		for _, d := range list {
			out = append(out, row{d.Key, d.Phase, d.Position, d.Ahead, d.Blocker, d.Repair, d.Starved, d.CoolingDown})
		}
	}
	return out
}

func cpuNodes(cpus ...int64) []priority.Node {
	out := make([]priority.Node, len(cpus))
	for i, c := range cpus {
		out[i] = node("n"+strconv.Itoa(i+1), res(c, 64*gi))
	}
	return out
}

// one-worker jobs keep the scenarios short; prio orders them (J), all else equal.
func workerJob(key string, prio int32, cpu int64) *jobB {
	return mkJob(key).prio(prio).gang(0, nil, 1, res(cpu, gi))
}

func TestAdmit(t *testing.T) {
	// The shared scenario for the policies: h (highest P) needs 3 x 3000m on 4000+4000+2000:
	// two workers fit, the third does not. m needs 2000m, l needs 1500m.
	policyJobs := func() []priority.Job {
		return []priority.Job{
			mkJob("ns/h").prio(900000).gang(0, nil, 3, res(3000, gi)).obj(),
			workerJob("ns/m", 500000, 2000).obj(),
			workerJob("ns/l", 100000, 1500).obj(),
			mkJob("ns/i").prio(300000).min(4).gang(0, nil, 2, res(100, gi)).obj(),
		}
	}
	policyNodes := cpuNodes(4000, 4000, 2000)
	const hBlocker = "worker ns/h-w-2 needs cpu 3000m on a node; the most free on any node is 2000m"
	const iBlocker = "gang incomplete: 2 of 4 pods exist"
	// reserved is the policy scenario when h, which does not fit, reserves what fits of it:
	// l (1500m) would fit on a bare n1 but not beside the reservation.
	reserved := []row{
		{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 1, Blocker: hBlocker},
		{Key: "ns/m", Phase: priority.PhaseAdmitted, Position: 2},
		{Key: "ns/i", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/m", Blocker: iBlocker},
		{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 4, Ahead: "ns/i",
			Blocker: "does not fit beside the reservation of ns/h: worker ns/l-w-0 needs cpu 1500m on a node; the most free on any node is 1000m"},
	}
	// skipped is the policy scenario when h, which does not fit, takes nothing.
	skipped := []row{
		{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 1, Blocker: hBlocker},
		{Key: "ns/m", Phase: priority.PhaseAdmitted, Position: 2},
		{Key: "ns/i", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/m", Blocker: iBlocker},
		{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 4},
	}

	tests := []struct {
		name   string
		policy priority.Policy
		// asDefault runs policy as it is; otherwise an empty policy runs reserve.
		asDefault bool
		state     priority.State
		now       time.Time
		want      []row
	}{
		{
			name:  "everything fits: all admitted in P order",
			state: priority.State{Nodes: cpuNodes(8000), Jobs: []priority.Job{workerJob("ns/b", 0, 1000).obj(), workerJob("ns/a", 1000000, 1000).obj()}},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/b", Phase: priority.PhaseAdmitted, Position: 2},
			},
		},
		{
			name:   "strict: the head does not fit and every eligible job behind it waits",
			policy: priority.PolicyStrict,
			state:  priority.State{Nodes: policyNodes, Jobs: policyJobs()},
			want: []row{
				{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 1, Blocker: hBlocker},
				{Key: "ns/m", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/h", Blocker: "strict order: behind ns/h"},
				{Key: "ns/i", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/m", Blocker: iBlocker},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 4, Ahead: "ns/i", Blocker: "strict order: behind ns/h"},
			},
		},
		{
			name:   "strict: jobs ahead of the blocked head are admitted",
			policy: priority.PolicyStrict,
			state:  priority.State{Nodes: policyNodes, Jobs: append(policyJobs(), workerJob("ns/top", 1000000, 1000).created(t0.Add(-20*time.Minute)).obj())},
			want: []row{
				{Key: "ns/top", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/top",
					Blocker: "worker ns/h-w-2 needs cpu 3000m on a node; the most free on any node is 2000m"},
				{Key: "ns/m", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/h", Blocker: "strict order: behind ns/h"},
				{Key: "ns/i", Phase: priority.PhaseWaiting, Position: 4, Ahead: "ns/m", Blocker: iBlocker},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 5, Ahead: "ns/i", Blocker: "strict order: behind ns/h"},
			},
		},
		{
			name:   "reserve: the head keeps what fits; later jobs backfill only into what is left",
			policy: priority.PolicyReserve,
			state:  priority.State{Nodes: policyNodes, Jobs: policyJobs()},
			// h holds 3000m on n1 and n2; m fits in n3's 2000m; l (1500m) would fit on a bare
			// n1 but not beside the reservation: 1000m, 1000m, 0m are left.
			want: []row{
				{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 1, Blocker: hBlocker},
				{Key: "ns/m", Phase: priority.PhaseAdmitted, Position: 2},
				{Key: "ns/i", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/m", Blocker: iBlocker},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 4, Ahead: "ns/i",
					Blocker: "does not fit beside the reservation of ns/h: worker ns/l-w-0 needs cpu 1500m on a node; the most free on any node is 1000m"},
			},
		},
		{
			name:      "an empty policy is the default, reserve",
			asDefault: true,
			state:     priority.State{Nodes: policyNodes, Jobs: policyJobs()},
			want:      reserved,
		},
		{
			// h has waited less than ReserveAfter: it reserves nothing yet, and l fits.
			name:   "backfill: before reserveAfter as besteffort",
			policy: priority.PolicyBackfill,
			state:  priority.State{Nodes: policyNodes, Jobs: policyJobs()},
			want:   skipped,
		},
		{
			// Every job has waited ReserveAfter (10m): h reserves, l no longer fits.
			name:   "backfill: from reserveAfter as reserve",
			policy: priority.PolicyBackfill,
			state:  priority.State{Nodes: policyNodes, Jobs: policyJobs()},
			now:    t0.Add(10 * time.Minute),
			want:   reserved,
		},
		{
			name:      "a policy Admit does not know is read as the default",
			policy:    "fifo",
			asDefault: true,
			state:     priority.State{Nodes: policyNodes, Jobs: policyJobs()},
			want:      reserved,
		},
		{
			name:   "reserve: only the first job that does not fit reserves",
			policy: priority.PolicyReserve,
			state: priority.State{Nodes: cpuNodes(4000, 4000), Jobs: []priority.Job{
				mkJob("ns/h").prio(900000).gang(0, nil, 3, res(3000, gi)).obj(), // 2 of 3 fit: reserves 6000m
				mkJob("ns/g").prio(800000).gang(0, nil, 2, res(1000, gi)).obj(), // fits in the 2 x 1000m left
				mkJob("ns/k").prio(700000).gang(0, nil, 2, res(5000, gi)).obj(), // fits nowhere, reserves nothing
				mkJob("ns/z").prio(600000).gang(0, nil, 1, res(1000, gi)).obj(), // nothing left
			}},
			want: []row{
				{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 1, Blocker: "worker ns/h-w-2 needs cpu 3000m on a node; the most free on any node is 1000m"},
				{Key: "ns/g", Phase: priority.PhaseAdmitted, Position: 2},
				{Key: "ns/k", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/g",
					Blocker: "does not fit beside the reservation of ns/h: worker ns/k-w-0 needs cpu 5000m on a node; the most free on any node is 0m"},
				{Key: "ns/z", Phase: priority.PhaseWaiting, Position: 4, Ahead: "ns/k",
					Blocker: "does not fit beside the reservation of ns/h: worker ns/z-w-0 needs cpu 1000m on a node; the most free on any node is 0m"},
			},
		},
		{
			name:   "besteffort: a job that does not fit is skipped and takes nothing",
			policy: priority.PolicyBestEffort,
			state:  priority.State{Nodes: policyNodes, Jobs: policyJobs()},
			// h is taken back out, so m (n1) and l (n1 again: 2000m left) both fit.
			want: skipped,
		},
		{
			name:   "backfill: a job that does not fit takes nothing while it is younger than reserveAfter",
			policy: priority.PolicyBackfill,
			state:  priority.State{Nodes: policyNodes, Jobs: policyJobs()},
			// As under besteffort: m (n1) and l (n1 again) both fit.
			want: skipped,
		},
		{
			name:   "backfill: once it has waited reserveAfter it reserves, as under reserve",
			policy: priority.PolicyBackfill,
			state: priority.State{Nodes: policyNodes, Jobs: []priority.Job{
				mkJob("ns/h").prio(900000).gang(0, nil, 3, res(3000, gi)).created(t0.Add(-priority.DefaultReserveAfter)).obj(),
				workerJob("ns/m", 500000, 2000).obj(),
				workerJob("ns/l", 100000, 1500).obj(),
			}},
			want: []row{
				{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 1, Blocker: hBlocker},
				{Key: "ns/m", Phase: priority.PhaseAdmitted, Position: 2},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/m",
					Blocker: "does not fit beside the reservation of ns/h: worker ns/l-w-0 needs cpu 1500m on a node; the most free on any node is 1000m"},
			},
		},
		{
			name:   "backfill: the first job past reserveAfter reserves, not a younger one ahead of it",
			policy: priority.PolicyBackfill,
			state: priority.State{Nodes: policyNodes, Jobs: []priority.Job{
				mkJob("ns/y").prio(900000).gang(0, nil, 3, res(3000, gi)).obj(),
				mkJob("ns/o").prio(100000).gang(0, nil, 3, res(3000, gi)).created(t0.Add(-15 * time.Minute)).obj(),
				workerJob("ns/s", 50000, 2500).obj(), // fits a bare n1, not beside o's 6000m
			}},
			want: []row{
				{Key: "ns/y", Phase: priority.PhaseWaiting, Position: 1, Blocker: "worker ns/y-w-2 needs cpu 3000m on a node; the most free on any node is 2000m"},
				{Key: "ns/o", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/y", Blocker: "worker ns/o-w-2 needs cpu 3000m on a node; the most free on any node is 2000m"},
				{Key: "ns/s", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/o",
					Blocker: "does not fit beside the reservation of ns/o: worker ns/s-w-0 needs cpu 2500m on a node; the most free on any node is 2000m"},
			},
		},
		{
			name:   "besteffort: capacity taken by admitted jobs is gone for later ones",
			policy: priority.PolicyBestEffort,
			state: priority.State{Nodes: cpuNodes(3000), Jobs: []priority.Job{
				workerJob("ns/a", 900000, 2000).obj(),
				workerJob("ns/b", 800000, 2000).obj(),
				workerJob("ns/c", 700000, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/b", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/a", Blocker: "worker ns/b-w-0 needs cpu 2000m on a node; the most free on any node is 1000m"},
				{Key: "ns/c", Phase: priority.PhaseAdmitted, Position: 3},
			},
		},
		{
			name:   "repair first: a partly bound job goes ahead of a higher P",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(3000), Jobs: []priority.Job{
				workerJob("ns/h", 1000000, 2000).obj(),
				mkJob("ns/r").prio(0).min(3).pods(
					mkPod("r-ps-0", priority.RolePS, 0).req(res(1000, gi)).bound("n1"),
					mkPod("r-w-0", priority.RoleWorker, 0).req(res(1000, gi)),
					mkPod("r-w-1", priority.RoleWorker, 1).req(res(1000, gi)),
				).obj(),
			}},
			want: []row{
				{Key: "ns/r", Phase: priority.PhaseAdmitted, Position: 1, Repair: true},
				{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/r",
					Blocker: "worker ns/h-w-0 needs cpu 2000m on a node; the most free on any node is 1000m"},
			},
		},
		{
			name:   "a repair job's worker goes next to its bound PS, leaving the first node whole",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(2000, 1000), Jobs: []priority.Job{
				mkJob("ns/r").pods(
					mkPod("r-ps-0", priority.RolePS, 0).req(res(500, gi)).bound("n2"),
					mkPod("r-w-0", priority.RoleWorker, 0).req(res(1000, gi)),
				).obj(),
				workerJob("ns/big", 1000000, 2000).obj(),
			}},
			want: []row{
				{Key: "ns/r", Phase: priority.PhaseAdmitted, Position: 1, Repair: true},
				{Key: "ns/big", Phase: priority.PhaseAdmitted, Position: 2},
			},
		},
		{
			name:   "a gathering job keeps the turn over a higher P; held pods are not fitted again",
			policy: priority.PolicyStrict,
			// n1's Free is already net of g's held worker; g needs only its second worker.
			state: priority.State{Nodes: cpuNodes(2000), Jobs: []priority.Job{
				workerJob("ns/h", 1000000, 2000).obj(),
				mkJob("ns/g").prio(0).pods(
					mkPod("g-w-0", priority.RoleWorker, 0).req(res(2000, gi)).held("n1"),
					mkPod("g-w-1", priority.RoleWorker, 1).req(res(2000, gi)),
				).obj(),
			}},
			want: []row{
				{Key: "ns/g", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/h", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/g", Blocker: "worker ns/h-w-0 needs cpu 2000m on a node; the most free on any node is 0m"},
			},
		},
		{
			name:   "starved jobs go to the front, oldest first, after repair and gathering",
			policy: priority.PolicyBestEffort,
			state: priority.State{Nodes: cpuNodes(100000), Jobs: []priority.Job{
				workerJob("ns/top", 1000000, 1000).user("gold").obj(),
				workerJob("ns/old", 0, 1000).created(t0.Add(-50 * time.Minute)).obj(),
				workerJob("ns/older", 0, 1000).created(t0.Add(-60 * time.Minute)).obj(),
				workerJob("ns/young-starved", 1000000, 1000).created(t0.Add(-31 * time.Minute)).obj(),
				workerJob("ns/not-yet", 0, 1000).created(t0.Add(-29 * time.Minute)).obj(),
				mkJob("ns/g").pods(
					mkPod("g-w-0", priority.RoleWorker, 0).req(res(1000, gi)).held("n1"),
					mkPod("g-w-1", priority.RoleWorker, 1).req(res(1000, gi)),
				).obj(),
			}},
			want: []row{
				{Key: "ns/g", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/older", Phase: priority.PhaseAdmitted, Position: 2, Starved: true},
				{Key: "ns/old", Phase: priority.PhaseAdmitted, Position: 3, Starved: true},
				{Key: "ns/young-starved", Phase: priority.PhaseAdmitted, Position: 4, Starved: true},
				{Key: "ns/top", Phase: priority.PhaseAdmitted, Position: 5},
				{Key: "ns/not-yet", Phase: priority.PhaseAdmitted, Position: 6},
			},
		},
		{
			name:   "a starved job takes the turn from a higher P when only one fits",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(1000), Jobs: []priority.Job{
				workerJob("ns/top", 1000000, 1000).user("gold").obj(),
				workerJob("ns/s", 0, 1000).created(t0.Add(-45 * time.Minute)).obj(),
			}},
			want: []row{
				{Key: "ns/s", Phase: priority.PhaseAdmitted, Position: 1, Starved: true},
				{Key: "ns/top", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/s",
					Blocker: "worker ns/top-w-0 needs cpu 1000m on a node; the most free on any node is 0m"},
			},
		},
		{
			// Urgency is a class granted by the admin: an urgent job of the lowest P goes
			// ahead of starved jobs and of every job that is not urgent, after the jobs
			// completing or gathering a gang.
			name:   "urgent jobs go ahead of starved ones and of higher P, by P among themselves",
			policy: priority.PolicyBestEffort,
			state: priority.State{Nodes: cpuNodes(100000), Jobs: []priority.Job{
				workerJob("ns/top", 1000000, 1000).user("gold").obj(),
				workerJob("ns/s", 0, 1000).created(t0.Add(-45 * time.Minute)).obj(),
				workerJob("ns/u-low", 0, 1000).urgent().obj(),
				workerJob("ns/u-high", 0, 1000).urgent().user("gold").obj(),
				mkJob("ns/g").pods(
					mkPod("g-w-0", priority.RoleWorker, 0).req(res(1000, gi)).held("n1"),
					mkPod("g-w-1", priority.RoleWorker, 1).req(res(1000, gi)),
				).obj(),
			}},
			want: []row{
				{Key: "ns/g", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/u-high", Phase: priority.PhaseAdmitted, Position: 2},
				{Key: "ns/u-low", Phase: priority.PhaseAdmitted, Position: 3},
				{Key: "ns/s", Phase: priority.PhaseAdmitted, Position: 4, Starved: true},
				{Key: "ns/top", Phase: priority.PhaseAdmitted, Position: 5},
			},
		},
		{
			name:   "cool-down: the job waits and does not block; a past cool-down is over",
			policy: priority.PolicyStrict,
			state: priority.State{
				Nodes: cpuNodes(1000),
				Jobs: []priority.Job{
					workerJob("ns/c", 1000000, 1000).obj(),
					workerJob("ns/past", 500000, 1000).obj(),
					workerJob("ns/l", 0, 1000).obj(),
				},
				CoolDown: map[string]time.Time{
					"ns/c":    t0.Add(90 * time.Second),
					"ns/past": t0.Add(-time.Second),
					"ns/l":    t0, // until == now: over
				},
			},
			want: []row{
				{Key: "ns/c", Phase: priority.PhaseWaiting, Position: 1, Blocker: "cooling down until 2025-03-01T12:01:30Z after a hold timeout", CoolingDown: true},
				{Key: "ns/past", Phase: priority.PhaseAdmitted, Position: 2},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 3, Ahead: "ns/past",
					Blocker: "worker ns/l-w-0 needs cpu 1000m on a node; the most free on any node is 0m"},
			},
		},
		{
			name:   "incomplete and gated gangs wait without blocking, even under strict",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(4000), Jobs: []priority.Job{
				mkJob("ns/inc").prio(1000000).min(6).gang(1, res(1000, gi), 2, res(1000, gi)).obj(),
				mkJob("ns/gated").prio(900000).pods(
					mkPod("gated-w-0", priority.RoleWorker, 0).req(res(1000, gi)),
					mkPod("gated-w-1", priority.RoleWorker, 1).req(res(1000, gi)).gated(),
					mkPod("gated-w-2", priority.RoleWorker, 2).req(res(1000, gi)).gated(),
				).obj(),
				workerJob("ns/l", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/inc", Phase: priority.PhaseWaiting, Position: 1, Blocker: "gang incomplete: 3 of 6 pods exist"},
				{Key: "ns/gated", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/inc", Blocker: "scheduling gated: 2 pending pods have scheduling gates"},
				{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 3},
			},
		},
		{
			name:   "a job whose gang size is not known waits without blocking, even under strict",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(4000), Jobs: []priority.Job{
				mkJob("ns/tf").prio(1000000).unknown("its TFJob ns/tf is not read yet").gang(1, res(1000, gi), 2, res(1000, gi)).obj(),
				workerJob("ns/l", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/tf", Phase: priority.PhaseWaiting, Position: 1, Blocker: "gang size unknown: its TFJob ns/tf is not read yet"},
				{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 2},
			},
		},
		{
			name:   "a finished workload's job runs, whatever is left of it; its room is not waited for",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(2000), Jobs: []priority.Job{
				mkJob("ns/done").prio(1000000).min(6).finished("its TFJob ns/done succeeded").pods(
					mkPod("done-ps-0", priority.RolePS, 0).req(res(1000, gi)).bound("n1"),
				).obj(),
				workerJob("ns/a", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/done", Phase: priority.PhaseRunning},
			},
		},
		{
			name:   "running jobs are not in the queue; their pending elastic pods do not matter",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(1000), Jobs: []priority.Job{
				mkJob("ns/run").min(2).pods(
					mkPod("run-ps-0", priority.RolePS, 0).req(res(1000, gi)).bound("n9"),
					mkPod("run-w-0", priority.RoleWorker, 0).req(res(1000, gi)).bound("n9"),
					mkPod("run-w-1", priority.RoleWorker, 1).req(res(9000, gi)),
				).obj(),
				workerJob("ns/a", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/run", Phase: priority.PhaseRunning},
			},
		},
		{
			name:   "elastic pods beyond the minimum need not fit and take nothing",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(5000), Jobs: []priority.Job{
				mkJob("ns/e").prio(1000000).min(2).gang(1, res(2000, gi), 3, res(2000, gi)).obj(),
				workerJob("ns/l", 0, 1000).obj(),
			}},
			want: []row{
				{Key: "ns/e", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 2},
			},
		},
		{
			name:   "multi-resource per node: a gang that fits in sum but not per node waits",
			policy: priority.PolicyStrict,
			state: priority.State{
				Nodes: []priority.Node{node("n1", res(8000, 2*gi)), node("n2", res(1000, 32*gi))},
				Jobs:  []priority.Job{mkJob("ns/a").gang(0, nil, 1, res(4000, 8*gi)).obj()},
			},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseWaiting, Position: 1,
					Blocker: "worker ns/a-w-0 needs cpu 4000m, memory 8Gi on one node; no node has all of it free"},
			},
		},
		{
			name:   "ties: same P goes to the older job, then the smaller key",
			policy: priority.PolicyBestEffort,
			state: priority.State{Nodes: cpuNodes(10000), Jobs: []priority.Job{
				workerJob("ns/b", 0, 1000).obj(),
				workerJob("ns/a", 0, 1000).obj(),
				workerJob("ns/c", 0, 1000).created(t0.Add(-time.Nanosecond)).obj(),
			}},
			// c is older by a nanosecond, which also raises its W by a hair.
			want: []row{
				{Key: "ns/c", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/a", Phase: priority.PhaseAdmitted, Position: 2},
				{Key: "ns/b", Phase: priority.PhaseAdmitted, Position: 3},
			},
		},
		{
			name:  "empty state",
			state: priority.State{},
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := priority.DefaultModel()
			m.Policy = tt.policy
			if tt.policy == "" && !tt.asDefault {
				m.Policy = priority.PolicyReserve
			}
			now := tt.now
			if now.IsZero() {
				now = t0
			}
			q := m.Admit(tt.state, now)
			if diff := cmp.Diff(tt.want, rowsOf(q)); diff != "" {
				t.Errorf("Admit() (-want +got):\n%s", diff)
			}
			checkQueueInvariants(t, q, tt.state)
		})
	}
}

// checkQueueInvariants checks what must hold for every queue: positions, lengths, lookups.
func checkQueueInvariants(t *testing.T, q *priority.Queue, s priority.State) {
	t.Helper()
	if q.Len() != len(q.Order) {
		t.Errorf("Len() = %d, want %d", q.Len(), len(q.Order))
	}
	if got, want := len(q.Order)+len(q.Running)+len(q.Unschedulable), len(s.Jobs); got != want {
		t.Errorf("queue holds %d jobs, state has %d", got, want)
	}
	// Keys should be unique; for a repeated key Lookup gives the first in queue order,
	// then the first running.
	first := map[string]*priority.Decision{}
	for _, list := range [][]*priority.Decision{q.Order, q.Running, q.Unschedulable} {
		for _, d := range list {
			if _, ok := first[d.Key]; !ok {
				first[d.Key] = d
			}
		}
	}
	for i, d := range q.Order {
		if d.Position != i+1 || d.QueueLen != len(q.Order) || d.Phase == priority.PhaseRunning {
			t.Errorf("Order[%d] = %s: position %d, queueLen %d, phase %s", i, d.Key, d.Position, d.QueueLen, d.Phase)
		}
		if d.Reason == "" {
			t.Errorf("%s has no reason", d.Key)
		}
		if d.Phase == priority.PhaseWaiting && d.Blocker == "" {
			t.Errorf("%s waits without a blocker", d.Key)
		}
		if got, ok := q.Lookup(d.Key); !ok || got != first[d.Key] {
			t.Errorf("Lookup(%q) = %v, %v; want the queued decision", d.Key, got, ok)
		}
	}
	for _, d := range q.Running {
		if d.Position != 0 || d.Phase != priority.PhaseRunning {
			t.Errorf("running %s: position %d, phase %s", d.Key, d.Position, d.Phase)
		}
		if got, ok := q.Lookup(d.Key); !ok || got != first[d.Key] {
			t.Errorf("Lookup(%q) = %v, %v; want the running decision", d.Key, got, ok)
		}
	}
	for _, d := range q.Unschedulable {
		if d.Position != 0 || d.Phase != priority.PhaseUnschedulable || !strings.HasPrefix(d.Blocker, "never fits: ") || d.Reason == "" {
			t.Errorf("unschedulable %s: position %d, phase %s, blocker %q, reason %q", d.Key, d.Position, d.Phase, d.Blocker, d.Reason)
		}
		if got, ok := q.Lookup(d.Key); !ok || got != first[d.Key] {
			t.Errorf("Lookup(%q) = %v, %v; want the unschedulable decision", d.Key, got, ok)
		}
	}
	if _, ok := q.Lookup("no/such-job"); ok {
		t.Errorf("Lookup of an unknown key succeeded")
	}
}

func TestAdmitCounts(t *testing.T) {
	m := priority.DefaultModel()
	s := priority.State{Nodes: cpuNodes(100000), Jobs: []priority.Job{
		mkJob("ns/a").min(3).pods(
			mkPod("a-ps-0", priority.RolePS, 0).req(res(1000, gi)).bound("n1"),
			mkPod("a-w-0", priority.RoleWorker, 0).req(res(1000, gi)).held("n1"),
			mkPod("a-w-1", priority.RoleWorker, 1).req(res(1000, gi)),
			mkPod("a-w-2", priority.RoleWorker, 2).req(res(1000, gi)),
		).obj(),
	}}
	q := m.Admit(s, t0)
	d, ok := q.Lookup("ns/a")
	if !ok {
		t.Fatal("Lookup(ns/a) failed")
	}
	terms := m.Terms(&s.Jobs[0], t0)
	want := &priority.Decision{
		Key: "ns/a", Phase: priority.PhaseAdmitted, Position: 1, QueueLen: 1,
		Terms: terms, P: m.Combined(terms), User: "bob", Repair: true,
		Pods: 4, Bound: 1, Held: 1, MinMember: 3,
		Reason: d.Reason, // pinned in TestAdmitReasons
		// Only the one pod still needed for the minimum is planned, next to the bound PS.
		Plan: map[string]string{"uid-a-w-1": "n1"}, TurnSince: t0,
		// The bound PS, the held worker and the planned one share n1.
		Placement: priority.Placement{Level: "node", Domains: []string{"n1"}, Workers: 2, NearPSNode: 2, NearPSDomain: 2},
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
}

func TestAdmitReasons(t *testing.T) {
	// maxGang 3 makes N exact: n=1 gives 0.5, n=3 gives 1. Weights are the defaults.
	m := priority.DefaultModel()
	m.MaxGang = 3
	m.UserTiers = map[string]string{"alice": "gold", "carol": "silver"}
	one := func(key string, cpu int64) *jobB { return mkJob(key).gang(0, nil, 1, res(cpu, gi)) }
	tests := []struct {
		name   string
		policy priority.Policy
		state  priority.State
		want   map[string]string
	}{
		{
			name:   "admitted, waiting on its own fit, strict behind, running",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: cpuNodes(3000, 1000), Jobs: []priority.Job{
				// P = .3*1 + .3*.5 + 0 + .2*.5 = 0.55
				one("ns/a", 1000).user("alice").prio(500000).obj(),
				// P = .3*.6 + .3*.2 + 0 + .2*1 = 0.44; 3 x 1500m: the second does not fit
				mkJob("ns/b").user("carol").prio(200000).gang(1, res(1500, gi), 2, res(1500, gi)).obj(),
				// P = .3*.3 + 0 + 0 + .2*.5 = 0.19
				one("ns/c", 100).obj(),
				mkJob("ns/run").pods(mkPod("run-w-0", priority.RoleWorker, 0).bound("n2")).obj(),
			}},
			want: map[string]string{
				"ns/a": "job ns/a has the turn (1st of 3, P=0.55: user 1.00, job 0.50, wait 0.00, parallelism 0.50)",
				"ns/b": "job ns/b waits for its turn: 2nd of 3, behind ns/a (P=0.55); it does not fit: worker ns/b-w-0 needs cpu 1500m on a node; the most free on any node is 1000m",
				"ns/c": "job ns/c waits for its turn: 3rd of 3, behind ns/b (P=0.44); strict order: ns/b goes first and does not fit: worker ns/b-w-0 needs cpu 1500m on a node; the most free on any node is 1000m",
			},
		},
		{
			name:   "reserving job and a job beside the reservation",
			policy: priority.PolicyReserve,
			state: priority.State{Nodes: cpuNodes(2000, 1000), Jobs: []priority.Job{
				mkJob("ns/b").user("carol").prio(200000).gang(1, res(1500, gi), 2, res(1500, gi)).obj(),
				one("ns/c", 1500).obj(),
				one("ns/d", 1000).obj(),
			}},
			want: map[string]string{
				"ns/b": "job ns/b waits for its turn: 1st of 3; it does not fit: worker ns/b-w-0 needs cpu 1500m on a node; the most free on any node is 1000m; what fits of it is set aside meanwhile",
				"ns/c": "job ns/c waits for its turn: 2nd of 3, behind ns/b (P=0.44); it does not fit beside the reservation of ns/b: worker ns/c-w-0 needs cpu 1500m on a node; the most free on any node is 1000m",
				"ns/d": "job ns/d has the turn (3rd of 3, P=0.19: user 0.30, job 0.00, wait 0.00, parallelism 0.50)",
			},
		},
		{
			name:   "backfill: a job that does not fit yet says when it will reserve",
			policy: priority.PolicyBackfill,
			state: priority.State{Nodes: cpuNodes(2000, 1000), Jobs: []priority.Job{
				mkJob("ns/b").user("carol").prio(200000).gang(1, res(1500, gi), 2, res(1500, gi)).obj(),
				one("ns/c", 1500).obj(),
			}},
			want: map[string]string{
				"ns/b": "job ns/b waits for its turn: 1st of 2; it does not fit: worker ns/b-w-0 needs cpu 1500m on a node; the most free on any node is 1000m; it reserves room once it has waited 10m0s",
				"ns/c": "job ns/c has the turn (2nd of 2, P=0.19: user 0.30, job 0.00, wait 0.00, parallelism 0.50)",
			},
		},
		{
			name:   "repair, gathering, starved and ineligible",
			policy: priority.PolicyBestEffort,
			state: priority.State{
				Nodes: cpuNodes(100000),
				Jobs: []priority.Job{
					mkJob("ns/r").min(3).pods(
						mkPod("r-ps-0", priority.RolePS, 0).req(res(1000, gi)).bound("n1"),
						mkPod("r-w-0", priority.RoleWorker, 0).req(res(1000, gi)).bound("n1"),
						mkPod("r-w-1", priority.RoleWorker, 1).req(res(1000, gi)),
					).obj(),
					mkJob("ns/g").pods(
						mkPod("g-w-0", priority.RoleWorker, 0).req(res(1000, gi)).held("n1"),
						mkPod("g-w-1", priority.RoleWorker, 1).req(res(1000, gi)).held("n1"),
						mkPod("g-w-2", priority.RoleWorker, 2).req(res(1000, gi)),
					).obj(),
					one("ns/s", 1000).created(t0.Add(-40*time.Minute - 400*time.Millisecond)).obj(),
					one("ns/cool", 1000).obj(),
					mkJob("ns/gated").pods(mkPod("gated-w-0", priority.RoleWorker, 0).req(res(1000, gi)).gated()).obj(),
				},
				CoolDown: map[string]time.Time{"ns/cool": t0.Add(time.Minute)},
			},
			want: map[string]string{
				// U .3, N 1 (n=3): P = .09 + .2 = 0.29
				"ns/r": "job ns/r has the turn (1st of 5, P=0.29: user 0.30, job 0.00, wait 0.00, parallelism 1.00); it completes a partial gang (2 of 3 bound)",
				"ns/g": "job ns/g has the turn (2nd of 5, P=0.29: user 0.30, job 0.00, wait 0.00, parallelism 1.00); 2 of 3 pods are gathering at bind",
				// W = 1-exp(-4.0007) = 0.98: P = .09 + .2*.98 + .1 = 0.39
				"ns/s":     "job ns/s has the turn (3rd of 5, P=0.39: user 0.30, job 0.00, wait 0.98, parallelism 0.50); it has waited 40m0s, past the starvation bound of 30m0s",
				"ns/cool":  "job ns/cool waits for its turn: 4th of 5, behind ns/s (P=0.39); cooling down until 2025-03-01T12:01:00Z after a hold timeout",
				"ns/gated": "job ns/gated waits for its turn: 5th of 5, behind ns/cool (P=0.19); scheduling gated: 1 pending pod has scheduling gates",
			},
		},
		{
			name:   "unschedulable: bigger than the cluster, and a pod bigger than any node",
			policy: priority.PolicyStrict,
			state: priority.State{Nodes: capNodes(8000, 8000, 8000), Jobs: []priority.Job{
				mkJob("ns/huge").gang(1, res(4000, gi), 4, res(4000, gi)).obj(),
				one("ns/wide", 9000).obj(),
				one("ns/ok", 1000).obj(),
			}},
			want: map[string]string{
				"ns/huge": "job ns/huge can never fit as the cluster is: only 4 of the 5 pods it needs fit even with no other job's pods on the nodes; it takes no turn and sets nothing aside until the nodes, or the pods in no job, change",
				"ns/wide": "job ns/wide can never fit as the cluster is: worker ns/wide-w-0 needs cpu 9000m on a node; the most free on any node is 8000m even with no other job's pods on the nodes; it takes no turn and sets nothing aside until the nodes, or the pods in no job, change",
				"ns/ok":   "job ns/ok has the turn (1st of 1, P=0.19: user 0.30, job 0.00, wait 0.00, parallelism 0.50)",
			},
		},
		{
			name: "running with an elastic pod",
			state: priority.State{Jobs: []priority.Job{
				mkJob("ns/run").min(2).pods(
					mkPod("run-w-0", priority.RoleWorker, 0).bound("n1"),
					mkPod("run-w-1", priority.RoleWorker, 1).bound("n1"),
					mkPod("run-w-2", priority.RoleWorker, 2),
				).obj(),
				mkJob("ns/all").pods(mkPod("all-w-0", priority.RoleWorker, 0).bound("n1")).obj(),
				mkJob("ns/done").min(6).finished("its TFJob ns/done succeeded").pods(mkPod("done-ps-0", priority.RolePS, 0).bound("n1")).obj(),
				mkJob("ns/tf").unknown("its TFJob ns/tf is not read yet").gang(0, nil, 1, res(100, gi)).obj(),
			}},
			want: map[string]string{
				"ns/run":  "job ns/run is running (2 of 3 bound, minimum 2)",
				"ns/all":  "job ns/all is running (1 of 1 bound)",
				"ns/done": "job ns/done has finished (its TFJob ns/done succeeded): 1 of its pods is still bound, and it waits for nothing",
				"ns/tf":   "job ns/tf waits for its turn: 1st of 1; gang size unknown: its TFJob ns/tf is not read yet",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mm := m
			mm.Policy = tt.policy
			if mm.Policy == "" {
				mm.Policy = priority.PolicyReserve
			}
			q := mm.Admit(tt.state, t0)
			got := map[string]string{}
			for key := range tt.want {
				if d, ok := q.Lookup(key); ok {
					got[key] = d.Reason
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBackfillReserveAfter pins when a job that does not fit reserves under backfill: after
// reserveAfter, or once starved whatever reserveAfter says, so the starvation bound holds.
func TestBackfillReserveAfter(t *testing.T) {
	tests := []struct {
		name         string
		reserveAfter time.Duration
		waited       time.Duration
		reserves     bool
	}{
		{"younger than reserveAfter", 10 * time.Minute, 9 * time.Minute, false},
		{"waited reserveAfter", 10 * time.Minute, 10 * time.Minute, true},
		{"reserveAfter 0 reserves at once", 0, 0, true},
		{"starved before reserveAfter", 2 * time.Hour, 31 * time.Minute, true},
		{"not starved, reserveAfter not reached", 2 * time.Hour, 29 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := priority.DefaultModel()
			m.Policy, m.ReserveAfter = priority.PolicyBackfill, tt.reserveAfter
			// h (3 x 3000m) does not fit 4000+4000+2000; l (2500m) fits n1 unless h reserves
			// 3000m on n1 and n2.
			s := priority.State{Nodes: cpuNodes(4000, 4000, 2000), Jobs: []priority.Job{
				mkJob("ns/h").prio(900000).gang(0, nil, 3, res(3000, gi)).created(t0.Add(-tt.waited)).obj(),
				workerJob("ns/l", 0, 2500).created(t0.Add(-tt.waited)).obj(),
			}}
			q := m.Admit(s, t0)
			l, _ := q.Lookup("ns/l")
			if reserved := l.Phase == priority.PhaseWaiting; reserved != tt.reserves {
				t.Errorf("ns/h reserves = %v (ns/l: %s, %q), want %v", reserved, l.Phase, l.Blocker, tt.reserves)
			}
		})
	}
}

func TestOrdinal(t *testing.T) {
	tests := []struct {
		name string
		n    int
		want string
	}{
		{"1", 1, "1st"}, {"2", 2, "2nd"}, {"3", 3, "3rd"}, {"4", 4, "4th"}, {"10", 10, "10th"},
		{"11", 11, "11th"}, {"12", 12, "12th"}, {"13", 13, "13th"}, {"21", 21, "21st"},
		{"22", 22, "22nd"}, {"23", 23, "23rd"}, {"101", 101, "101st"}, {"111", 111, "111th"},
		{"112", 112, "112th"}, {"1000", 1000, "1000th"}, {"0", 0, "0th"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := priority.Ordinal(tt.n); got != tt.want {
				t.Errorf("Ordinal(%d) = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
}

// TestQueueContended: a queue is contended when a job waits with its whole gang there,
// not when every job fits, when the only waiting job is still short of pods, or when the
// only job that does not fit can never fit.
func TestQueueContended(t *testing.T) {
	tests := []struct {
		name  string
		state priority.State
		want  bool
	}{
		{"everything fits", priority.State{Nodes: cpuNodes(8000), Jobs: []priority.Job{
			workerJob("ns/a", 0, 1000).obj(), workerJob("ns/b", 0, 1000).obj()}}, false},
		{"a complete job waits for room", priority.State{Nodes: cpuNodes(2000), Jobs: []priority.Job{
			workerJob("ns/a", 1000000, 2000).obj(), workerJob("ns/b", 0, 2000).obj()}}, true},
		{"the waiting job is short of pods", priority.State{Nodes: cpuNodes(8000), Jobs: []priority.Job{
			workerJob("ns/a", 0, 1000).obj(), mkJob("ns/i").min(4).gang(0, nil, 2, res(100, gi)).obj()}}, false},
		{"the job that does not fit never can", priority.State{Nodes: []priority.Node{{Name: "n1", Free: res(2000, 64*gi), Capacity: res(2000, 64*gi)}}, Jobs: []priority.Job{
			workerJob("ns/a", 0, 1000).obj(), workerJob("ns/huge", 0, 64000).obj()}}, false},
		{"no jobs", priority.State{Nodes: cpuNodes(2000)}, false},
		{"the waiting job's gang size is not known", priority.State{Nodes: cpuNodes(8000), Jobs: []priority.Job{
			workerJob("ns/a", 0, 1000).obj(), mkJob("ns/tf").unknown("its TFJob ns/tf is not read yet").gang(0, nil, 2, res(100, gi)).obj()}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := priority.DefaultModel().Admit(tt.state, t0)
			if got := q.Contended(); got != tt.want {
				t.Errorf("Contended() = %v, want %v; queue %+v", got, tt.want, rowsOf(q))
			}
		})
	}
}

func TestQueueNilSafe(t *testing.T) {
	var q *priority.Queue
	if q.Len() != 0 {
		t.Errorf("nil Len() = %d", q.Len())
	}
	if _, ok := q.Lookup("ns/a"); ok {
		t.Errorf("nil Lookup found something")
	}
	if q.Contended() {
		t.Errorf("nil Contended() = true")
	}
}

// randomState builds a cluster and jobs in every situation the queue distinguishes.
func randomState(r *rand.Rand, jobs, nodes int) priority.State {
	var s priority.State
	for i := range nodes {
		free := res(int64(r.IntN(16))*1000, int64(r.IntN(64))*gi, "pods", 110)
		if r.IntN(4) == 0 {
			free["nvidia.com/gpu"] = int64(r.IntN(8))
		}
		s.Nodes = append(s.Nodes, node("node-"+strconv.Itoa(i), free))
	}
	s.CoolDown = map[string]time.Time{}
	users := []string{"alice", "bob", "carol", "dave"}
	for i := range jobs {
		key := "ns" + strconv.Itoa(i%7) + "/job-" + strconv.Itoa(i)
		j := mkJob(key).user(users[r.IntN(len(users))]).prio(int32(r.IntN(5)) * 250000).
			created(t0.Add(-time.Duration(r.IntN(60)) * time.Minute))
		if r.IntN(10) == 0 {
			j.urgent()
		}
		nPS, nW := r.IntN(3), 1+r.IntN(6)
		psReq, wReq := res(int64(1+r.IntN(4))*500, gi), res(int64(1+r.IntN(8))*500, 2*gi)
		if r.IntN(3) == 0 {
			wReq["nvidia.com/gpu"] = int64(1 + r.IntN(2))
		}
		j.gang(nPS, psReq, nW, wReq)
		switch r.IntN(6) {
		case 0:
			j.min(1 + r.IntN(nPS+nW)) // elastic
		case 1:
			j.min(nPS + nW + 1) // incomplete
		}
		for k := range j.j.Pods {
			p := &j.j.Pods[k]
			switch r.IntN(12) {
			case 0:
				p.State, p.Node = priority.PodBound, "node-"+strconv.Itoa(r.IntN(nodes))
			case 1:
				p.State, p.Node = priority.PodHeld, "node-"+strconv.Itoa(r.IntN(nodes))
			case 2:
				p.Gated = true
			}
		}
		switch r.IntN(10) {
		case 0:
			s.CoolDown[key] = t0.Add(time.Minute)
		case 1:
			s.CoolDown[key] = t0.Add(-time.Minute)
		}
		s.Jobs = append(s.Jobs, j.obj())
	}
	return s
}

func shuffleState(r *rand.Rand, s priority.State) priority.State {
	out := priority.State{CoolDown: s.CoolDown, Nodes: slices.Clone(s.Nodes), Jobs: slices.Clone(s.Jobs)}
	r.Shuffle(len(out.Nodes), func(i, j int) { out.Nodes[i], out.Nodes[j] = out.Nodes[j], out.Nodes[i] })
	r.Shuffle(len(out.Jobs), func(i, j int) { out.Jobs[i], out.Jobs[j] = out.Jobs[j], out.Jobs[i] })
	for i := range out.Jobs {
		pods := slices.Clone(out.Jobs[i].Pods)
		r.Shuffle(len(pods), func(a, b int) { pods[a], pods[b] = pods[b], pods[a] })
		out.Jobs[i].Pods = pods
	}
	return out
}

func TestAdmitOrderIndependentAndDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 4242))
	phases := map[priority.JobPhase]int{}
	for _, policy := range []priority.Policy{priority.PolicyStrict, priority.PolicyReserve, priority.PolicyBestEffort, priority.PolicyBackfill} {
		t.Run(string(policy), func(t *testing.T) {
			m := priority.DefaultModel()
			m.Policy = policy
			for i := range 60 {
				s := randomState(r, 5+r.IntN(40), 1+r.IntN(30))
				want := m.Admit(s, t0)
				checkQueueInvariants(t, want, s)
				for _, d := range want.Order {
					phases[d.Phase]++
				}
				phases[priority.PhaseRunning] += len(want.Running)
				if diff := cmp.Diff(want.Order, m.Admit(s, t0).Order); diff != "" {
					t.Fatalf("case %d: the same state gave another queue (-first +second):\n%s", i, diff)
				}
				for range 4 {
					got := m.Admit(shuffleState(r, s), t0)
					if diff := cmp.Diff(want.Order, got.Order); diff != "" {
						t.Fatalf("case %d: queue depends on input order (-first +shuffled):\n%s", i, diff)
					}
					if diff := cmp.Diff(want.Running, got.Running); diff != "" {
						t.Fatalf("case %d: running jobs depend on input order (-first +shuffled):\n%s", i, diff)
					}
				}
			}
		})
	}
	// The generator must reach every phase, or the property proves little.
	for _, p := range []priority.JobPhase{priority.PhaseAdmitted, priority.PhaseWaiting, priority.PhaseRunning} {
		if phases[p] < 20 {
			t.Errorf("only %d decisions in phase %s across the random states", phases[p], p)
		}
	}
}

func TestAdmitDoesNotMutateState(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	s := randomState(r, 30, 10)
	before := deepCopyState(s)
	priority.DefaultModel().Admit(s, t0)
	if diff := cmp.Diff(before, s); diff != "" {
		t.Errorf("Admit changed its state (-before +after):\n%s", diff)
	}
}

func deepCopyState(s priority.State) priority.State {
	out := priority.State{CoolDown: map[string]time.Time{}}
	for k, v := range s.CoolDown {
		out.CoolDown[k] = v
	}
	for _, n := range s.Nodes {
		n.Free = copyRes(n.Free)
		out.Nodes = append(out.Nodes, n)
	}
	for _, j := range s.Jobs {
		pods := slices.Clone(j.Pods)
		for i := range pods {
			pods[i].Request = copyRes(pods[i].Request)
		}
		j.Pods = pods
		out.Jobs = append(out.Jobs, j)
	}
	return out
}

func copyRes(r priority.Resources) priority.Resources {
	if r == nil {
		return nil
	}
	out := priority.Resources{}
	for k, v := range r {
		out[k] = v
	}
	return out
}

// TestAdmitOddInputs feeds Admit what a buggy caller might: a zero model, nil maps, no
// nodes, negative and NaN-prone values. It must not panic, and every decision must still
// encode as JSON (NaN or Inf would not).
func TestAdmitOddInputs(t *testing.T) {
	nan := priority.DefaultModel()
	nan.Weights.User = math.NaN()
	tests := []struct {
		name  string
		model priority.Model
		state priority.State
	}{
		{"zero model, empty state", priority.Model{}, priority.State{}},
		{"zero model, jobs and no nodes", priority.Model{}, priority.State{Jobs: []priority.Job{
			mkJob("ns/a").gang(1, res(1000, gi), 1, res(-5, 0)).obj(),
			mkJob("no-namespace").obj(),
			{Key: "ns/zero-time", Pods: []priority.Pod{{UID: "x", Index: -7, State: priority.PodState(99)}}},
		}}},
		{"NaN weight and nil node maps", nan, priority.State{
			Nodes: []priority.Node{{Name: "n1"}, {Name: ""}},
			Jobs: []priority.Job{
				mkJob("ns/a").min(-3).gang(0, nil, 2, nil).obj(),
				mkJob("ns/a").gang(0, nil, 1, res(1, 1)).obj(), // duplicate key
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.model.Admit(tt.state, t0)
			checkQueueInvariants(t, q, tt.state)
			for _, list := range [][]*priority.Decision{q.Order, q.Running, q.Unschedulable} {
				for _, d := range list {
					if _, err := json.Marshal(d); err != nil {
						t.Errorf("decision %s does not encode: %v", d.Key, err)
					}
				}
			}
		})
	}
}

// TestAdmitInReusedWorkspace: one workspace serving states of growing and shrinking sizes,
// under every policy, gives the same queue as a fresh Admit each time.
func TestAdmitInReusedWorkspace(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	state := func(jobs, nodes int) priority.State {
		var s priority.State
		for i := range nodes {
			free := res(int64(1+r.IntN(8))*1000, int64(1+r.IntN(8))<<30)
			if r.IntN(3) == 0 {
				free["nvidia.com/gpu"] = int64(r.IntN(3))
			}
			s.Nodes = append(s.Nodes, node("n"+strconv.Itoa(i), free))
		}
		for i := range jobs {
			b := mkJob("ns/j"+strconv.Itoa(i)).prio(int32(r.IntN(1000))).
				gang(1+r.IntN(2), res(int64(1+r.IntN(3))*1000, 1<<30), r.IntN(5), res(1000, int64(1+r.IntN(2))<<30))
			j := b.obj()
			for k := range j.Pods {
				switch r.IntN(6) {
				case 0:
					j.Pods[k].State, j.Pods[k].Node = priority.PodBound, "n0"
				case 1:
					j.Pods[k].Gated = true
				}
			}
			s.Jobs = append(s.Jobs, j)
		}
		return s
	}
	var w priority.Workspace
	for _, policy := range []priority.Policy{priority.PolicyStrict, priority.PolicyReserve, priority.PolicyBestEffort, priority.PolicyBackfill} {
		m := priority.DefaultModel()
		m.Policy = policy
		for step, size := range []struct{ jobs, nodes int }{{20, 10}, {60, 40}, {5, 3}, {0, 0}, {40, 70}, {12, 5}} {
			s := state(size.jobs, size.nodes)
			want := m.Admit(s, t0.Add(time.Hour))
			got := m.AdmitIn(s, t0.Add(time.Hour), &w)
			if diff := cmp.Diff(want.Order, got.Order); diff != "" {
				t.Fatalf("%s step %d: queue differs (-fresh +reused):\n%s", policy, step, diff)
			}
			if diff := cmp.Diff(want.Running, got.Running); diff != "" {
				t.Fatalf("%s step %d: running differs (-fresh +reused):\n%s", policy, step, diff)
			}
		}
	}
}

// TestAdmitInSharedMapsEvolvingState: a cluster that changes event by event (pods bind,
// jobs go, nodes fill and empty), with every request and free capacity drawn from a few
// shared maps as the extender's interned records give them, and one workspace reused
// throughout, gives after every event the queue a fresh Admit gives on private copies.
func TestAdmitInSharedMapsEvolvingState(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	kinds := []priority.Resources{res(4000, 8*gi), res(8000, 16*gi), res(8000, 16*gi, "nvidia.com/gpu", 2)}
	requests := []priority.Resources{res(1000, gi), res(2000, 2*gi), res(3000, gi), res(1000, gi, "nvidia.com/gpu", 1)}
	deepCopy := func(s priority.State) priority.State {
		out := priority.State{CoolDown: s.CoolDown}
		for _, n := range s.Nodes {
			n.Free = maps.Clone(n.Free)
			out.Nodes = append(out.Nodes, n)
		}
		for _, j := range s.Jobs {
			j.Pods = slices.Clone(j.Pods)
			for k := range j.Pods {
				j.Pods[k].Request = maps.Clone(j.Pods[k].Request)
			}
			out.Jobs = append(out.Jobs, j)
		}
		return out
	}
	for _, policy := range []priority.Policy{priority.PolicyStrict, priority.PolicyReserve, priority.PolicyBestEffort, priority.PolicyBackfill} {
		m := priority.DefaultModel()
		m.Policy = policy
		var s priority.State
		for i := range 12 {
			s.Nodes = append(s.Nodes, node("n"+strconv.Itoa(i), kinds[r.IntN(len(kinds))]))
		}
		var w priority.Workspace
		next := 0
		for step := range 200 {
			switch op := r.IntN(4); {
			case op == 0 || len(s.Jobs) == 0: // a job arrives
				j := mkJob("ns/j"+strconv.Itoa(next)).prio(int32(r.IntN(1000))).
					gang(1+r.IntN(2), requests[r.IntN(len(requests))], r.IntN(6), requests[r.IntN(len(requests))]).obj()
				next++
				s.Jobs = append(s.Jobs, j)
			case op == 1: // a job goes
				i := r.IntN(len(s.Jobs))
				s.Jobs = slices.Delete(s.Jobs, i, i+1)
			case op == 2: // a pod binds to a node with a copy of its free capacity less the pod
				j := &s.Jobs[r.IntN(len(s.Jobs))]
				if len(j.Pods) == 0 {
					continue
				}
				p := &j.Pods[r.IntN(len(j.Pods))]
				at := r.IntN(len(s.Nodes))
				p.State, p.Node = priority.PodBound, s.Nodes[at].Name
				free := maps.Clone(s.Nodes[at].Free)
				for k, v := range p.Request {
					free[k] -= v
				}
				s.Nodes[at].Free = free
			default: // a node empties back to its shared kind
				s.Nodes[r.IntN(len(s.Nodes))].Free = kinds[r.IntN(len(kinds))]
			}
			now := t0.Add(time.Duration(step) * time.Minute)
			want := m.Admit(deepCopy(s), now)
			got := m.AdmitIn(s, now, &w)
			if diff := cmp.Diff(want.Order, got.Order); diff != "" {
				t.Fatalf("%s step %d: queue differs (-fresh +reused):\n%s", policy, step, diff)
			}
			if diff := cmp.Diff(want.Running, got.Running); diff != "" {
				t.Fatalf("%s step %d: running differs (-fresh +reused):\n%s", policy, step, diff)
			}
		}
	}
}

// TestAdmitWaitSentences: the filter's sentence names what a job waits for and nothing that
// moves while it waits: ten minutes later (every P has changed) and with a job ahead of it
// gone, it reads the same, though the whole Reason does not.
func TestAdmitWaitSentences(t *testing.T) {
	jobs := func() []priority.Job {
		return []priority.Job{
			mkJob("ns/a").prio(1000000).gang(0, nil, 1, res(1000, gi)).obj(),
			mkJob("ns/b").prio(800000).gang(1, res(1500, gi), 2, res(1500, gi)).obj(), // does not fit
			mkJob("ns/c").prio(700000).gang(0, nil, 1, res(1500, gi)).obj(),
			mkJob("ns/inc").prio(600000).min(3).gang(0, nil, 1, res(100, gi)).obj(),
			mkJob("ns/never").prio(500000).gang(0, nil, 1, res(9000, gi)).obj(),
			mkJob("ns/tf").prio(400000).unknown("its TFJob ns/tf is not read yet").gang(0, nil, 1, res(100, gi)).obj(),
		}
	}
	nodes := capNodes(3000, 3000, 1000)
	tests := []struct {
		policy priority.Policy
		want   map[string]string
	}{
		{priority.PolicyStrict, map[string]string{
			"ns/b":     "job ns/b waits for its turn: it does not fit yet: its 3 pods need cpu 4500m, memory 3Gi in all",
			"ns/c":     "job ns/c waits for its turn: strict order, ns/b goes first",
			"ns/inc":   "job ns/inc waits for its turn: gang incomplete: 1 of 3 pods exist",
			"ns/never": "job ns/never can never fit as the cluster is: worker ns/never-w-0 needs cpu 9000m on a node; the most free on any node is 3000m even with no other job's pods on the nodes",
			"ns/tf":    "job ns/tf waits for its gang size to be known: its TFJob ns/tf is not read yet",
		}},
		{priority.PolicyReserve, map[string]string{
			"ns/b": "job ns/b waits for its turn: it does not fit yet: its 3 pods need cpu 4500m, memory 3Gi in all; what fits of it is set aside meanwhile",
			"ns/c": "job ns/c waits for its turn: it does not fit beside the reservation of ns/b: its pod needs cpu 1500m, memory 1Gi",
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			m := priority.DefaultModel()
			m.Policy = tt.policy
			now := m.Admit(priority.State{Nodes: nodes, Jobs: jobs()}, t0)
			later := m.Admit(priority.State{Nodes: nodes, Jobs: jobs()[1:]}, t0.Add(10*time.Minute)) // ns/a is gone
			for key, want := range tt.want {
				d, _ := now.Lookup(key)
				l, _ := later.Lookup(key)
				if d.Wait != want {
					t.Errorf("%s: Wait %q, want %q", key, d.Wait, want)
				}
				if l.Wait != d.Wait {
					t.Errorf("%s: Wait changed to %q ten minutes later", key, l.Wait)
				}
				if d.Phase != priority.PhaseUnschedulable && l.Reason == d.Reason {
					t.Errorf("%s: the Reason did not change either (%q): the test shows nothing", key, d.Reason)
				}
			}
			if d, _ := now.Lookup("ns/a"); d.Wait != "" {
				t.Errorf("admitted ns/a has a Wait %q", d.Wait)
			}
		})
	}
}

// TestArrivingGangKeepsItsRoom: an urgent job, or the head of the queue, whose gang is still
// being created (its newest pod within Model.ArrivalWindow) keeps the room its whole gang
// needs from the jobs walked after it; it takes no turn until the gang is complete, and
// the room is kept no longer than the window.
func TestArrivingGangKeepsItsRoom(t *testing.T) {
	arriving := func(key string, prio int32, min, have int, cpu int64, last time.Duration) *jobB {
		b := mkJob(key).prio(prio).min(min).gang(0, nil, have, res(cpu, gi))
		b.j.LastCreated = t0.Add(-last)
		return b
	}
	const kept = "; the room its gang needs is kept while they arrive"
	tests := []struct {
		name   string
		policy priority.Policy
		jobs   []priority.Job
		// busy: a running job takes 2000m of n1's 4000m.
		busy bool
		want []row
	}{
		{
			name: "an urgent gang still arriving keeps the room of its whole gang",
			jobs: []priority.Job{
				arriving("ns/u", 0, 4, 2, 2000, time.Second).urgent().obj(),
				workerJob("ns/l", 900000, 2000).obj(),
			},
			want: []row{
				{Key: "ns/u", Phase: priority.PhaseWaiting, Position: 1, Blocker: "gang incomplete: 2 of 4 pods exist" + kept},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/u",
					Blocker: "worker ns/l-w-0 needs cpu 2000m on a node; the most free on any node is 0m"},
			},
		},
		{
			name: "its pods stopped arriving: past the window it keeps nothing",
			jobs: []priority.Job{
				arriving("ns/u", 0, 4, 2, 2000, 5*time.Second).urgent().obj(),
				workerJob("ns/l", 900000, 2000).obj(),
			},
			want: []row{
				{Key: "ns/u", Phase: priority.PhaseWaiting, Position: 1, Blocker: "gang incomplete: 2 of 4 pods exist"},
				{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 2},
			},
		},
		{
			name: "a job that is not urgent keeps its room only at the head",
			jobs: []priority.Job{
				workerJob("ns/h", 900000, 2000).obj(),
				arriving("ns/a", 0, 3, 1, 2000, time.Second).obj(),
				workerJob("ns/z", 0, 2000).obj(),
			},
			want: []row{
				{Key: "ns/h", Phase: priority.PhaseAdmitted, Position: 1},
				{Key: "ns/a", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/h", Blocker: "gang incomplete: 1 of 3 pods exist"},
				{Key: "ns/z", Phase: priority.PhaseAdmitted, Position: 3},
			},
		},
		{
			name: "at the head, a job that is not urgent keeps it",
			jobs: []priority.Job{
				arriving("ns/a", 0, 3, 1, 2000, time.Second).obj(),
				workerJob("ns/z", 0, 4000).obj(),
			},
			want: []row{
				{Key: "ns/a", Phase: priority.PhaseWaiting, Position: 1, Blocker: "gang incomplete: 1 of 3 pods exist" + kept},
				{Key: "ns/z", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/a",
					Blocker: "worker ns/z-w-0 needs cpu 4000m on a node; the most free on any node is 2000m"},
			},
		},
		{
			name:   "a gang bigger than the free room reserves what fits of it (reserve)",
			policy: priority.PolicyReserve,
			busy:   true,
			jobs: []priority.Job{
				arriving("ns/u", 0, 4, 2, 2000, time.Second).urgent().obj(),
				workerJob("ns/l", 900000, 2000).obj(),
			},
			want: []row{
				{Key: "ns/u", Phase: priority.PhaseWaiting, Position: 1, Blocker: "gang incomplete: 2 of 4 pods exist" + kept},
				{Key: "ns/l", Phase: priority.PhaseWaiting, Position: 2, Ahead: "ns/u",
					Blocker: "does not fit beside the reservation of ns/u: worker ns/l-w-0 needs cpu 2000m on a node; the most free on any node is 0m"},
				{Key: "ns/run", Phase: priority.PhaseRunning},
			},
		},
		{
			name:   "besteffort keeps nothing for a gang that does not fit",
			policy: priority.PolicyBestEffort,
			busy:   true,
			jobs: []priority.Job{
				arriving("ns/u", 0, 4, 2, 2000, time.Second).urgent().obj(),
				workerJob("ns/l", 900000, 2000).obj(),
			},
			want: []row{
				{Key: "ns/u", Phase: priority.PhaseWaiting, Position: 1, Blocker: "gang incomplete: 2 of 4 pods exist"},
				{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 2},
				{Key: "ns/run", Phase: priority.PhaseRunning},
			},
		},
		{
			name:   "a gang that can never fit keeps nothing",
			policy: priority.PolicyReserve,
			jobs: []priority.Job{
				arriving("ns/u", 0, 40, 2, 2000, time.Second).urgent().obj(),
				workerJob("ns/l", 900000, 2000).obj(),
			},
			want: []row{
				{Key: "ns/u", Phase: priority.PhaseWaiting, Position: 1, Blocker: "gang incomplete: 2 of 40 pods exist"},
				{Key: "ns/l", Phase: priority.PhaseAdmitted, Position: 2},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := priority.DefaultModel()
			m.Policy = cmpOr(tt.policy, priority.PolicyReserve)
			nodes := cpuNodes(4000, 4000)
			for i := range nodes {
				nodes[i].Capacity = nodes[i].Free
			}
			jobs := tt.jobs
			if tt.busy {
				nodes[0].Free = res(2000, gi)
				jobs = append(jobs, mkJob("ns/run").pods(mkPod("run-w-0", priority.RoleWorker, 0).req(res(2000, gi)).bound("n1")).obj())
			}
			q := m.Admit(priority.State{Nodes: nodes, Jobs: jobs}, t0)
			if diff := cmp.Diff(tt.want, rowsOf(q)); diff != "" {
				t.Errorf("Admit() (-want +got):\n%s", diff)
			}
			for _, d := range q.Order {
				if want := strings.HasSuffix(d.Blocker, kept); d.Arriving != want {
					t.Errorf("%s: Arriving %v with blocker %q", d.Key, d.Arriving, d.Blocker)
				}
				if d.Phase == priority.PhaseAdmitted && d.Pods < d.MinMember {
					t.Errorf("%s admitted short of pods", d.Key)
				}
			}
		})
	}
}

// cmpOr is the first of its arguments that is not the zero value.
func cmpOr[T comparable](vals ...T) T {
	var zero T
	for _, v := range vals {
		if v != zero {
			return v
		}
	}
	return zero
}

// TestQueueUnclaimed: what is left of each node once the queue's admitted plans, its
// reservation and the room kept for an arriving gang are taken (Queue.Unclaimed): room no
// job counts on, where the pods in no job go first.
func TestQueueUnclaimed(t *testing.T) {
	arriving := mkJob("ns/a").min(3).gang(0, nil, 1, res(2000, gi))
	arriving.j.LastCreated = t0.Add(-time.Second)
	for _, tc := range []struct {
		name    string
		jobs    []priority.Job
		request priority.Resources
		want    int // nodes of 4000m and 4000m where request fits unclaimed
	}{
		{name: "no job", request: res(4000, 0), want: 2},
		{name: "an admitted plan takes its room", jobs: []priority.Job{workerJob("ns/w", 0, 3000).obj()}, request: res(2000, 0), want: 1},
		{name: "room kept for an arriving gang", jobs: []priority.Job{arriving.obj()}, request: res(2000, 0), want: 1},
		{name: "room kept for an arriving gang, larger", jobs: []priority.Job{arriving.obj()}, request: res(3000, 0), want: 0},
		{name: "a resource no job asks for", jobs: []priority.Job{workerJob("ns/w", 0, 3000).obj()}, request: res(0, 0, "example.com/fpga", 1), want: 2},
		{name: "a job that never fits takes nothing", jobs: []priority.Job{workerJob("ns/big", 0, 9000).obj()}, request: res(4000, 0), want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cpuNodes(4000, 4000)
			for i := range nodes {
				nodes[i].Capacity = nodes[i].Free
			}
			q := priority.DefaultModel().Admit(priority.State{Nodes: nodes, Jobs: tc.jobs}, t0)
			got := 0
			for i := range nodes {
				if q.Unclaimed(i, tc.request) {
					got++
				}
			}
			if got != tc.want {
				t.Errorf("%v fits unclaimed on %d nodes, want %d", tc.request, got, tc.want)
			}
		})
	}
	// Nodes not in name order: each index is the node's place in State.Nodes.
	nodes := []priority.Node{node("n3", res(4000, 64*gi)), node("n1", res(1000, 64*gi)), node("n2", res(3000, 64*gi))}
	q := priority.DefaultModel().Admit(priority.State{Nodes: nodes, Jobs: []priority.Job{workerJob("ns/w", 0, 3500).obj()}}, t0)
	for i, want := range []bool{false, true, true} { // the job takes n3: 500m left there
		if got := q.Unclaimed(i, res(1000, 0)); got != want {
			t.Errorf("node %d (%s): 1000m unclaimed %v, want %v", i, nodes[i].Name, got, want)
		}
	}
	var none *priority.Queue
	if !none.Unclaimed(0, res(1, 0)) {
		t.Error("a nil queue claims room")
	}
}

// TestAdmitSharesUnchangedPlans: a job admitted again with the same plan takes the previous
// queue's plan map, which stays as it was when the plan moves.
func TestAdmitSharesUnchangedPlans(t *testing.T) {
	m := priority.DefaultModel()
	job := mkJob("ns/a").gang(1, res(1000, gi), 1, res(1000, gi)).obj()
	on := func(name string) []priority.Node { return []priority.Node{node(name, res(4000, 8*gi))} }
	plan := func(q *priority.Queue) map[string]string {
		d, ok := q.Lookup("ns/a")
		if !ok || d.Phase != priority.PhaseAdmitted {
			t.Fatalf("ns/a is not admitted: %+v", d)
		}
		return d.Plan
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	first := m.Admit(priority.State{Nodes: on("n0"), Jobs: []priority.Job{job}}, t0)
	second := m.Admit(priority.State{Nodes: on("n0"), Jobs: []priority.Job{job}, Previous: first}, t0.Add(time.Second))
	if !same(plan(first), plan(second)) {
		t.Errorf("the same plan a second later: a new map")
	}
	third := m.Admit(priority.State{Nodes: on("n1"), Jobs: []priority.Job{job}, Previous: second}, t0.Add(2*time.Second))
	if same(plan(second), plan(third)) {
		t.Errorf("a moved plan shares the previous map")
	}
	want := map[string]string{"uid-a-ps-0": "n0", "uid-a-w-0": "n0"}
	if diff := cmp.Diff(want, plan(second)); diff != "" {
		t.Errorf("the previous plan changed (-want +got):\n%s", diff)
	}
	want = map[string]string{"uid-a-ps-0": "n1", "uid-a-w-0": "n1"}
	if diff := cmp.Diff(want, plan(third)); diff != "" {
		t.Errorf("the moved plan (-want +got):\n%s", diff)
	}
}

// TestKeptPlanFollowsNodesByName: a job keeping its turn keeps its plan on the nodes it
// names, when the table of nodes changes between queues (a node comes before its node,
// or goes), and when one of its pods was bound meanwhile.
func TestKeptPlanFollowsNodesByName(t *testing.T) {
	m := priority.DefaultModel()
	job := mkJob("ns/a").gang(1, res(1000, gi), 2, res(1000, gi)).obj()
	big := func(name string) priority.Node { return node(name, res(16000, 32*gi)) }
	first := m.Admit(priority.State{Nodes: []priority.Node{big("n1"), big("n2")}, Jobs: []priority.Job{job}}, t0)
	d, _ := first.Lookup("ns/a")
	want := maps.Clone(d.Plan)
	oneBound := job
	oneBound.Pods = slices.Clone(job.Pods)
	for i := range oneBound.Pods {
		if p := &oneBound.Pods[i]; p.Role == priority.RoleWorker {
			p.State, p.Node = priority.PodBound, want[p.UID]
			delete(want, p.UID)
			break
		}
	}
	for _, tc := range []struct {
		name  string
		nodes []priority.Node
		job   priority.Job
		want  map[string]string
	}{
		{"the same nodes", []priority.Node{big("n1"), big("n2")}, job, d.Plan},
		{"a node before its nodes", []priority.Node{big("n0"), big("n1"), big("n2")}, job, d.Plan},
		{"a node gone after its nodes", []priority.Node{big("n1")}, job, d.Plan},
		{"a pod bound meanwhile", []priority.Node{big("n0"), big("n1"), big("n2")}, oneBound, want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := first
			for i := range 2 { // the second queue keeps the plan from the first one kept
				q := m.Admit(priority.State{Nodes: tc.nodes, Jobs: []priority.Job{tc.job}, Previous: prev}, t0.Add(time.Duration(i+1)*time.Second))
				got, _ := q.Lookup("ns/a")
				if got.Phase != priority.PhaseAdmitted || got.TurnSince != t0 {
					t.Fatalf("queue %d: %s since %v; want admitted since %v", i+1, got.Phase, got.TurnSince, t0)
				}
				if diff := cmp.Diff(tc.want, got.Plan); diff != "" {
					t.Fatalf("queue %d: the plan (-want +got):\n%s", i+1, diff)
				}
				// The room taken is where the plan says: a node it names is no longer
				// wholly free, any other is.
				for k, n := range tc.nodes {
					used := slices.Contains(slices.Collect(maps.Values(tc.want)), n.Name)
					if free := q.Unclaimed(k, n.Free); free == used {
						t.Errorf("queue %d: node %s wholly unclaimed = %v, but the plan uses it: %v", i+1, n.Name, free, used)
					}
				}
				prev = q
			}
		})
	}
}

// TestKeptPlanWithDuplicateNames: nodes that share a name break the contract; a kept plan
// then takes its room on the first node of the name, as a plan looked up by name always
// did, not on the one the index of the previous queue pointed at.
func TestKeptPlanWithDuplicateNames(t *testing.T) {
	m := priority.DefaultModel()
	job := mkJob("ns/a").gang(0, nil, 1, res(1000, gi)).obj()
	full, free := node("n1", res(0, 0)), node("n1", res(4000, 8*gi))
	first := m.Admit(priority.State{Nodes: []priority.Node{full, free}, Jobs: []priority.Job{job}}, t0)
	if d, _ := first.Lookup("ns/a"); d.Phase != priority.PhaseAdmitted {
		t.Fatalf("first queue: %s", d.Reason)
	}
	// Now both have room: the plan names n1, which is the first node of that name.
	nodes := []priority.Node{free, node("n1", res(2000, 4*gi))}
	q := m.Admit(priority.State{Nodes: nodes, Jobs: []priority.Job{job}, Previous: first}, t0.Add(time.Second))
	if q.Unclaimed(0, nodes[0].Free) || !q.Unclaimed(1, nodes[1].Free) {
		t.Errorf("room taken on the second n1, or on neither: first wholly unclaimed %v, second %v",
			q.Unclaimed(0, nodes[0].Free), q.Unclaimed(1, nodes[1].Free))
	}
}
