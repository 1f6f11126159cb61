package view

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/nodesel"
	"github.com/cps-extender/cps-extender/extender/podrules"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/priority"
)

// podRecord is what the queue recompute needs of one pod, parsed once when the informer
// delivers the pod rather than on every recompute. Records are never changed once built:
// an update replaces the record.
type podRecord struct {
	uid       types.UID
	namespace string
	nsName    string // "namespace/name"
	node      string // spec.nodeName
	request   priority.Resources
	// deleteBy is the pod's deletionTimestamp: the end of its grace period.
	deleteBy time.Time
	// scheduledAt is when the pod was bound (its PodScheduled condition turned True); zero
	// when not known. A job runs since its latest pod's.
	scheduledAt time.Time
	priority    *int32
	// priorityClass is spec.priorityClassName (gang.urgentPriorityClasses).
	priorityClass string
	created       time.Time
	// job is the pod-only part of its membership (gang.PodMembership; valid when inJob)
	// with Role and Index taken out into role and index: the pods of a job share one
	// copy (100k pods: ~22 MB less). membership puts it back together.
	job   unique.Handle[gang.Membership]
	index int
	// constraints limit the nodes the pod may use; nil when it has none.
	constraints *nodesel.Constraints
	// labels are the pod's labels, which other pods' rules select; rules are its own
	// required pod (anti-)affinity and hard spread constraints (nil: none).
	labels map[string]string
	rules  *podrules.Rules
	// mayNotFit is what the pod's DRA claims use that the fit does not count (priority.Pod).
	mayNotFit []string
	// group is the job's pods this record is in (nil when not counted, or replaced), at
	// slot. Only the index writes them, under its lock.
	group *jobPods
	slot  int

	// The flags and the role, together so that they take one word: the record then fits
	// the 256-byte size class (100k pods: 3.2 MB less than 288).
	role       uint8 // a priority.Role; the roles are few
	terminated bool  // succeeded or failed: holds no resources
	deleting   bool
	// gated: the pod carries a scheduling gate other than gang.TurnGate, which the
	// extender does not lift; turnGated: it carries gang.TurnGate.
	gated, turnGated bool
	// turnedAway: kube-scheduler has tried the pod and failed (PodScheduled False). Not
	// part of what the queue depends on.
	turnedAway bool
	inJob      bool
	// counted: in a job, not terminated, not being deleted, not in an exempt namespace;
	// such a pod is in the queue's view of its job.
	counted bool
}

// jobPods is the counted pods of one job, kept current event by event, so that a
// recompute walks jobs instead of looking up every pod's job.
type jobPods struct {
	key  string
	pods []*podRecord
	// version changes whenever a pod of the job comes, goes or is replaced: a job built
	// from the pods at one version is built alike until it changes (jobs.go).
	version uint64
	// kept, in a copy records returns: the caller keeps this job as built at version, so
	// its pods are left out.
	kept bool
}

// nodeRecord is one node's allocatable, labels and taints, parsed once per node event.
type nodeRecord struct {
	name   string
	labels map[string]string
	// allocatable is the node's, with its free devices added; base is without them.
	allocatable, base priority.Resources
	unschedulable     bool
	// fit is what pods' node constraints read of the node: labels and taints.
	fit *nodesel.Node
}

