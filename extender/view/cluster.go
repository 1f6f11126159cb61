// Package view is the extender's view of the cluster: client-go informers over nodes, pods,
// namespaces and PodGroups, an index of them, gang discovery (which job each pod is in), and
// the admission queue computed from them into immutable Snapshots. The per-pod decisions of
// one request come from one snapshot (Decisions). It imports gang, nodesel (the nodes a pod may
// use), podrules, tenant (users and urgency), sources, config, metrics and the priority
// model; the gate and the turns reach it only through interfaces it defines.
package view

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/sources"
	"github.com/cps-extender/cps-extender/extender/tenant"

	"github.com/cps-extender/cps-extender/extender/config"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/priority"
)

// groupSyncTimeout bounds the wait at start for the PodGroup and workload informers.
const groupSyncTimeout = 30 * time.Second

// Cluster is the extender's view of the cluster, kept by client-go shared informers, and
// the admission queue computed from it on every change. Handlers read it; they never call
// the API server.
type Cluster struct {
	log       *zap.Logger
	client    kubernetes.Interface
	factory   informers.SharedInformerFactory
	nodes     corelisters.NodeLister
	pods      corelisters.PodLister
	tenants   tenant.Reader // users and urgency, against the namespaces' labels
	groups    *sources.Groups
	synced    []cache.InformerSynced
	holds     HoldSource
	turns     Publisher
	preemptor Preemptor
	metrics   *metrics.Metrics
	now       func() time.Time
	interval  time.Duration
	informers atomic.Pointer[map[string]cache.InformerSynced] // by name, for the metrics

	cfg      atomic.Pointer[viewConfig]
	snapshot atomic.Pointer[Snapshot]
	// published is closed when the snapshot after the current one is stored (see Next).
	published atomic.Pointer[chan struct{}]
	kick      chan struct{}
	ready     atomic.Bool
	index     *viewIndex
	// sourceChanges counts namespace and PodGroup events: the jobs' users, sizes and
	// priorities come from them too, outside the index.
	sourceChanges atomic.Uint64
	// admitSpace is Admit's scratch space, reused recompute after recompute instead of
	// allocated anew; only the recompute uses it. Not a sync.Pool: a collection empties a
	// pool, and at 100k pods (50k pending), where collections come every second or two, the
	// ~16 MB it holds were then allocated again (HeapAtEnvelope; docs/history.md).
	admitSpace priority.Workspace
	// jobs is the jobs the last recompute built, by group of the index (jobs.go); only the
	// recompute reads and writes it. full: build every job on every recompute, and take
	// nothing over from the previous snapshot (the reference the tests compare with).
	jobs   *jobCache
	full   bool
	waits  metrics.JobWaits // for the job metrics
	levels levelNotes       // what was logged of the topology levels (levels.go)
	health *sources.Health
}

// viewConfig is the part of the configuration the view computes with; it can be swapped
// while running.
type viewConfig struct {
	gang     config.GangConfig
	model    priority.Model
	affinity priority.Affinity
	// schedulerNames are the schedulers whose pods the extender binds (BindCheck).
	schedulerNames []string
}

// ClusterOptions are the dependencies and settings of a Cluster.
type ClusterOptions struct {
	Log     *zap.Logger
	Client  kubernetes.Interface
	Dynamic dynamic.Interface // nil: no PodGroup sources
	Config  config.Config
	// Metrics receives the queue gauges; nil means none.
	Metrics *metrics.Metrics
	// Turns is told of every published snapshot, so that turned-away pods whose job's
	// turn came are brought back; nil means none.
	Turns Publisher
	// Holds are the gate's held binds and cool-downs; nil means none.
	Holds HoldSource
	// Preemptor evicts preemption victims and reports what it did; nil means none (the
	// model's preemption decisions are then only shown).
	Preemptor Preemptor
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Devices adds DRA devices to the fit; nil means none (no resource.k8s.io/v1).
	Devices DeviceSource
}

