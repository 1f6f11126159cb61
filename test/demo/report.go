package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cps-extender/cps-extender/priority"
	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// snapshot is what the reports read: the workload, the extender's decisions and where the
// pods are.
type snapshot struct {
	work       workload
	decisions  map[string]*priority.Decision // by job key
	placements map[string]string             // pod namespace/name -> node ("" while unbound)
	rackOf     map[string]string             // node -> rack
}

// newTable returns a tabwriter for an indented, space-aligned table.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// printWorkload lists the jobs as submitted and compares their demand with the cluster.
func printWorkload(w io.Writer, work workload) {
	tw := newTable(w)
	fmt.Fprintln(tw, "  JOB\tUSER\tTIER\tPRIORITYCLASS\tURGENT\tPS\tWORKERS\tCPU/POD\tCPU")
	var total int64
	for _, j := range work.Jobs {
		class := "-"
		if j.PriorityClass != "" {
			class = fmt.Sprintf("%s (%d)", j.PriorityClass, work.PriorityClasses[j.PriorityClass])
		}
		urgent := "-"
		if slices.Contains(work.UrgentPriorityClasses, j.PriorityClass) {
			urgent = "yes"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", j.Name, j.User, work.Users[j.User], class, urgent,
			j.PS, j.Workers, j.CPU, milliCPU(j.TotalCPU()))
		total += j.TotalCPU()
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "  %d jobs ask for %s CPU in all; the cluster has %s.\n", len(work.Jobs), milliCPU(total), milliCPU(clusterCPU()))
}

// printNodes lists the nodes by rack.
func printNodes(w io.Writer, nodes []framework.NodeSpec) {
	byRack := map[string][]string{}
	for _, n := range nodes {
		rack := n.Labels[rackLabel]
		byRack[rack] = append(byRack[rack], n.Name)
	}
	fmt.Fprintf(w, "  %d kwok nodes, %s CPU / %s each, labelled %s:\n", len(nodes), nodeCPU, nodeMemory, rackLabel)
	for _, rack := range sortedKeys(byRack) {
		fmt.Fprintf(w, "    %s: %s\n", rack, strings.Join(byRack[rack], ", "))
	}
}