// viewIndex keeps the pod and node records current from informer events, so a recompute
// after one event costs a pass over ready records, not a re-parse of every object.
type viewIndex struct {
	mu    sync.Mutex
	cfg   *viewConfig // the config the memberships were computed with
	pods  map[types.UID]*podRecord
	nodes map[string]*nodeRecord
	// requests holds one map per distinct pod request or node allocatable: the pods of a
	// job mostly ask for the same and nodes come in a few kinds, and priority.Admit works
	// a shared map out once. constraints does the same for pods' node constraints.
	requests    map[string]priority.Resources
	constraints nodesel.Table
	// sets caches the node set of each constraints over schedulable; nil after a node
	// change until the next recompute.
	sets *nodesel.Sets
	// schedulable is the schedulable nodes by name and nodeAt their positions; nil after a
	// node change until the next recompute. Published snapshots share them: never written.
	schedulable []*nodeRecord
	schedNames  []string // schedulable's names, packed (see packedNames)
	nodeAt      map[string]int
	topology    *priority.NodeIndex // schedulable's topology labels, for prioritize
	// jobs is the counted pods by job key; grouped counts them all.
	jobs    map[string]*jobPods
	grouped int
	// membership counts changes to which pods exist and which job each belongs to; a
	// recompute at the same count reuses the previous snapshot's pod-to-job maps.
	membership uint64
	// versions numbers the jobs' versions (jobPods.version), never reusing one; nodeSets
	// counts changes to the nodes, which make the pods' node sets anew.
	versions, nodeSets uint64
	// changes counts every change the queue depends on (pods, nodes, a rebuild). A
	// snapshot computed at a lower count is stale: a change it lacks is on its way. Written
	// under mu, read without.
	changes atomic.Uint64
	// devices adds DRA devices to node capacity and pod requests; nil: none (devices.go).
	devices DeviceSource
	// used is what the pods bound to each node take, by node name; special the records
	// being deleted or carrying gang.TurnGate; withRules counts the records with rules.
	// track keeps them with pods.
	used      map[string]*nodeUse
	special   map[types.UID]*podRecord
	withRules int
}

func newViewIndex() *viewIndex {
	return &viewIndex{pods: map[types.UID]*podRecord{}, nodes: map[string]*nodeRecord{}, jobs: map[string]*jobPods{},
		used: map[string]*nodeUse{}, special: map[types.UID]*podRecord{}}
}

func newPodRecord(pod *corev1.Pod, gangCfg config.GangConfig) *podRecord {
	r := &podRecord{
		uid: pod.UID, namespace: pod.Namespace, nsName: pod.Namespace + "/" + pod.Name, node: pod.Spec.NodeName,
		terminated: gang.PodTerminated(pod), deleting: pod.DeletionTimestamp != nil,
		priority: pod.Spec.Priority, priorityClass: pod.Spec.PriorityClassName, created: pod.CreationTimestamp.Time, turnedAway: gang.ScheduledFalse(pod), scheduledAt: gang.ScheduledAt(pod),
	}
	r.turnGated, r.gated = gang.SchedulingGates(pod)
	if pod.DeletionTimestamp != nil {
		r.deleteBy = pod.DeletionTimestamp.Time
	}
	if !r.terminated {
		r.request = gang.PodRequest(pod)
	}
	r.constraints = nodesel.Of(pod)
	r.labels, r.rules = pod.Labels, podrules.Of(pod)
	var m gang.Membership
	m, r.inJob = gang.PodMembership(gangCfg, pod)
	r.role, r.index, m.Role, m.Index = uint8(m.Role), m.Index, 0, 0
	r.job = unique.Make(m)
	r.counted = r.inJob && !r.terminated && !r.deleting && !gangCfg.Exempt(pod.Namespace)
	return r
}

// membership is the pod-only part of the pod's membership (gang.PodMembership).
func (r *podRecord) membership() gang.Membership {
	m := r.job.Value()
	m.Role, m.Index = priority.Role(r.role), r.index
	return m
}

// jobKey is the key of the job the pod's labels name (valid when inJob).
func (r *podRecord) jobKey() string { return r.job.Value().JobKey }

// group adds a counted record to its job's pods. x.mu is held.
func (x *viewIndex) group(r *podRecord) {
	if !r.counted {
		return
	}
	g := x.jobs[r.jobKey()]
	if g == nil {
		g = &jobPods{key: r.jobKey()}
		x.jobs[g.key] = g
	}
	r.group, r.slot = g, len(g.pods)
	g.pods = append(g.pods, r)
	x.grouped++
	x.bump(g)
}

// bump gives g a new version. x.mu is held.
func (x *viewIndex) bump(g *jobPods) {
	x.versions++
	g.version = x.versions
}

// ungroup takes a record out of its job's pods. x.mu is held.
func (x *viewIndex) ungroup(r *podRecord) {
	g := r.group
	if g == nil {
		return
	}
	last := len(g.pods) - 1
	moved := g.pods[last]
	g.pods[r.slot], moved.slot = moved, r.slot
	g.pods[last] = nil
	g.pods = g.pods[:last]
	if len(g.pods) == 0 {
		delete(x.jobs, g.key)
	}
	r.group = nil
	x.grouped--
	x.bump(g)
}