// NewCluster builds the cluster view; Start runs it.
func NewCluster(o ClusterOptions) *Cluster {
	factory := informers.NewSharedInformerFactory(o.Client, o.Config.ResyncPeriod.Duration)
	nodeInf := factory.Core().V1().Nodes()
	// The pod informer keeps no namespace index: nothing lists pods by namespace (a
	// lister's Get is a key lookup), and at 100k pods the index holds some 3.5 MB.
	podInf := factory.InformerFor(&corev1.Pod{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewPodInformer(client, metav1.NamespaceAll, resync, cache.Indexers{})
	})
	nsInf := factory.Core().V1().Namespaces()
	c := &Cluster{
		log:       o.Log,
		client:    o.Client,
		factory:   factory,
		nodes:     nodeInf.Lister(),
		pods:      corelisters.NewPodLister(podInf.GetIndexer()),
		tenants:   tenant.NewReader(nsInf.Lister()),
		metrics:   o.Metrics,
		turns:     o.Turns,
		holds:     o.Holds,
		preemptor: o.Preemptor,
		now:       o.Now,
		interval:  o.Config.Gate.RecomputeInterval.Duration,
		kick:      make(chan struct{}, 1),
		index:     newViewIndex(),
		synced:    []cache.InformerSynced{nodeInf.Informer().HasSynced, podInf.HasSynced, nsInf.Informer().HasSynced},
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.index.devices = o.Devices
	c.health = sources.NewHealth(o.Log, c.now)
	for name, inf := range map[string]cache.SharedIndexInformer{"nodes": nodeInf.Informer(), "pods": podInf, "namespaces": nsInf.Informer()} {
		c.health.Follow(name, inf)
	}
	c.informers.Store(&map[string]cache.InformerSynced{
		"nodes": nodeInf.Informer().HasSynced, "pods": podInf.HasSynced, "namespaces": nsInf.Informer().HasSynced,
	})
	c.cfg.Store(&viewConfig{gang: o.Config.Gang, model: o.Config.Model.PriorityModel(), affinity: o.Config.Affinity, schedulerNames: o.Config.SchedulerNames})
	sourceChanged := func() {
		c.sourceChanges.Add(1)
		c.Trigger()
	}
	onChange := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { sourceChanged() },
		UpdateFunc: func(any, any) { sourceChanged() },
		DeleteFunc: func(any) { sourceChanged() },
	}
	for _, inf := range []cache.SharedIndexInformer{nodeInf.Informer(), podInf} {
		if err := inf.SetTransform(sources.TrimForCache); err != nil {
			o.Log.Error("setting an informer transform", zap.Error(err))
		}
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{{nodeInf.Informer(), c.nodeEvents()}, {podInf, c.podEvents()}, {nsInf.Informer(), onChange}} {
		if _, err := h.inf.AddEventHandler(h.handler); err != nil {
			o.Log.Error("adding an event handler", zap.Error(err))
		}
	}
	var disc discovery.DiscoveryInterface
	if o.Client != nil {
		disc = o.Client.Discovery()
	}
	c.groups = sources.NewGroups(o.Log, disc, o.Dynamic, o.Config.Gang, sourceChanged, c.health)
	return c
}

// Start starts the informers, waits until their caches have synced, computes the first
// queue and then keeps it current until ctx ends. It returns an error when ctx ends before
// the caches sync.
func (c *Cluster) Start(ctx context.Context) error {
	named := maps.Clone(*c.informers.Load())
	var groupSynced []cache.InformerSynced
	for source, hasSynced := range c.groups.Start(ctx) {
		groupSynced = append(groupSynced, hasSynced)
		named["gangs-"+source] = hasSynced
	}
	c.informers.Store(&named)
	c.factory.Start(ctx.Done())
	// The device informers are waited for as the gang sources are: a ClusterRole without
	// them must not keep the view from starting (devices.go).
	for name, hasSynced := range c.startDevices(ctx) {
		groupSynced = append(groupSynced, hasSynced)
		named[name] = hasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("cluster view: informer caches did not sync: %w", ctx.Err())
	}
	// A PodGroup or workload kind the extender may not list (RBAC) would never sync: past
	// a bound the view goes on without it, and the pods of such a workload wait, saying so.
	wait, cancel := context.WithTimeout(ctx, groupSyncTimeout)
	if !cache.WaitForCacheSync(wait.Done(), groupSynced...) && ctx.Err() == nil {
		var slow []string
		for name, hasSynced := range named {
			if !hasSynced() {
				slow = append(slow, name)
			}
		}
		c.log.Error("gang or device sources not synced; their jobs wait until they are", zap.Strings("sources", slow), zap.Duration("after", groupSyncTimeout))
	}
	cancel()
	if c.client != nil {
		if rc := c.client.Discovery().RESTClient(); rc != nil { // a fake clientset has none
			go c.health.Probe(ctx, func(ctx context.Context) (string, error) {
				b, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
				return string(b), err
			})
		}
	}
	c.recompute(c.now())
	if c.turns != nil {
		c.turns.Seed(c.turnedAway())
	}
	c.ready.Store(true)
	c.log.Info("cluster view synced", zap.Int("queue", c.Snapshot().Queue.Len()))
	go c.loop(ctx)
	return nil
}

// loop recomputes the queue after changes, coalescing bursts (see nextRecompute), and at
// least every interval (waiting time grows and cool-downs end without any event).
func (c *Cluster) loop(ctx context.Context) {
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()
	var holdsChanged <-chan struct{}
	if c.holds != nil {
		holdsChanged = c.holds.Changed()
	}
	var last time.Time
	var took time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-holdsChanged:
		case <-ticker.C:
		}
		if wait := time.Until(nextRecompute(last, took)); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		// The recompute below reads every change signalled so far: the signals that came
		// during the wait ask for nothing more.
		select {
		case <-c.kick:
		default:
		}
		select {
		case <-holdsChanged:
		default:
		}
		last = time.Now()
		c.recompute(c.now())
		took = time.Since(last)
	}
}

