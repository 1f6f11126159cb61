package devices

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/cps-extender/cps-extender/priority"
)

// celCacheSize bounds the compiled selector expressions kept (upstream's cache, as
// kube-scheduler keeps one).
const celCacheSize = 100

// Source keeps DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates in
// informers and answers node capacity and pod demand from them. Its methods are safe for
// concurrent use.
type Source struct {
	log       *zap.Logger
	factory   informers.SharedInformerFactory
	classes   resourcelisters.DeviceClassLister
	slices    resourcelisters.ResourceSliceLister
	claims    resourcelisters.ResourceClaimLister
	templates resourcelisters.ResourceClaimTemplateLister
	synced    map[string]cache.InformerSynced
	cel       *cel.Cache

	mu sync.Mutex
	// inventory is rebuilt after a class or slice change, free after any change; nil
	// means to be rebuilt at the next read.
	inventory *Inventory
	free      *Free
	onChange  func(podsToo bool)
}

// Served reports whether the API server serves resource.k8s.io/v1 DeviceClasses and
// ResourceSlices; without them there are no devices to count.
func Served(client kubernetes.Interface) (bool, error) {
	list, err := client.Discovery().ServerResourcesForGroupVersion(resourceapi.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", resourceapi.SchemeGroupVersion, err)
	}
	var classes, slices bool
	for _, r := range list.APIResources {
		classes = classes || r.Name == "deviceclasses"
		slices = slices || r.Name == "resourceslices"
	}
	return classes && slices, nil
}

// NewSource builds the informers; Start runs them.
func NewSource(log *zap.Logger, client kubernetes.Interface, factory informers.SharedInformerFactory) *Source {
	if factory == nil {
		factory = informers.NewSharedInformerFactory(client, 0)
	}
	r := factory.Resource().V1()
	s := &Source{
		log: log, factory: factory,
		classes: r.DeviceClasses().Lister(), slices: r.ResourceSlices().Lister(),
		claims: r.ResourceClaims().Lister(), templates: r.ResourceClaimTemplates().Lister(),
		cel: cel.NewCache(celCacheSize, cel.Features{}),
	}
	inventoryChanged := func() { s.changed(true, true) }
	specsChanged := func() { s.changed(false, true) }
	s.synced = map[string]cache.InformerSynced{}
	for _, h := range []struct {
		name   string
		inf    cache.SharedIndexInformer
		change func()
		update func()
	}{
		{"deviceclasses", r.DeviceClasses().Informer(), inventoryChanged, inventoryChanged},
		{"resourceslices", r.ResourceSlices().Informer(), inventoryChanged, inventoryChanged},
		// A claim's update is mostly its status: kube-scheduler's allocation and
		// reservation at PreBind, the release after the pod. Those change no pod's request
		// and only sometimes a node's free devices (claimUpdated). So do the comings and
		// goings of the claims made for a pod from a template or for its extended
		// resources (claimCame): pods' requests read the template, not those claims.
		{"resourceclaims", r.ResourceClaims().Informer(), nil, s.claimUpdated},
		{"resourceclaimtemplates", r.ResourceClaimTemplates().Informer(), specsChanged, specsChanged},
	} {
		change, update := h.change, h.update
		came := func(obj any) { change() }
		if change == nil {
			came = s.claimCame
		}
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: came, UpdateFunc: func(a, b any) { update() }, DeleteFunc: came,
		}); err != nil {
			log.Error("adding a device event handler", zap.Error(err))
		}
		s.synced[h.name] = h.inf.HasSynced
	}
	return s
}

// claimUpdated recomputes the free devices after a claim's update and tells of a change only
// when they differ: the records then need no rebuild for an allocation that comes with its
// reservation, as kube-scheduler writes them, nor for its release. A claim's status changes
// no pod's request (they read the specs): when they differ only the nodes' capacities do.
func (s *Source) claimUpdated() {
	s.mu.Lock()
	if s.inventory == nil || s.free == nil {
		s.mu.Unlock()
		s.changed(false, true)
		return
	}
	before, inventory := s.free, s.inventory
	s.free = nil
	s.mu.Unlock()
	after := s.current()
	if sameFree(before, after) {
		return
	}
	s.mu.Lock()
	podsToo := s.inventory != inventory // a selector the inventory did not count
	s.mu.Unlock()
	s.changed(false, podsToo)
}

// claimCame handles a claim added or deleted: one a pod names in its spec changes that pod's
// request (a rebuild); one made for a pod (from a template, or for its extended resources)
// only perhaps a node's free devices.
func (s *Source) claimCame(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		s.changed(false, true)
		return
	}
	_, fromTemplate := c.Annotations[resourceapi.PodResourceClaimAnnotation]
	_, forExtended := c.Annotations[resourceapi.ExtendedResourceClaimAnnotation]
	if !fromTemplate && !forExtended || len(SelectedOf(&c.Spec)) > 0 && !s.knows(c) {
		s.changed(false, true)
		return
	}
	s.claimUpdated()
}