// replace puts r where old was: in the same slot when both count in the same job, so that
// a bind or a status change does not reorder the job's pods. x.mu is held.
func (x *viewIndex) replace(old, r *podRecord) {
	if old != nil && old.group != nil && r.counted && old.jobKey() == r.jobKey() {
		g := old.group
		g.pods[old.slot] = r
		r.group, r.slot = g, old.slot
		old.group = nil
		x.bump(g)
		return
	}
	if old != nil {
		x.ungroup(old)
	}
	x.group(r)
}

// newPodRecord is newPodRecord with the request and the constraints interned. x.mu is held.
func (x *viewIndex) newPodRecord(pod *corev1.Pod, gangCfg config.GangConfig) *podRecord {
	r := newPodRecord(pod, gangCfg)
	if x.devices != nil && !r.terminated {
		r.request, r.mayNotFit = x.devices.PodDemand(pod, r.request)
	}
	if r.request != nil {
		r.request = x.intern(r.request)
	}
	r.constraints = x.constraints.Intern(r.constraints)
	return r
}

// newNodeRecord is newNodeRecord with the allocatable interned: nodes of one kind share
// one map, and priority.Admit reads a shared free capacity once. x.mu is held.
func (x *viewIndex) newNodeRecord(n *corev1.Node) *nodeRecord {
	r := newNodeRecord(n)
	r.base = x.intern(r.allocatable)
	r.allocatable = r.base
	if x.devices != nil {
		r.allocatable = x.intern(x.devices.NodeCapacity(n.Name, r.base))
	}
	return r
}

// maxInternedRequests bounds the interned maps; past it the table starts afresh.
const maxInternedRequests = 4096

// intern returns the shared map equal to req, making req the shared one when new. Nobody
// writes to a record's request.
func (x *viewIndex) intern(req priority.Resources) priority.Resources {
	names := make([]string, 0, len(req))
	for name := range req {
		names = append(names, name)
	}
	slices.Sort(names)
	var key []byte
	for _, name := range names {
		key = append(key, name...)
		key = append(key, 0)
		key = strconv.AppendInt(key, req[name], 10)
		key = append(key, 0)
	}
	if shared, ok := x.requests[string(key)]; ok {
		return shared
	}
	if x.requests == nil || len(x.requests) >= maxInternedRequests {
		x.requests = map[string]priority.Resources{}
	}
	x.requests[string(key)] = req
	return req
}

func newNodeRecord(n *corev1.Node) *nodeRecord {
	return &nodeRecord{name: n.Name, labels: n.Labels, allocatable: gang.ResourcesOf(n.Status.Allocatable), unschedulable: n.Spec.Unschedulable,
		fit: nodesel.NewNode(n)}
}

// setPod records an added or updated pod. It reports whether anything the queue depends on
// changed: a status-only update (conditions, IPs) changes nothing and needs no recompute.
func (x *viewIndex) setPod(pod *corev1.Pod, cfg *viewConfig) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cfg != cfg {
		// The config changed under this event: rebuild every record from the informer
		// cache at the next recompute.
		x.cfg = nil
		x.changes.Add(1)
		return true
	}
	r := x.newPodRecord(pod, cfg.gang)
	old := x.pods[pod.UID]
	if old == nil || !sameMembership(old, r) {
		x.membership++
	}
	x.pods[pod.UID] = r
	x.replace(old, r)
	x.track(old, -1)
	x.track(r, 1)
	if old == nil || !samePodRecord(old, r) {
		x.changes.Add(1)
		return true
	}
	return false
}

// stuckAfter is how long past the end of its grace period a pod being deleted still counts
// as leaving. A pod still there then is held by a finalizer or an unreachable node: its room
// is not coming, and a preemption must not wait for it.
const stuckAfter = 30 * time.Second

// leaving reports whether the pod is being deleted and its room may be counted on at now.
func (r *podRecord) leaving(now time.Time) bool {
	return r.deleting && now.Before(r.deleteBy.Add(stuckAfter))
}