// recomputeGap is the least time from the start of one recompute to the start of the next:
// the changes that come meanwhile are taken together. Without it a burst of pod events cost
// about two recomputes a pod (created, then held or bound), half the extender's CPU in
// TestThroughput on 1000 nodes; with it 770-1160 recomputes instead of 4020 for 2040 pods,
// extender CPU 7.4-8.0 -> 4.2-6.7 s (docs/history.md).
const recomputeGap = 20 * time.Millisecond

// maxRest bounds the rest after a long recompute: a filter waits at most
// scheduler.ViewCatchUp (250 ms) for a snapshot with the changes it saw.
const maxRest = 50 * time.Millisecond

// nextRecompute is the earliest start of the recompute after one that started at last and
// took took: recomputeGap after it, and no sooner than the time it took, up to maxRest, after
// it ended. A recompute at 50k pending pods (~50 ms) is then followed by as long a rest, so
// that a burst of events costs the view about half a core, not all of one.
func nextRecompute(last time.Time, took time.Duration) time.Time {
	return last.Add(max(recomputeGap, took+min(took, maxRest)))
}

// Trigger asks for a recompute soon; many triggers before it runs make one recompute.
func (c *Cluster) Trigger() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Snapshot returns the current admission state (nil before the first sync).
func (c *Cluster) Snapshot() *Snapshot { return c.snapshot.Load() }

// Next returns a channel that is closed once a snapshot newer than the current one is
// published. Take it before reading the snapshot, so that no publication is missed.
func (c *Cluster) Next() <-chan struct{} {
	for {
		if ch := c.published.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		c.published.CompareAndSwap(nil, &ch)
	}
}

// publish stores snap as the current snapshot and wakes those waiting for it (Next).
func (c *Cluster) publish(snap *Snapshot) {
	c.snapshot.Store(snap)
	next := make(chan struct{})
	if prev := c.published.Swap(&next); prev != nil {
		close(*prev)
	}
}

func (c *Cluster) config() *viewConfig { return c.cfg.Load() }

// Shutdown stops the informers and waits for their goroutines.
func (c *Cluster) Shutdown() {
	c.factory.Shutdown()
	c.groups.Shutdown()
}

// InformersSynced reports, by informer, whether its cache has synced.
func (c *Cluster) InformersSynced() map[string]bool {
	out := map[string]bool{}
	for name, hasSynced := range *c.informers.Load() {
		out[name] = hasSynced()
	}
	return out
}

// staleAfter is how old a snapshot may be before the view is not ready: the loop publishes
// one at least every interval, so only a stuck recompute lets it age.
func (c *Cluster) staleAfter() time.Duration { return max(10*time.Second, 10*c.interval) }

