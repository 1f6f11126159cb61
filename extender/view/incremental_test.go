package view

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/priority"
)

var incrementalSequences = flag.Int("incremental.sequences", defaultIncrementalSequences,
	"random event sequences TestIncrementalMatchesFull drives through the view")

// twin is the same cluster seen by two views: one that keeps its jobs from recompute to
// recompute (the view as shipped) and one that builds everything every time (full).
type twin struct {
	t          *testing.T
	rng        *rand.Rand
	inc, full  *Cluster
	holds      *fixedHolds
	now        time.Time
	pods       map[string]*corev1.Pod // by namespace/name
	nodes      map[string]*corev1.Node
	namespaces map[string]*corev1.Namespace
	next       int      // names new pods and nodes
	events     []string // what happened, for the failure message
	phases     map[priority.JobPhase]bool
	kept       int // groups the incremental view took over, over all recomputes
}

var (
	twinNamespaces = []string{"team-a", "team-b"}
	twinJobs       = []string{"j0", "j1", "j2", "j3", "j4", "j5"}
	twinZones      = []string{"zone-a", "zone-b"}
)

func newTwin(t *testing.T, seed uint64) *twin {
	w := &twin{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), holds: &fixedHolds{}, now: time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC),
		pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{}, namespaces: map[string]*corev1.Namespace{}, phases: map[priority.JobPhase]bool{}}
	for _, full := range []bool{false, true} {
		c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig(), Holds: w.holds, Now: func() time.Time { return w.now }})
		c.full = full
		if full {
			w.full = c
		} else {
			w.inc = c
		}
	}
	for _, ns := range twinNamespaces {
		w.setNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for range 4 {
		w.addNode()
	}
	return w
}

func (w *twin) each(f func(c *Cluster)) { f(w.inc); f(w.full) }

// inform puts obj (a pod, node or namespace) into each view's informer store, or takes it
// out, and tells the view as the informer's handler would.
func (w *twin) inform(obj metav1.Object, deleted bool) {
	w.each(func(c *Cluster) {
		core := c.factory.Core().V1()
		var store cache.Store
		switch o := obj.(type) {
		case *corev1.Pod:
			store = core.Pods().Informer().GetStore()
			defer c.onPod(o, deleted)
		case *corev1.Node:
			store = core.Nodes().Informer().GetStore()
			defer c.onNode(o, deleted)
		default:
			store = core.Namespaces().Informer().GetStore()
			defer c.sourceChanges.Add(1)
		}
		update := store.Update
		if deleted {
			update = store.Delete
		}
		if err := update(obj); err != nil {
			w.t.Fatal(err)
		}
	})
}

func (w *twin) setPod(p *corev1.Pod) {
	w.pods[p.Namespace+"/"+p.Name] = p
	w.inform(p, false)
}

func (w *twin) setNode(n *corev1.Node) {
	w.nodes[n.Name] = n
	w.inform(n, false)
}

func (w *twin) setNamespace(ns *corev1.Namespace) {
	w.namespaces[ns.Name] = ns
	w.inform(ns, false)
}

func (w *twin) addNode() {
	w.next++
	name := "node-" + strconv.Itoa(w.next)
	cpu := []int64{4, 8, 16}[w.rng.IntN(3)]
	res := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI)}
	w.setNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": twinZones[w.rng.IntN(len(twinZones))]}},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res}})
}