// knows reports whether the inventory counts every request selector set of the claim.
func (s *Source) knows(c *resourceapi.ResourceClaim) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inventory == nil {
		return false
	}
	for _, sel := range SelectedOf(&c.Spec) {
		if !s.inventory.selected[sel.Name] {
			return false
		}
	}
	return true
}

// sameFree reports whether two Frees give every node the same devices.
func sameFree(a, b *Free) bool {
	return maps.EqualFunc(a.nodes, b.nodes, func(x, y priority.Resources) bool { return maps.Equal(x, y) })
}

// Start starts the informers and calls onChange after every later change, podsToo false when
// only the nodes' free devices changed (NodeCapacity), true when pods' requests may have
// (PodDemand); it returns the informers' HasSynced by kind.
func (s *Source) Start(ctx context.Context, onChange func(podsToo bool)) map[string]cache.InformerSynced {
	s.mu.Lock()
	s.onChange = onChange
	s.mu.Unlock()
	s.factory.Start(ctx.Done())
	return s.synced
}

// changed drops what the change makes stale (the inventory too when inventory is set) and
// tells onChange, with podsToo.
func (s *Source) changed(inventory, podsToo bool) {
	s.mu.Lock()
	if inventory {
		s.inventory = nil
	}
	s.free = nil
	f := s.onChange
	s.mu.Unlock()
	if f != nil {
		f(podsToo)
	}
}

// current is the free devices now, rebuilt if a change came since.
func (s *Source) current() *Free {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free != nil {
		return s.free
	}
	claims, err1 := s.claims.List(labels.Everything())
	templates, err2 := s.templates.List(labels.Everything())
	if err := firstErr(err1, err2); err != nil {
		s.log.Error("listing resource claims from the cache", zap.Error(err))
	}
	// The request selector sets the claims and templates name; a new one rebuilds the
	// inventory, which counts the devices each accepts.
	var selected []Selected
	for _, t := range templates {
		selected = append(selected, SelectedOf(&t.Spec.Spec)...)
	}
	for _, c := range claims {
		selected = append(selected, SelectedOf(&c.Spec)...)
	}
	if s.inventory != nil && slices.ContainsFunc(selected, func(sel Selected) bool { return !s.inventory.selected[sel.Name] }) {
		s.inventory = nil
	}
	if s.inventory == nil {
		classes, err1 := s.classes.List(labels.Everything())
		slices, err2 := s.slices.List(labels.Everything())
		if err := firstErr(err1, err2); err != nil {
			s.log.Error("listing devices from the cache", zap.Error(err))
		}
		s.inventory = NewInventory(classes, slices, selected, s.cel)
	}
	s.free = NewFree(s.inventory, claims)
	return s.free
}

func firstErr(errs ...error) error {
	i := slices.IndexFunc(errs, func(e error) bool { return e != nil })
	if i < 0 {
		return nil
	}
	return errs[i]
}

// NodeCapacity is a node's allocatable with its free devices added (Free.Capacity).
func (s *Source) NodeCapacity(node string, allocatable priority.Resources) priority.Resources {
	if s == nil {
		return allocatable
	}
	return s.current().Capacity(node, allocatable)
}

// PodDemand is the pod's request with its claims' devices added, and what its claims use
// that the count does not model (DemandNotes); the request itself when it has none.
func (s *Source) PodDemand(pod *corev1.Pod, request priority.Resources) (priority.Resources, []string) {
	if s == nil || len(pod.Spec.ResourceClaims) == 0 {
		return request, nil
	}
	extra, notes := DemandNotes(pod, s, s.current().inv)
	if len(extra) == 0 {
		return request, notes
	}
	out := make(priority.Resources, len(request)+len(extra))
	maps.Copy(out, request)
	for k, v := range extra {
		out[k] += v
	}
	return out, notes
}

// Claim is the ResourceClaim namespace/name from the cache; nil when not there.
func (s *Source) Claim(namespace, name string) *resourceapi.ResourceClaim {
	c, err := s.claims.ResourceClaims(namespace).Get(name)
	if err != nil {
		return nil
	}
	return c
}

// Template is the ResourceClaimTemplate namespace/name from the cache; nil when not there.
func (s *Source) Template(namespace, name string) *resourceapi.ResourceClaimTemplate {
	t, err := s.templates.ResourceClaimTemplates(namespace).Get(name)
	if err != nil {
		return nil
	}
	return t
}
