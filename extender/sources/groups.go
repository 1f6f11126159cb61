// Package sources keeps the informers the cluster view reads beside pods and nodes: those of
// the objects gangs come from, PodGroups and workloads (Groups), and follows the health of
// every informer's list and watch (Health), and trims what the informers cache of a pod
// (TrimForCache). It imports config and gang.
package sources

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// The PodGroup kinds the extender reads.
var (
	volcanoPodGroups      = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	coschedulingPodGroups = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	// workloadPodGroups are Kubernetes' own (the Workload API, GenericWorkload, beta in 1.37).
	workloadPodGroups = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}
)

// groupSource is one kind of object that gangs come from: a PodGroup kind or a workload kind.
type groupSource struct {
	// name is what memberships look it up by: the PodGroup source, or the workload's kind.
	name     string
	gvr      schema.GroupVersionResource
	workload bool
	derive   func(*unstructured.Unstructured) gang.GroupInfo
}

// groupObject is what the informers keep of a PodGroup or a workload: its name and what
// its gang is, worked out once per event (a TFJob or a JobSet carries whole pod templates,
// which the view never reads).
type groupObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Info gang.GroupInfo
}

// DeepCopyObject copies the object; Info's maps are shared, since nobody writes them.
func (o *groupObject) DeepCopyObject() runtime.Object {
	c := *o
	c.ObjectMeta = *o.ObjectMeta.DeepCopy()
	return &c
}

// runningSource is the informer of a served source.
type runningSource struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

// Groups keeps an informer for each PodGroup and workload kind that the config
// switches on and the cluster serves, and asks discovery every interval which are served:
// a CRD installed later is read from then on, one removed is dropped.
type Groups struct {
	log       *zap.Logger
	discovery discovery.DiscoveryInterface
	dyn       dynamic.Interface
	onChange  func()
	wanted    []groupSource
	interval  time.Duration

	mu        sync.RWMutex
	running   map[string]*runningSource
	offLogged map[string]bool // sources whose "not served" line was logged
	health    *Health         // nil: no one follows the informers' errors
}

// NewGroups wants the sources g switches on; onChange is called on every change of their
// objects, and health (nil: none) follows their informers. With no client (dyn or disc nil)
// it reads nothing.
func NewGroups(log *zap.Logger, disc discovery.DiscoveryInterface, dyn dynamic.Interface, g config.GangConfig, onChange func(), health *Health) *Groups {
	s := &Groups{log: log, discovery: disc, dyn: dyn, onChange: onChange, interval: g.DiscoveryInterval.Duration,
		running: map[string]*runningSource{}, offLogged: map[string]bool{}, health: health}
	if dyn == nil || disc == nil {
		return s
	}
	podGroup := func(source string, gvr schema.GroupVersionResource) groupSource {
		return groupSource{name: source, gvr: gvr, derive: func(u *unstructured.Unstructured) gang.GroupInfo { return gang.DerivePodGroup(source, u) }}
	}
	if g.Volcano {
		s.wanted = append(s.wanted, podGroup(gang.SourceVolcano, volcanoPodGroups))
	}
	if g.Coscheduling {
		s.wanted = append(s.wanted, podGroup(gang.SourceCoscheduling, coschedulingPodGroups))
	}
	if g.Workload {
		s.wanted = append(s.wanted, podGroup(gang.SourceWorkload, workloadPodGroups))
	}
	for _, k := range gang.WorkloadKinds {
		if gang.WorkloadOn(g, k.Source) {
			kind := k.Kind
			s.wanted = append(s.wanted, groupSource{name: kind, gvr: k.GVR, workload: true,
				derive: func(u *unstructured.Unstructured) gang.GroupInfo { return gang.DeriveWorkload(kind, u) }})
		}
	}
	return s
}

// Start asks discovery which sources are served, starts their informers and returns their
// sync functions by name; then it asks again every interval until ctx ends. It must run
// before lookups.
func (s *Groups) Start(ctx context.Context) map[string]cache.InformerSynced {
	if len(s.wanted) == 0 {
		return nil
	}
	s.sync(ctx)
	go func() {
		_ = wait.PollUntilContextCancel(ctx, s.interval, false, func(ctx context.Context) (bool, error) { // ends with ctx only
			s.sync(ctx)
			return false, nil
		})
	}()
	s.mu.RLock()
	defer s.mu.RUnlock()
	synced := make(map[string]cache.InformerSynced, len(s.running))
	for name, r := range s.running {
		synced[name] = r.informer.HasSynced
	}
	return synced
}

