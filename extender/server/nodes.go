package server

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/cps-extender/cps-extender/extender/wire"
	"github.com/cps-extender/cps-extender/priority"
)

// LayoutSource gives /debug/nodes one snapshot of the cluster view.
type LayoutSource interface {
	// Layout returns the schedulable nodes (free capacity and labels), the jobs and their
	// queue, the topology label keys, nearest first, and when they were computed; q is nil
	// before the first queue. The caller only reads them.
	Layout() (nodes []priority.Node, jobs []*priority.Job, q *priority.Queue, topology []string, computed time.Time)
}

// nodeReport is the JSON of /debug/nodes: the nodes by topology domain, with the jobs' pods
// on each.
type nodeReport struct {
	Computed time.Time `json:"computed"`
	// Topology is the topology label keys, nearest first (affinity.topology).
	Topology []string       `json:"topology"`
	Domains  []domainReport `json:"domains"`
	// Elsewhere is the jobs' pods on nodes that are not schedulable (cordoned, not ready, or
	// gone from the view), by node: they hold no room in the fit, but they are the jobs'.
	Elsewhere []nodePods `json:"elsewhere"`
}

// nodePods is a node that is not in the layout and the jobs' pods on it.
type nodePods struct {
	Node string     `json:"node"`
	Pods []podEntry `json:"pods"`
}

// domainReport is one topology domain: the nodes that share every topology label's value.
type domainReport struct {
	// Name spells the domain outermost first, e.g. "zone=z1 / rack=r1"; "-" for nodes
	// without any topology label.
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Nodes  []nodeEntry       `json:"nodes"`
}

// nodeEntry is one node: what jobs may use of it (allocatable less the pods in no job),
// what is free (less every bound or held pod), and the jobs' pods on it.
type nodeEntry struct {
	Name     string             `json:"name"`
	Capacity priority.Resources `json:"capacity"`
	Free     priority.Resources `json:"free"`
	Pods     []podEntry         `json:"pods"`
}

// podEntry is one pod of a job on a node.
type podEntry struct {
	Pod  string `json:"pod"` // namespace/name
	Job  string `json:"job"`
	Role string `json:"role"`
	// State is bound, held (its bind waits for the gang) or planned (an admitted job's
	// pending pod, where the fit put it).
	State string        `json:"state"`
	role  priority.Role // for the order: a job's PS first
}

// The pod states of /debug/nodes.
const (
	podBound   = "bound"
	podHeld    = "held"
	podPlanned = "planned"
)

// debugNodes answers /debug/nodes.
func (s *Server) debugNodes(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	nodes, jobs, q, topology, computed := s.layout.Layout()
	if q == nil {
		wire.WriteJSON(w, http.StatusServiceUnavailable, wire.ErrorBody{Error: "no queue computed yet: cluster view not synced"})
		return
	}
	wire.WriteJSON(w, http.StatusOK, buildNodeReport(nodes, jobs, q, topology, computed))
}

// buildNodeReport groups the nodes by their topology labels' values and puts every bound,
// held and planned pod of a job on its node, or under Elsewhere when its node is not one of
// nodes. Domains, nodes and pods come in a stable order: domains and nodes by name, pods by
// job, role and name.
func buildNodeReport(nodes []priority.Node, jobs []*priority.Job, q *priority.Queue, topology []string, computed time.Time) nodeReport {
	pods := map[string][]podEntry{}
	for _, j := range jobs {
		var plan map[string]string
		if d, ok := q.Lookup(j.Key); ok {
			plan = d.Plan
		}
		for _, p := range j.Pods {
			node, state := p.Node, ""
			switch {
			case p.State == priority.PodBound:
				state = podBound
			case p.State == priority.PodHeld:
				state = podHeld
			case plan[p.UID] != "":
				node, state = plan[p.UID], podPlanned
			default:
				continue
			}
			if node == "" {
				continue // bound or held nowhere the view knows: nothing to show it on
			}
			pods[node] = append(pods[node], podEntry{Pod: p.Name, Job: j.Key, Role: p.Role.String(), State: state, role: p.Role})
		}
	}
	byName := map[string]*domainReport{}
	for _, n := range nodes {
		labels := map[string]string{}
		parts := make([]string, 0, len(topology))
		for i := len(topology) - 1; i >= 0; i-- {
			if v, ok := n.Labels[topology[i]]; ok {
				labels[topology[i]] = v
				parts = append(parts, topology[i]+"="+v)
			}
		}
		name := strings.Join(parts, " / ")
		if name == "" {
			name = "-"
		}
		d := byName[name]
		if d == nil {
			d = &domainReport{Name: name, Labels: labels}
			byName[name] = d
		}
		on := pods[n.Name]
		delete(pods, n.Name)
		if on == nil {
			on = []podEntry{}
		}
		sortPods(on)
		d.Nodes = append(d.Nodes, nodeEntry{Name: n.Name, Capacity: n.Capacity, Free: n.Free, Pods: on})
	}
	report := nodeReport{Computed: computed, Topology: topology, Domains: make([]domainReport, 0, len(byName)), Elsewhere: []nodePods{}}
	for node, on := range pods {
		sortPods(on)
		report.Elsewhere = append(report.Elsewhere, nodePods{Node: node, Pods: on})
	}
	slices.SortFunc(report.Elsewhere, func(a, b nodePods) int { return strings.Compare(a.Node, b.Node) })
	for _, d := range byName {
		slices.SortFunc(d.Nodes, func(a, b nodeEntry) int { return strings.Compare(a.Name, b.Name) })
		report.Domains = append(report.Domains, *d)
	}
	slices.SortFunc(report.Domains, func(a, b domainReport) int { return strings.Compare(a.Name, b.Name) })
	if report.Topology == nil {
		report.Topology = []string{}
	}
	return report
}

// sortPods orders a node's pods by job, then PS before workers, then name.
func sortPods(on []podEntry) {
	slices.SortFunc(on, func(a, b podEntry) int {
		return cmp.Or(strings.Compare(a.Job, b.Job), cmp.Compare(a.role, b.role), strings.Compare(a.Pod, b.Pod))
	})
}
