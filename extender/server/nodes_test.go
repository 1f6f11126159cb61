package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/zap"

	"github.com/cps-extender/cps-extender/priority"
)

// fixedLayout serves one snapshot's nodes and jobs.
type fixedLayout struct {
	nodes    []priority.Node
	jobs     []*priority.Job
	q        *priority.Queue
	topology []string
	at       time.Time
}

func (f fixedLayout) Layout() ([]priority.Node, []*priority.Job, *priority.Queue, []string, time.Time) {
	return f.nodes, f.jobs, f.q, f.topology, f.at
}

func (f fixedLayout) Queue() (*priority.Queue, time.Time) { return f.q, f.at }

// layoutJobs is three nodes, two in racks of zone z1 and one without topology labels, and
// a running job on the racks, a job gathering at bind (one pod held, one planned) and a job
// that waits (nowhere yet).
func layoutJobs(t *testing.T) fixedLayout {
	t.Helper()
	created := time.Unix(1_600_000_000, 0)
	jobs := []priority.Job{
		{Key: "ns/run", MinMember: 2, Created: created, Pods: []priority.Pod{
			pod("run-w-0", priority.RoleWorker, 0, priority.PodBound, "n2", 1000),
			pod("run-ps-0", priority.RolePS, 0, priority.PodBound, "n2", 1000),
			// On a cordoned node: not in the layout, still the job's.
			pod("run-w-1", priority.RoleWorker, 1, priority.PodBound, "cordoned", 1000),
		}},
		{Key: "ns/gather", MinMember: 2, Created: created, Pods: []priority.Pod{
			pod("gather-ps-0", priority.RolePS, 0, priority.PodHeld, "n1", 2000),
			pod("gather-w-0", priority.RoleWorker, 0, priority.PodPending, "", 2000),
		}},
		{Key: "ns/wait", MinMember: 2, Created: created, Pods: []priority.Pod{
			pod("wait-0", priority.RoleWorker, 0, priority.PodPending, "", 7000),
			pod("wait-1", priority.RoleWorker, 1, priority.PodPending, "", 7000),
		}},
	}
	nodes := []priority.Node{
		{Name: "n1", Labels: map[string]string{"rack": "r1", "zone": "z1"}, Free: priority.Resources{"cpu": 6000}, Capacity: priority.Resources{"cpu": 8000}},
		{Name: "n2", Labels: map[string]string{"rack": "r2", "zone": "z1", "other": "x"}, Free: priority.Resources{"cpu": 6000}, Capacity: priority.Resources{"cpu": 8000}},
		{Name: "n3", Free: priority.Resources{"cpu": 4000}, Capacity: priority.Resources{"cpu": 4000}},
	}
	now := time.Unix(1_700_000_000, 0)
	q := priority.DefaultModel().Admit(priority.State{Jobs: jobs, Nodes: nodes}, now)
	f := fixedLayout{nodes: nodes, q: q, topology: []string{"rack", "zone"}, at: now}
	for i := range jobs {
		f.jobs = append(f.jobs, &jobs[i])
	}
	return f
}

func TestDebugNodes(t *testing.T) {
	f := layoutJobs(t)
	d, ok := f.q.Lookup("ns/gather")
	planned := d.Plan["uid-gather-w-0"]
	if !ok || d.Phase != priority.PhaseAdmitted || planned == "" {
		t.Fatalf("ns/gather: %+v: want it admitted with a plan for its worker", d)
	}
	srv, err := New(Options{Access: OpenAccess, Log: zap.NewNop(), MaxRequestBytes: 1 << 20, Ready: readyFlag(true), Queue: f, Layout: f})
	if err != nil {
		t.Fatal(err)
	}
	rec := get(srv, "/debug/nodes")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got nodeReport
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	cpu := func(n int64) priority.Resources { return priority.Resources{"cpu": n} }
	want := nodeReport{Computed: f.at, Topology: []string{"rack", "zone"}, Domains: []domainReport{
		{Name: "-", Labels: map[string]string{}, Nodes: []nodeEntry{{Name: "n3", Capacity: cpu(4000), Free: cpu(4000), Pods: []podEntry{}}}},
		{Name: "zone=z1 / rack=r1", Labels: map[string]string{"rack": "r1", "zone": "z1"}, Nodes: []nodeEntry{
			{Name: "n1", Capacity: cpu(8000), Free: cpu(6000), Pods: []podEntry{{Pod: "ns/gather-ps-0", Job: "ns/gather", Role: "ps", State: "held"}}},
		}},
		{Name: "zone=z1 / rack=r2", Labels: map[string]string{"rack": "r2", "zone": "z1"}, Nodes: []nodeEntry{
			{Name: "n2", Capacity: cpu(8000), Free: cpu(6000), Pods: []podEntry{
				{Pod: "ns/run-ps-0", Job: "ns/run", Role: "ps", State: "bound"},
				{Pod: "ns/run-w-0", Job: "ns/run", Role: "worker", State: "bound"},
			}},
		}},
	}, Elsewhere: []nodePods{{Node: "cordoned", Pods: []podEntry{{Pod: "ns/run-w-1", Job: "ns/run", Role: "worker", State: "bound"}}}}}
	// The worker goes where the fit planned it, in order: by job (ns/gather before ns/run),
	// then PS before workers.
	worker := podEntry{Pod: "ns/gather-w-0", Job: "ns/gather", Role: "worker", State: "planned"}
	for i := range want.Domains {
		for k := range want.Domains[i].Nodes {
			switch n := &want.Domains[i].Nodes[k]; {
			case n.Name != planned:
			case n.Name == "n1":
				n.Pods = append(n.Pods, worker)
			default:
				n.Pods = append([]podEntry{worker}, n.Pods...)
			}
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(podEntry{})); diff != "" {
		t.Errorf("/debug/nodes (-want +got):\n%s", diff)
	}
}

func TestDebugNodesRoutes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		path   string
		status int
	}{
		{name: "before the first queue", opts: Options{Layout: fixedLayout{}, Queue: fixedLayout{}}, path: "/debug/nodes", status: http.StatusServiceUnavailable},
		{name: "no layout source", opts: Options{Queue: queueJobs(t)}, path: "/debug/nodes", status: http.StatusNotFound},
		{name: "no layout source, no page", opts: Options{Queue: queueJobs(t)}, path: "/ui", status: http.StatusNotFound},
		{name: "no queue source, no page", opts: Options{Layout: layoutJobs(t)}, path: "/ui", status: http.StatusNotFound},
		{name: "read-only", opts: Options{Layout: layoutJobs(t), Queue: layoutJobs(t)}, path: "POST /debug/nodes", status: http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Log, tc.opts.MaxRequestBytes, tc.opts.Ready, tc.opts.Access = zap.NewNop(), 1<<20, readyFlag(true), OpenAccess
			srv, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if rec := request(srv, tc.path); rec.Code != tc.status {
				t.Errorf("%s: %d %s, want %d", tc.path, rec.Code, rec.Body, tc.status)
			}
		})
	}
}