// sync starts the informers of the sources served now and stops those no longer served.
// A group version that discovery cannot answer for is left as it was.
func (s *Groups) sync(ctx context.Context) {
	served := map[schema.GroupVersion]map[string]bool{}
	for _, w := range s.wanted {
		gv := w.gvr.GroupVersion()
		if _, asked := served[gv]; asked {
			continue
		}
		list, err := s.discovery.ServerResourcesForGroupVersion(gv.String())
		switch {
		case err == nil:
			resources := map[string]bool{}
			for _, r := range list.APIResources {
				resources[r.Name] = true
			}
			served[gv] = resources
		case apierrors.IsNotFound(err):
			served[gv] = map[string]bool{}
		default:
			s.log.Warn("discovery failed; the gang sources of this group version stay as they were", zap.String("groupVersion", gv.String()), zap.Error(err))
			served[gv] = nil
		}
	}
	changed := false
	s.mu.Lock()
	for _, w := range s.wanted {
		resources := served[w.gvr.GroupVersion()]
		if resources == nil {
			continue
		}
		r, running := s.running[w.name]
		switch on := resources[w.gvr.Resource]; {
		case on && !running:
			s.running[w.name] = s.startInformer(ctx, w)
			s.log.Info("gang source on", zap.String("source", w.name), zap.String("resource", w.gvr.String()))
			changed = true
		case !on && running:
			r.stop()
			delete(s.running, w.name)
			s.log.Info("gang source off: the cluster no longer serves it", zap.String("source", w.name), zap.String("resource", w.gvr.String()))
			changed = true
		case !on && !s.offLogged[w.name]:
			s.offLogged[w.name] = true
			s.log.Info("gang source off: the cluster does not serve it", zap.String("source", w.name), zap.String("resource", w.gvr.String()))
		}
	}
	s.mu.Unlock()
	if changed {
		s.onChange()
	}
}

// startInformer runs an informer for one source that keeps only what its gangs need.
func (s *Groups) startInformer(ctx context.Context, w groupSource) *runningSource {
	inf := dynamicinformer.NewFilteredDynamicInformer(s.dyn, w.gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // transformed already
		}
		return &groupObject{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion(), CreationTimestamp: u.GetCreationTimestamp()}, Info: w.derive(u)}, nil
	}); err != nil {
		s.log.Error("setting a gang source's transform", zap.String("source", w.name), zap.Error(err))
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.onChange() },
		UpdateFunc: func(old, obj any) {
			// A workload's status changes with every pod of it; only its gang matters.
			if o, ok := old.(*groupObject); ok {
				if n, ok := obj.(*groupObject); ok && sameGroupInfo(o.Info, n.Info) {
					return
				}
			}
			s.onChange()
		},
		DeleteFunc: func(any) { s.onChange() },
	}); err != nil {
		s.log.Error("adding a gang source's event handler", zap.String("source", w.name), zap.Error(err))
	}
	if s.health != nil {
		s.health.Follow("gangs-"+w.name, inf)
	}
	ictx, stop := context.WithCancel(ctx)
	go inf.RunWithContext(ictx)
	return &runningSource{informer: inf, stop: stop}
}

// sameGroupInfo reports whether two reads of an object give the same gang.
func sameGroupInfo(a, b gang.GroupInfo) bool {
	return a.MinMember == b.MinMember && a.Created.Equal(b.Created) && maps.Equal(a.Annotations, b.Annotations) &&
		a.RequiredTopology == b.RequiredTopology && a.Finished == b.Finished && a.Unknown == b.Unknown &&
		maps.Equal(a.Stages, b.Stages) && a.Owner == b.Owner
}

// Shutdown stops every informer.
func (s *Groups) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, r := range s.running {
		r.stop()
		delete(s.running, name)
	}
}

// Lookup reads what the object a gang comes from says of it. A PodGroup that is not there
// (or whose kind is not served) is not found; a workload always answers, with Unknown
// saying why its gang cannot be known when it cannot be read.
func (s *Groups) Lookup(name, namespace, objName string) (gang.GroupInfo, bool) {
	i := slices.IndexFunc(s.wanted, func(w groupSource) bool { return w.name == name })
	if i < 0 {
		return gang.GroupInfo{}, false
	}
	w := s.wanted[i]
	s.mu.RLock()
	r := s.running[name]
	s.mu.RUnlock()
	ref := name + " " + namespace + "/" + objName
	if r == nil {
		if !w.workload {
			return gang.GroupInfo{}, false
		}
		return gang.GroupInfo{Unknown: "its " + ref + " cannot be read: the cluster does not serve " + w.gvr.GroupResource().String()}, true
	}
	obj, exists, err := r.informer.GetIndexer().GetByKey(namespace + "/" + objName)
	if o, ok := obj.(*groupObject); ok && err == nil && exists {
		return o.Info, true
	}
	if !w.workload {
		return gang.GroupInfo{}, false
	}
	if !r.informer.HasSynced() {
		return gang.GroupInfo{Unknown: "its " + ref + " is not read yet: the extender is still reading " + w.gvr.GroupResource().String()}, true
	}
	return gang.GroupInfo{Unknown: "its " + ref + " is not in the extender's view (not created yet, or deleted)"}, true
}