// addPod adds the next pod of a random job, with what a pod may carry that the queue reads.
func (w *twin) addPod() string {
	w.next++
	ns, job := twinNamespaces[w.rng.IntN(len(twinNamespaces))], twinJobs[w.rng.IntN(len(twinJobs))]
	role := []string{"ps", "worker", "worker", "chief"}[w.rng.IntN(4)]
	name := job + "-" + role + "-" + strconv.Itoa(w.next)
	cpu := []string{"1", "2", "3", "40"}[w.rng.IntN(4)] // 40: more than any node has
	if w.rng.IntN(3) > 0 && cpu == "40" {
		cpu = "1"
	}
	labels := map[string]string{"cps-extender.io/job": job, "cps-extender.io/role": role, "cps-extender.io/index": strconv.Itoa(w.next % 4)}
	if w.rng.IntN(2) == 0 {
		labels["cps-extender.io/min-member"] = strconv.Itoa(1 + w.rng.IntN(4))
	}
	if w.rng.IntN(4) == 0 {
		labels["cps-extender.io/user"] = "mallory"
	}
	if w.rng.IntN(6) == 0 {
		labels["cps-extender.io/urgent"] = "true"
	}
	if w.rng.IntN(10) == 0 { // a pod of no job: it takes room the queue cannot wait out
		labels = map[string]string{"app": job}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: labels, CreationTimestamp: metav1.NewTime(w.now)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	switch w.rng.IntN(8) {
	case 0:
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: gang.TurnGate}}
	case 1:
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
	case 2:
		p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": twinZones[w.rng.IntN(len(twinZones))]}
	case 3: // one pod of the job a node
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cps-extender.io/job": job}}, TopologyKey: "kubernetes.io/hostname"}}}}
	}
	w.setPod(p)
	return "add pod " + ns + "/" + name + " cpu " + cpu
}

// randomPod is a random pod, with pick applied to choose among them (nil: none fits).
func (w *twin) randomPod(pick func(*corev1.Pod) bool) *corev1.Pod {
	keys := slices.Sorted(maps.Keys(w.pods))
	var fit []*corev1.Pod
	for _, k := range keys {
		if p := w.pods[k]; pick(p) {
			fit = append(fit, p)
		}
	}
	if len(fit) == 0 {
		return nil
	}
	return fit[w.rng.IntN(len(fit))]
}

func (w *twin) randomNode() *corev1.Node {
	keys := slices.Sorted(maps.Keys(w.nodes))
	if len(keys) == 0 {
		return nil
	}
	return w.nodes[keys[w.rng.IntN(len(keys))]]
}

func pending(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodPending
}