// samePodRecord reports whether two records of a pod are the same to the queue.
func samePodRecord(a, b *podRecord) bool {
	return (a.uid == b.uid && a.nsName == b.nsName && a.node == b.node && a.terminated == b.terminated &&
		a.deleting == b.deleting && a.deleteBy.Equal(b.deleteBy) && a.gated == b.gated && a.turnGated == b.turnGated && samePriority(a.priority, b.priority) && a.created.Equal(b.created) &&
		a.scheduledAt.Equal(b.scheduledAt) && a.inJob == b.inJob && a.role == b.role && a.index == b.index && (a.job == b.job || sameJobPart(a.job.Value(), b.job.Value())) &&
		maps.Equal(a.request, b.request) && nodesel.Same(a.constraints, b.constraints) &&
		maps.Equal(a.labels, b.labels) && podrules.Same(a.rules, b.rules) && slices.Equal(a.mayNotFit, b.mayNotFit))
}

// sameJobPart compares memberships by value: each record gets its own topology pointer, so
// == would see every update of a pod with a topology request as a change.
func sameJobPart(x, y gang.Membership) bool {
	if !x.Created.Equal(y.Created) || !sameTopology(x.Topology, y.Topology) {
		return false
	}
	x.Created, y.Created, x.Topology, y.Topology = time.Time{}, time.Time{}, nil, nil
	return x == y
}

func sameTopology(a, b *priority.TopologyRequest) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

func samePriority(a, b *int32) bool { return a == b || (a != nil && b != nil && *a == *b) }

// sameMembership reports whether two records of a pod put it in the same job (or none).
func sameMembership(a, b *podRecord) bool {
	return a.nsName == b.nsName && a.inJob == b.inJob && a.jobKey() == b.jobKey() &&
		a.terminated == b.terminated && a.deleting == b.deleting
}

func (x *viewIndex) deletePod(pod *corev1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.pods[pod.UID]; ok {
		x.ungroup(old)
		x.track(old, -1)
		delete(x.pods, pod.UID)
		x.membership++
		x.changes.Add(1)
	}
}

// setNode records an added or updated node and reports whether its allocatable, labels,
// taints or schedulability changed (Ready counts as a taint): kubelet and kwok heartbeats
// update only the status conditions' times, thousands of nodes every few seconds, and
// those need no recompute.
func (x *viewIndex) setNode(n *corev1.Node) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.newNodeRecord(n)
	if old := x.nodes[n.Name]; old != nil && old.unschedulable == r.unschedulable &&
		maps.Equal(old.allocatable, r.allocatable) && maps.Equal(old.labels, r.labels) && nodesel.SameTaints(old.fit, r.fit) {
		return false
	}
	x.nodes[n.Name] = r
	x.schedulable, x.nodeAt, x.sets = nil, nil, nil
	x.nodeSets++
	x.changes.Add(1)
	return true
}

func (x *viewIndex) deleteNode(n *corev1.Node) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.nodes, n.Name)
	x.schedulable, x.nodeAt, x.sets = nil, nil, nil
	x.nodeSets++
	x.changes.Add(1)
}

// packedNames copies the nodes' names into one backing string. Filter and prioritize look
// up and compare thousands of names a call; names spread over the informers' heap cost a
// cache miss each, packed ones sit in a few contiguous kilobytes.
func packedNames(nodes []*nodeRecord) []string {
	size := 0
	for _, n := range nodes {
		size += len(n.name)
	}
	var b strings.Builder
	b.Grow(size)
	for _, n := range nodes {
		b.WriteString(n.name)
	}
	packed, out := b.String(), make([]string, len(nodes))
	at := 0
	for i, n := range nodes {
		out[i] = packed[at : at+len(n.name)]
		at += len(n.name)
	}
	return out
}

// objectLister lists the informer caches.
type objectLister interface {
	pods() ([]*corev1.Pod, error)
	nodes() ([]*corev1.Node, error)
}