// Ready reports whether the view can be trusted to decide: the caches have synced and the
// first queue is computed, the current queue is fresh (younger than staleAfter), and no
// informer's list and watch has been failing for longer than sources.WatchFailingAfter. Otherwise
// the verbs answer 503 and /readyz fails, so that a stale view decides nothing.
func (c *Cluster) Ready() bool {
	if !c.ready.Load() {
		return false
	}
	if age, ok := c.SnapshotAge(); !ok || age > c.staleAfter() {
		return false
	}
	return c.health.Stale() == ""
}

// SnapshotAge is how old the current queue is (false before the first).
func (c *Cluster) SnapshotAge() (time.Duration, bool) {
	snap := c.Snapshot()
	if snap == nil {
		return 0, false
	}
	return c.now().Sub(snap.Computed), true
}

// NotReadyReason says why the view is not ready ("" when it is), for /readyz.
func (c *Cluster) NotReadyReason() string {
	switch age, ok := c.SnapshotAge(); {
	case !c.ready.Load() || !ok:
		return "cluster view not synced"
	case age > c.staleAfter():
		return "the queue is stale: last computed " + age.Round(time.Second).String() + " ago"
	}
	if name := c.health.Stale(); name != "" {
		return "the " + name + " informer's list and watch have failed for more than " + sources.WatchFailingAfter.String()
	}
	return ""
}

// Node returns the node called name from the informer cache.
func (c *Cluster) Node(name string) (*corev1.Node, bool) {
	n, err := c.nodes.Get(name)
	if err != nil {
		return nil, false
	}
	return n, true
}

// Pod returns a pod from the informer cache (trimmed: labels, annotations and the spec
// the view reads).
func (c *Cluster) Pod(namespace, name string) (*corev1.Pod, bool) {
	p, err := c.pods.Pods(namespace).Get(name)
	if err != nil {
		return nil, false
	}
	return p, true
}

// NodeName looks a node name up by its bytes in the current snapshot (see Decisions).
func (c *Cluster) NodeName(b []byte) (string, bool) { return c.Decisions().NodeName(b) }

// HasNode says whether a node is in the cluster view (see NodeName).
func (c *Cluster) HasNode(name string) bool {
	_, ok := c.NodeName([]byte(name))
	return ok
}

// NodeLabels returns a node's labels (nil for an unknown node).
func (c *Cluster) NodeLabels(name string) map[string]string {
	if n, ok := c.Node(name); ok {
		return n.Labels
	}
	return nil
}

// podGroup looks the object a gang comes from up in its source's informer: a PodGroup or
// a workload (see sources.Groups.Lookup).
func (c *Cluster) podGroup(lookup, namespace, name string) (gang.GroupInfo, bool) {
	return c.groups.Lookup(lookup, namespace, name)
}

// SetModel swaps the model and affinity the view computes with, and recomputes the queue.
func (c *Cluster) SetModel(model priority.Model, affinity priority.Affinity) {
	old := c.cfg.Load()
	c.cfg.Store(&viewConfig{gang: old.gang, model: model, affinity: affinity, schedulerNames: old.schedulerNames})
	c.Trigger()
}

// Queue returns the current admission queue and when it was computed (nil before the first
// sync), for /debug/queue.
func (c *Cluster) Queue() (*priority.Queue, time.Time) {
	snap := c.Snapshot()
	if snap == nil {
		return nil, time.Time{}
	}
	return snap.Queue, snap.Computed
}

// Leaving reports whether a job has bound pods being deleted in the current snapshot (a
// preemption victim, mostly).
func (c *Cluster) Leaving(job string) bool {
	j, _, ok := c.Snapshot().Job(job)
	return ok && j.Leaving > 0
}

// HoldsSeen is the gate's change count (HoldSource.Placed) the current snapshot was
// computed from; 0 before the first, or without a gate.
func (c *Cluster) HoldsSeen() uint64 {
	if s := c.Snapshot(); s != nil {
		return s.holdsSeq
	}
	return 0
}

// Job returns a job and its admission decision in the current snapshot.
func (c *Cluster) Job(key string) (*priority.Job, *priority.Decision, bool) {
	return c.Snapshot().Job(key)
}