// step makes one random event happen to both views and says what it was ("" for none).
func (w *twin) step() string {
	switch w.rng.IntN(20) {
	case 0, 1, 2, 3, 4:
		return w.addPod()
	case 5, 6, 7: // kube-scheduler binds a pod
		p, n := w.randomPod(pending), w.randomNode()
		if p == nil || n == nil {
			return ""
		}
		p = p.DeepCopy()
		p.Spec.NodeName = n.Name
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.now)}}
		w.setPod(p)
		return "bind " + p.Name + " to " + n.Name
	case 8: // a bound pod ends
		p := w.randomPod(func(p *corev1.Pod) bool { return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending })
		if p == nil {
			return ""
		}
		p = p.DeepCopy()
		p.Status.Phase = []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed}[w.rng.IntN(2)]
		w.setPod(p)
		return "finish " + p.Name + " " + string(p.Status.Phase)
	case 9: // deletion starts, with a short grace period
		p := w.randomPod(func(p *corev1.Pod) bool { return p.DeletionTimestamp == nil })
		if p == nil {
			return ""
		}
		p = p.DeepCopy()
		at := metav1.NewTime(w.now.Add(time.Duration(w.rng.IntN(40)) * time.Second))
		p.DeletionTimestamp = &at
		w.setPod(p)
		return "deleting " + p.Name + " by " + at.Format(time.TimeOnly)
	case 10:
		p := w.randomPod(func(*corev1.Pod) bool { return true })
		if p == nil {
			return ""
		}
		delete(w.pods, p.Namespace+"/"+p.Name)
		w.inform(p, true)
		return "delete " + p.Name
	case 11: // a gate is lifted, or a pod's size label changes
		p := w.randomPod(func(p *corev1.Pod) bool { return pending(p) })
		if p == nil {
			return ""
		}
		p = p.DeepCopy()
		if len(p.Spec.SchedulingGates) > 0 {
			p.Spec.SchedulingGates = nil
			w.setPod(p)
			return "ungate " + p.Name
		}
		p.Labels = maps.Clone(p.Labels)
		p.Labels["cps-extender.io/min-member"] = strconv.Itoa(1 + w.rng.IntN(4))
		w.setPod(p)
		return "relabel " + p.Name + " min-member " + p.Labels["cps-extender.io/min-member"]
	case 12: // the gate holds a bind, or gives one back
		held := maps.Clone(w.holds.held)
		if held == nil {
			held = map[types.UID]string{}
		}
		if p, n := w.randomPod(pending), w.randomNode(); p != nil && n != nil && w.rng.IntN(3) > 0 {
			held[p.UID] = n.Name
		} else if len(held) > 0 {
			uids := slices.Sorted(maps.Keys(held))
			delete(held, uids[w.rng.IntN(len(uids))])
		}
		w.holds.held = held
		return fmt.Sprintf("held %v", held)
	case 13: // a node comes, is cordoned or uncordoned, moves zone, or goes
		n := w.randomNode()
		switch k := w.rng.IntN(4); {
		case k == 0 || n == nil:
			w.addNode()
			return "add node-" + strconv.Itoa(w.next)
		case k == 1:
			n = n.DeepCopy()
			n.Spec.Unschedulable = !n.Spec.Unschedulable
			w.setNode(n)
			return fmt.Sprintf("cordon %s %t", n.Name, n.Spec.Unschedulable)
		case k == 2:
			n = n.DeepCopy()
			n.Labels = maps.Clone(n.Labels)
			n.Labels["topology.kubernetes.io/zone"] = twinZones[w.rng.IntN(len(twinZones))]
			w.setNode(n)
			return "zone " + n.Name + " " + n.Labels["topology.kubernetes.io/zone"]
		default:
			delete(w.nodes, n.Name)
			w.inform(n, true)
			return "delete " + n.Name
		}
	case 14: // a namespace's user or urgency label
		ns := w.namespaces[twinNamespaces[w.rng.IntN(len(twinNamespaces))]].DeepCopy()
		ns.Labels = map[string]string{}
		if w.rng.IntN(2) == 0 {
			ns.Labels["cps-extender.io/user"] = "team-" + strconv.Itoa(w.rng.IntN(3))
		}
		if w.rng.IntN(2) == 0 {
			ns.Labels["cps-extender.io/urgent-allowed"] = "true"
		}
		w.setNamespace(ns)
		return fmt.Sprintf("namespace %s %v", ns.Name, ns.Labels)
	case 15: // a config reload: the policy, PS anti-affinity
		model, affinity := priority.DefaultModel(), priority.Affinity{}
		model.Policy = []priority.Policy{priority.PolicyStrict, priority.PolicyReserve, priority.PolicyBestEffort, priority.PolicyBackfill}[w.rng.IntN(4)]
		affinity.PSAntiAffinity = []priority.AntiAffinityMode{priority.AntiAffinitySoft, priority.AntiAffinityHard}[w.rng.IntN(2)]
		w.each(func(c *Cluster) { c.SetModel(model, affinity) })
		return fmt.Sprintf("model policy %s ps %s", model.Policy, affinity.PSAntiAffinity)
	default:
		d := time.Duration(1+w.rng.IntN(90)) * time.Second
		if w.rng.IntN(4) == 0 {
			d = time.Duration(1+w.rng.IntN(30)) * time.Minute
		}
		w.now = w.now.Add(d)
		return "time +" + d.String()
	}
}