// indexed is one consistent read of the index.
type indexed struct {
	schedulable []*nodeRecord // by name
	names       []string      // schedulable's names, packed
	nodeAt      map[string]int
	topology    *priority.NodeIndex
	membership  uint64
	changes     uint64
	nodeSets    uint64
	// jobs is every job's counted pods, copied: the index goes on changing its own.
	jobs []jobPods
	// sets is the node set of each pending counted pod's constraints (nil: every node).
	sets map[*nodesel.Constraints]*priority.NodeSet

	// pods is every pod record, when asked for (recordsFor.all) or when some pod has
	// rules (rulesOf reads them all); nil otherwise.
	pods []*podRecord
	// nodes is the schedulable nodes' free capacity and Capacity less what the pods bound
	// to them take, ownFree and ownCapacity whether each map is the node's own; held is
	// the records of the pending pods the gate holds a bind for, special those being
	// deleted or turn-gated (see freeCapacity).
	nodes                []priority.Node
	ownFree, ownCapacity []bool
	held, special        []*podRecord
	count                int // how many pod records there are
}

// keepFunc says whether the caller keeps the job of key as it built it at version, with the
// node sets at count nodeSets (viewIndex.nodeSets).
type keepFunc func(nodeSets uint64, key string, version uint64) bool

// recordsFor says what records reads beside the nodes and jobs.
type recordsFor struct {
	// moved is the pods whose held bind changed; keep says which jobs the caller keeps (nil:
	// none). held is the gate's held binds, by pod UID.
	moved []types.UID
	keep  keepFunc
	held  map[types.UID]string
	// all: return every pod record (indexed.pods).
	all bool
}

// records returns the schedulable nodes with what their bound pods take, the records the
// free capacity and the turn gate read (see indexed), and each job's counted pods: without
// them for a job want.keep keeps, unless a pod of want.moved is in it now (its held bind
// changed). The first time, and when cfg is not the config the records were built with,
// they are rebuilt from the informer caches; events queued behind that listing then apply
// in order on top of it.
func (x *viewIndex) records(cfg *viewConfig, list objectLister, want recordsFor) (indexed, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cfg != cfg {
		if err := x.rebuild(cfg, list); err != nil {
			return indexed{}, err
		}
	}
	uids, keep := want.moved, want.keep
	var pods []*podRecord
	if want.all || x.withRules > 0 {
		pods = make([]*podRecord, 0, len(x.pods))
		for _, r := range x.pods {
			pods = append(pods, r)
		}
	}
	special := make([]*podRecord, 0, len(x.special))
	for _, r := range x.special {
		special = append(special, r)
	}
	if x.schedulable == nil {
		x.schedulable = make([]*nodeRecord, 0, len(x.nodes))
		for _, n := range x.nodes {
			if !n.unschedulable {
				x.schedulable = append(x.schedulable, n)
			}
		}
		slices.SortFunc(x.schedulable, func(a, b *nodeRecord) int { return strings.Compare(a.name, b.name) })
		x.schedNames = packedNames(x.schedulable)
		fits := make([]*nodesel.Node, len(x.schedulable))
		for i, n := range x.schedulable {
			fits[i] = n.fit
		}
		x.sets = nodesel.NewSets(fits, x.schedNames)
		x.nodeAt = make(map[string]int, len(x.schedulable))
		for i, name := range x.schedNames {
			x.nodeAt[name] = i
		}
		x.topology = nil
	}
	if x.topology == nil || !slices.Equal(x.topology.Topology(), cfg.affinity.Topology) {
		nodes := make([]priority.Node, len(x.schedulable))
		for i, n := range x.schedulable {
			nodes[i] = priority.Node{Name: x.schedNames[i], Labels: n.labels}
		}
		x.topology = priority.NewNodeIndex(nodes, cfg.affinity.Topology, nil)
	}
	var moved map[string]bool
	for _, uid := range uids {
		if r := x.pods[uid]; r != nil && r.group != nil {
			if moved == nil {
				moved = map[string]bool{}
			}
			moved[r.group.key] = true
		}
	}
	jobs := make([]jobPods, 0, len(x.jobs))
	var backing []*podRecord // one array for the pods of the jobs not kept
	if keep == nil {
		backing = make([]*podRecord, 0, x.grouped)
	}
	sets := map[*nodesel.Constraints]*priority.NodeSet{}
	for _, g := range x.jobs {
		if keep != nil && !moved[g.key] && keep(x.nodeSets, g.key, g.version) {
			jobs = append(jobs, jobPods{key: g.key, version: g.version, kept: true})
			continue
		}
		start := len(backing)
		backing = append(backing, g.pods...)
		jobs = append(jobs, jobPods{key: g.key, pods: backing[start:len(backing):len(backing)], version: g.version})
		for _, p := range g.pods {
			c := p.constraints
			if c == nil || p.node != "" {
				c = nil
			}
			if _, done := sets[c]; !done {
				sets[c] = x.sets.Of(c)
			}
		}
	}
	nodes, ownFree, ownCapacity := x.boundUse()
	return indexed{pods: pods, schedulable: x.schedulable, names: x.schedNames, nodeAt: x.nodeAt, topology: x.topology, membership: x.membership,
		changes: x.changes.Load(), nodeSets: x.nodeSets, jobs: jobs, sets: sets, nodes: nodes, ownFree: ownFree, ownCapacity: ownCapacity,
		held: x.heldRecords(want.held), special: special, count: len(x.pods)}, nil
}