// printQueueTable prints the extender's own rendering of the admission queue, indented.
func printQueueTable(w io.Writer, table string) {
	for _, line := range strings.Split(strings.TrimRight(table, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
}

// printPlacements prints, per job, its user, P and phase, where its PS and workers went, and
// how close its workers are to its PS; then the locality over all placed workers.
func printPlacements(w io.Writer, s snapshot, jobs []jobSpec) {
	tw := newTable(w)
	fmt.Fprintln(tw, "  JOB\tUSER\tP\tPHASE\tPS ON\tWORKERS ON\tWORKERS BESIDE A PS (NODE, ELSE RACK)")
	var all locality
	for _, j := range jobs {
		d := s.decisions[j.Key()]
		p, phase := "-", "gone"
		if d != nil {
			p, phase = fmt.Sprintf("%.2f", d.P), string(d.Phase)
		}
		psNodes, workerNodes := s.nodesOf(j)
		loc := s.locality(j)
		all = all.add(loc)
		fmt.Fprintf(tw, "  %s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\n", j.Name, j.User, s.work.Users[j.User], p, phase,
			s.describeNodes(psNodes), s.describeNodes(workerNodes), loc)
	}
	_ = tw.Flush()
	if all.total > 0 {
		fmt.Fprintf(w, "  Worker locality over these jobs: %s.\n", all)
	}
}

// nodesOf returns the nodes of the job's bound PS and bound workers (a node once per pod).
func (s snapshot) nodesOf(j jobSpec) (ps, workers []string) {
	for i := 0; i < j.PS; i++ {
		if n := s.placements[j.podKey("ps", i)]; n != "" {
			ps = append(ps, n)
		}
	}
	for i := 0; i < j.Workers; i++ {
		if n := s.placements[j.podKey("worker", i)]; n != "" {
			workers = append(workers, n)
		}
	}
	return ps, workers
}

// describeNodes renders nodes (one entry per pod) grouped by rack, with a count for a node
// holding several: "node-0 node-1×2 (rack-a); node-4 (rack-b)". No nodes gives "-".
func (s snapshot) describeNodes(nodes []string) string {
	if len(nodes) == 0 {
		return "-"
	}
	count := map[string]int{}
	byRack := map[string][]string{}
	for _, n := range nodes {
		if count[n] == 0 {
			byRack[s.rackOf[n]] = append(byRack[s.rackOf[n]], n)
		}
		count[n]++
	}
	var groups []string
	for _, rack := range sortedKeys(byRack) {
		names := byRack[rack]
		sort.Strings(names)
		for i, n := range names {
			if count[n] > 1 {
				names[i] = fmt.Sprintf("%s×%d", n, count[n])
			}
		}
		groups = append(groups, fmt.Sprintf("%s (%s)", strings.Join(names, " "), rack))
	}
	return strings.Join(groups, "; ")
}

// locality counts a job's bound workers by how close they are to its nearest bound PS.
type locality struct {
	sameNode, sameRack, elsewhere, total int
}

// locality classifies each bound worker of j: on a node hosting one of j's PS, else in a
// rack hosting one, else elsewhere.
func (s snapshot) locality(j jobSpec) locality {
	psNodes, workerNodes := s.nodesOf(j)
	onNode, inRack := map[string]bool{}, map[string]bool{}
	for _, n := range psNodes {
		onNode[n] = true
		inRack[s.rackOf[n]] = true
	}
	var l locality
	for _, n := range workerNodes {
		l.total++
		switch {
		case onNode[n]:
			l.sameNode++
		case inRack[s.rackOf[n]]:
			l.sameRack++
		default:
			l.elsewhere++
		}
	}
	return l
}

// add sums two counts.
func (l locality) add(o locality) locality {
	return locality{l.sameNode + o.sameNode, l.sameRack + o.sameRack, l.elsewhere + o.elsewhere, l.total + o.total}
}

// String renders the share of workers beside a PS: "6/6 = 100% (2 same node, 4 same rack)".
func (l locality) String() string {
	if l.total == 0 {
		return "-"
	}
	near := l.sameNode + l.sameRack
	s := fmt.Sprintf("%d/%d = %.0f%% (%d same node, %d same rack", near, l.total, 100*float64(near)/float64(l.total), l.sameNode, l.sameRack)
	if l.elsewhere > 0 {
		s += fmt.Sprintf("; %d elsewhere", l.elsewhere)
	}
	return s + ")"
}

// printNodeMap prints each node's rack, its cpu in use by the demo's bound pods and which
// pods those are, by job.
func printNodeMap(w io.Writer, s snapshot, nodes []framework.NodeSpec) {
	cpuOf, jobOf := map[string]int64{}, map[string]string{}
	for _, j := range s.work.Jobs {
		for _, key := range j.PodKeys() {
			cpuOf[key] = milliCores(j.CPU)
			jobOf[key] = j.Name
		}
	}
	used := map[string]int64{}
	pods := map[string][]string{}
	for _, key := range sortedKeys(s.placements) {
		node := s.placements[key]
		if node == "" || jobOf[key] == "" {
			continue
		}
		used[node] += cpuOf[key]
		_, name, _ := strings.Cut(key, "/")
		pods[node] = append(pods[node], strings.TrimPrefix(name, jobOf[key]+"-")+" of "+jobOf[key])
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  NODE\tRACK\tCPU USED\tPODS")
	for _, n := range nodes {
		fmt.Fprintf(tw, "  %s\t%s\t%s/%s\t%s\n", n.Name, s.rackOf[n.Name], milliCPU(used[n.Name]), nodeCPU, strings.Join(pods[n.Name], ", "))
	}
	_ = tw.Flush()
}

// printBindOrder lists the jobs in the order they became fully bound, with the times of
// their first and last binding since start.
func printBindOrder(w io.Writer, s snapshot, bound []boundJob, start time.Time) {
	if len(bound) == 0 {
		fmt.Fprintln(w, "  (no job became fully bound)")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  #\tJOB\tUSER\tP\tPODS\tFIRST POD BOUND\tLAST POD BOUND")
	for i, b := range bound {
		p := "-"
		if d := s.decisions[b.job.Key()]; d != nil {
			p = fmt.Sprintf("%.2f", d.P)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s (%s)\t%s\t%d\t%s\t%s\n", i+1, b.job.Name, b.job.User, s.work.Users[b.job.User], p,
			b.job.Size(), since(start, b.first), since(start, b.last))
	}
	_ = tw.Flush()
}

// since renders t as a signed offset from start, "+3.2s".
func since(start, t time.Time) string {
	return fmt.Sprintf("%+.1fs", t.Sub(start).Seconds())
}

// milliCPU renders millicores as cores, "64" or "2.5".
func milliCPU(m int64) string {
	return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64)
}