// compare recomputes both views and reports how their snapshots differ ("" when alike).
func (w *twin) compare() string {
	w.each(func(c *Cluster) { c.recompute(w.now) })
	if w.inc.jobs != nil {
		w.kept += w.inc.jobs.kept
	}
	a, b := w.inc.Snapshot(), w.full.Snapshot()
	for _, d := range slices.Concat(b.Queue.Order, b.Queue.Running, b.Queue.Unschedulable) {
		w.phases[d.Phase] = true
	}
	all := gocmp.Exporter(func(reflect.Type) bool { return true })
	for _, part := range []struct {
		name string
		a, b any
	}{
		{"jobs", jobsByUID(a), jobsByUID(b)},
		{"queue order", a.Queue.Order, b.Queue.Order},
		{"running", a.Queue.Running, b.Queue.Running},
		{"unschedulable", a.Queue.Unschedulable, b.Queue.Unschedulable},
		{"pod to job", a.podJob, b.podJob},
		{"name to job", a.nameJob, b.nameJob},
		{"hard PS", nonEmpty(a.hardPS), nonEmpty(b.hardPS)},
		{"turn gated", sortedRefs(a.turnGated), sortedRefs(b.turnGated)},
		{"turn gated by pod", a.turnGatedJob, b.turnGatedJob},
		{"warnings", warningKeys(a.warnings), warningKeys(b.warnings)},
		{"leaving until", a.leavingUntil, b.leavingUntil},
		{"nodes", a.nodes, b.nodes},
	} {
		if diff := gocmp.Diff(part.b, part.a, all); diff != "" {
			return part.name + " (-full +incremental):\n" + diff
		}
	}
	return ""
}

// jobsByUID is the snapshot's jobs with their pods in UID order.
func jobsByUID(s *Snapshot) map[string]priority.Job {
	out := map[string]priority.Job{}
	for key, j := range s.jobs {
		c := *j
		c.Pods = slices.SortedFunc(slices.Values(j.Pods), func(a, b priority.Pod) int { return cmp.Compare(a.UID, b.UID) })
		out[key] = c
	}
	return out
}

func nonEmpty(m map[string]bool) map[string]bool {
	if len(m) == 0 {
		return nil
	}
	return m
}

func sortedRefs(m map[string][]gang.PodRef) map[string][]gang.PodRef {
	out := map[string][]gang.PodRef{}
	for k, refs := range m {
		out[k] = slices.SortedFunc(slices.Values(refs), func(a, b gang.PodRef) int { return cmp.Compare(a.UID, b.UID) })
	}
	return out
}

func warningKeys(ws []PodWarning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Key + ": " + w.Message
	}
	slices.Sort(out)
	return out
}

// TestIncrementalMatchesFull drives random event sequences (pods arriving one by one,
// gates, sizes, anti-affinity, binds, pods finishing and being deleted, held binds, nodes
// coming, cordoned, moving zone and going, namespace labels, config reloads, time passing)
// through a view that keeps its jobs between recomputes and one that builds them every
// time, and after every event wants the same snapshot from both: the jobs, the queue
// (phases, sentences, plans), the pod maps, the turn-gated pods, the warnings. A difference
// fails with the seed and the events.
func TestIncrementalMatchesFull(t *testing.T) {
	phases, kept := map[priority.JobPhase]bool{}, 0
	for seed := range uint64(*incrementalSequences) {
		w := newTwin(t, seed)
		for range 30 + w.rng.IntN(40) {
			ev := w.step()
			if ev == "" {
				continue
			}
			w.events = append(w.events, ev)
			if diff := w.compare(); diff != "" {
				t.Fatalf("seed %d: after %d events the incremental view differs from the full one: %s\nevents:\n  %s",
					seed, len(w.events), diff, strings.Join(w.events, "\n  "))
			}
		}
		maps.Copy(phases, w.phases)
		kept += w.kept
	}
	if kept == 0 {
		t.Error("the incremental view built every job on every recompute: the test compares two full builds")
	}
	t.Logf("phases seen in %d sequences: %v; groups taken over: %d", *incrementalSequences, slices.Sorted(maps.Keys(phases)), kept)
	for _, p := range []priority.JobPhase{priority.PhaseRunning, priority.PhaseAdmitted, priority.PhaseWaiting, priority.PhaseUnschedulable, priority.PhasePreempting} {
		if !phases[p] {
			t.Errorf("no job was %s in %d sequences: the events do not reach every phase", p, *incrementalSequences)
		}
	}
}