func (x *viewIndex) rebuild(cfg *viewConfig, list objectLister) error {
	pods, err := list.pods()
	if err != nil {
		return fmt.Errorf("listing pods from the cache: %w", err)
	}
	nodes, err := list.nodes()
	if err != nil {
		return fmt.Errorf("listing nodes from the cache: %w", err)
	}
	x.pods = make(map[types.UID]*podRecord, len(pods))
	x.jobs, x.grouped = map[string]*jobPods{}, 0
	x.used, x.special, x.withRules = map[string]*nodeUse{}, map[types.UID]*podRecord{}, 0
	for _, p := range pods {
		r := x.newPodRecord(p, cfg.gang)
		x.pods[p.UID] = r
		x.group(r)
		x.track(r, 1)
	}
	x.nodes = make(map[string]*nodeRecord, len(nodes))
	for _, n := range nodes {
		x.nodes[n.Name] = x.newNodeRecord(n)
	}
	x.schedulable, x.nodeAt, x.sets = nil, nil, nil
	x.nodeSets++
	x.cfg = cfg
	x.membership++
	x.changes.Add(1)
	return nil
}

// cacheLister lists the cluster's informer caches.
type cacheLister struct{ c *Cluster }

func (l cacheLister) pods() ([]*corev1.Pod, error)   { return l.c.pods.List(labels.Everything()) }
func (l cacheLister) nodes() ([]*corev1.Node, error) { return l.c.nodes.List(labels.Everything()) }

// podEvents and nodeEvents keep the index current and ask for a recompute.
func (c *Cluster) podEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPod(obj, false) },
		UpdateFunc: func(_, obj any) { c.onPod(obj, false) },
		DeleteFunc: func(obj any) { c.onPod(obj, true) },
	}
}

func (c *Cluster) onPod(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	changed := true
	if pod, ok := obj.(*corev1.Pod); ok {
		if deleted {
			c.index.deletePod(pod)
		} else {
			changed = c.index.setPod(pod, c.config())
		}
	}
	if changed {
		c.Trigger()
	}
}

func (c *Cluster) nodeEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onNode(obj, false) },
		UpdateFunc: func(_, obj any) { c.onNode(obj, false) },
		DeleteFunc: func(obj any) { c.onNode(obj, true) },
	}
}

func (c *Cluster) onNode(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	changed := true
	if n, ok := obj.(*corev1.Node); ok {
		if deleted {
			c.index.deleteNode(n)
		} else {
			changed = c.index.setNode(n)
		}
	}
	if changed {
		c.Trigger()
	}
}

// turnedAwayOf lists the pending pods of the job of index key job that kube-scheduler has
// turned away (PodScheduled False), as the index has them now. A JobSet's later stage is
// found under its JobSet's key only: its pods are nudged by the filter's own records.
func (x *viewIndex) turnedAwayOf(job string) []gang.PodRef {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.jobs[job]
	if g == nil {
		return nil
	}
	var out []gang.PodRef
	for _, r := range g.pods {
		if r.turnedAway && r.node == "" {
			ns, name, _ := strings.Cut(r.nsName, "/")
			out = append(out, gang.PodRef{Namespace: ns, Name: name, UID: r.uid})
		}
	}
	return out
}
