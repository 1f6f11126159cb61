// Package devices puts Dynamic Resource Allocation (DRA) devices into the admission fit.
// It reads DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates
// (resource.k8s.io/v1) and answers two questions in the model's terms
// (priority.Resources): how many devices of each class a node offers, and how many a pod
// asks for.
//
// A class's devices on a node are counted under the name kube-scheduler gives the class as
// an extended resource, deviceclass.resource.kubernetes.io/<class> (KEP-5004), and under
// the class's extendedResourceName when it has one and the node's allocatable does not
// carry that name (a device plugin's resource wins, as in kube-scheduler). A pod asks for
// its claims' and claim templates' exact-count requests under the first name, and for an
// extended resource by the name it writes in its containers' requests. Bound pods count
// their requests on their node like any other resource, so only allocated claims that no
// pod is reserved for are taken off a node's count.
package devices

import (
	"context"
	"hash/fnv"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/cps-extender/cps-extender/priority"
)

// ClassResource is the resource name the model counts a DeviceClass's devices under.
func ClassResource(class string) string { return priority.DeviceClassPrefix + class }

// SelectedResource is the resource name the model counts the devices of a class that a
// request's own CEL selectors also accept under: the class's name with a hash of the
// expressions ("" when the request has no CEL selector).
func SelectedResource(class string, selectors []resourceapi.DeviceSelector) string {
	h := fnv.New64a()
	n := 0
	for _, sel := range selectors {
		if sel.CEL != nil {
			h.Write([]byte(sel.CEL.Expression))
			h.Write([]byte{0})
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return ClassResource(class) + priority.DeviceSelectedSep + strconv.FormatUint(h.Sum64()&0xffffffff, 16)
}

// Selected is a request's class and own selectors: the devices both accept are counted
// under Name (SelectedResource).
type Selected struct {
	Name      string
	Class     string
	Selectors []resourceapi.DeviceSelector
}

// deviceID names a device the way an allocation result does.
type deviceID struct{ driver, pool, device string }

// class is a DeviceClass as the count needs it: its compiled selectors.
type class struct {
	name     string
	extended string // extendedResourceName; "" when none
	// selectors are the class's CEL selectors, compiled; bad is set when one does not
	// compile or evaluate, and then the class matches no device (as in kube-scheduler).
	selectors []cel.CompilationResult
	bad       bool
}

// compileClass compiles a DeviceClass's selectors with the upstream DRA CEL compiler.
func compileClass(c *resourceapi.DeviceClass, cache *cel.Cache) *class {
	out := &class{name: c.Name}
	if c.Spec.ExtendedResourceName != nil {
		out.extended = *c.Spec.ExtendedResourceName
	}
	for _, s := range c.Spec.Selectors {
		if s.CEL == nil {
			continue
		}
		r := cache.GetOrCompile(s.CEL.Expression)
		if r.Error != nil {
			out.bad = true
		}
		out.selectors = append(out.selectors, r)
	}
	return out
}

// matches reports whether every selector of the class accepts the device; failed is set
// when one cannot be compiled or evaluated on it (the device then does not match).
func (c *class) matches(ctx context.Context, driver string, d *resourceapi.Device) (ok, failed bool) {
	if c.bad {
		return false, true
	}
	in := cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity}
	for _, s := range c.selectors {
		ok, _, err := s.DeviceMatches(ctx, in)
		if err != nil {
			return false, true
		}
		if !ok {
			return false, false
		}
	}
	return true, false
}

// Inventory is the devices of every node by class, and which classes each device counts
// in. It is built from DeviceClasses and ResourceSlices, never changed after.
type Inventory struct {
	// nodes holds, per node, the devices of each class (by ClassResource name) and of each
	// extended resource a class serves (by that name).
	nodes map[string]priority.Resources
	// of is where each device is and the names it counts under.
	of map[deviceID]placed
	// extended maps an extendedResourceName to the classes that serve it.
	extended map[string][]string
	// selected is the names of the request selector sets counted (SelectedResource).
	selected map[string]bool
	// notes are, by class (ClassResource) and selector set (SelectedResource) name, the
	// features of the devices they accept that the count does not model.
	notes map[string]note
}

type placed struct {
	node  string
	names []string
}

// NewInventory counts the devices of the node-local ResourceSlices (spec.nodeName set, or a
// device's own nodeName) that each class's selectors accept, and for each request selector
// set in selected those its class and its own selectors accept. Of a pool only the slices
// of its newest generation count, as in kube-scheduler. Slices of network-attached devices
// (nodeSelector, allNodes) are left out of the count. What the count does not model of the
// devices a class or selector set accepts is noted for the pods' demand (DemandNotes).
func NewInventory(classes []*resourceapi.DeviceClass, slices []*resourceapi.ResourceSlice, selected []Selected, cache *cel.Cache) *Inventory {
	inv := &Inventory{nodes: map[string]priority.Resources{}, of: map[deviceID]placed{}, extended: map[string][]string{},
		selected: map[string]bool{}, notes: map[string]note{}}
	compiled := make([]*class, 0, len(classes))
	byName := map[string]*class{}
	for _, c := range classes {
		k := compileClass(c, cache)
		compiled = append(compiled, k)
		byName[k.name] = k
		if k.extended != "" {
			inv.extended[k.extended] = append(inv.extended[k.extended], k.name)
		}
	}
	// A selector set counts devices its class accepts too: it is matched only on those.
	sets := map[string][]*class{}
	setClass := map[string]string{}
	for _, sel := range selected {
		if inv.selected[sel.Name] {
			continue
		}
		inv.selected[sel.Name] = true
		if byName[sel.Class] == nil {
			continue // no such class: its requests fit nowhere, as in kube-scheduler
		}
		own := compileClass(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: sel.Name}, Spec: resourceapi.DeviceClassSpec{Selectors: sel.Selectors}}, cache)
		sets[sel.Class] = append(sets[sel.Class], own)
		setClass[sel.Name] = sel.Class
		if own.bad {
			inv.notes[sel.Name] |= noteUnevaluable
		}
	}
	type poolKey struct{ driver, pool string }
	newest := map[poolKey]int64{}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		newest[k] = max(newest[k], s.Spec.Pool.Generation)
	}
	ctx := context.Background()
	for _, s := range slices {
		if s.Spec.Pool.Generation < newest[poolKey{s.Spec.Driver, s.Spec.Pool.Name}] {
			continue
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			node := nodeOf(s, d)
			dn := deviceNote(s, d)
			var names []string
			classes := 0
			for _, c := range compiled {
				ok, failed := c.matches(ctx, s.Spec.Driver, d)
				if failed {
					inv.notes[ClassResource(c.name)] |= noteUnevaluable
				}
				if !ok {
					continue
				}
				classes++
				names = append(names, ClassResource(c.name))
				if c.extended != "" {
					names = append(names, c.extended)
				}
				for _, own := range sets[c.name] {
					ok, failed := own.matches(ctx, s.Spec.Driver, d)
					if failed {
						inv.notes[own.name] |= noteUnevaluable
					}
					if ok {
						names = append(names, own.name)
					}
				}
			}
			for _, n := range names {
				if classes > 1 {
					inv.notes[n] |= noteTwoClasses
				}
				if dn != 0 {
					inv.notes[n] |= dn
				}
			}
			if len(names) == 0 || node == "" {
				continue
			}
			res := inv.nodes[node]
			if res == nil {
				res = priority.Resources{}
				inv.nodes[node] = res
			}
			for _, n := range names {
				res[n]++
			}
			inv.of[deviceID{s.Spec.Driver, s.Spec.Pool.Name, d.Name}] = placed{node: node, names: names}
		}
	}
	// A selector set that picks some but not all of its class's devices on a node counts
	// apart what the class's other requests may take first.
	for name, className := range setClass {
		for _, res := range inv.nodes {
			if picked := res[name]; picked > 0 && picked < res[ClassResource(className)] {
				inv.notes[name] |= noteSelectorShare
				break
			}
		}
	}
	return inv
}

// nodeOf is the node a device is local to; "" for a network-attached one.
func nodeOf(s *resourceapi.ResourceSlice, d *resourceapi.Device) string {
	if s.Spec.NodeName != nil {
		return *s.Spec.NodeName
	}
	if d.NodeName != nil {
		return *d.NodeName
	}
	return ""
}

// Free is an Inventory less the devices of allocated claims that no pod is reserved for:
// a pod's own claims count in its request instead (Demand), on its node once bound.
type Free struct {
	inv   *Inventory
	nodes map[string]priority.Resources
}

// NewFree takes the devices of unreserved allocated claims off the inventory.
func NewFree(inv *Inventory, claims []*resourceapi.ResourceClaim) *Free {
	f := &Free{inv: inv, nodes: inv.nodes}
	copied := false
	for _, c := range claims {
		a := c.Status.Allocation
		if a == nil || len(c.Status.ReservedFor) > 0 {
			continue
		}
		for _, r := range a.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			p, ok := inv.of[deviceID{r.Driver, r.Pool, r.Device}]
			if !ok {
				continue
			}
			if !copied {
				f.nodes, copied = maps.Clone(inv.nodes), true
			}
			res := maps.Clone(f.nodes[p.node])
			for _, n := range p.names {
				res[n]--
			}
			f.nodes[p.node] = res
		}
	}
	return f
}

// Capacity is a node's allocatable with its devices added; allocatable itself when the node
// has none. A name the allocatable already has (a device plugin's) is left as it is.
func (f *Free) Capacity(node string, allocatable priority.Resources) priority.Resources {
	if f == nil {
		return allocatable
	}
	devs := f.nodes[node]
	if len(devs) == 0 {
		return allocatable
	}
	out := make(priority.Resources, len(allocatable)+len(devs))
	maps.Copy(out, allocatable)
	for k, v := range devs {
		if _, plugin := allocatable[k]; !plugin {
			out[k] = max(v, 0)
		}
	}
	return out
}

// ClaimSpecs finds the claims and claim templates pods name; nil results mean not (yet) seen.
type ClaimSpecs interface {
	Claim(namespace, name string) *resourceapi.ResourceClaim
	Template(namespace, name string) *resourceapi.ResourceClaimTemplate
}

// Demand is what a pod's ResourceClaims and claim templates ask for: each exact-count
// request's count under its class's ClassResource name (allocation mode All: the devices
// the class has on the pod's node are not known before it is placed, so such a request
// counts as one). Requests with admin access take no device. A request with its own CEL
// selectors also counts under SelectedResource: the devices of its class those selectors
// accept. firstAvailable requests count their first alternative. A claim or template not
// seen yet asks nothing. The extended resources a pod asks for are already in its
// containers' requests.
func Demand(pod *corev1.Pod, specs ClaimSpecs) priority.Resources {
	out, _ := demand(pod, specs, nil)
	return out
}

// DemandNotes is Demand with what the pod's claims use that the count does not model, as
// phrases in a fixed order (nil when the count is exact): from the claims' specs, and from
// inv (which may be nil) the features of the devices their requests' classes and
// selectors accept.
func DemandNotes(pod *corev1.Pod, specs ClaimSpecs, inv *Inventory) (priority.Resources, []string) {
	out, n := demand(pod, specs, inv)
	return out, n.phrases()
}

func demand(pod *corev1.Pod, specs ClaimSpecs, inv *Inventory) (priority.Resources, note) {
	if len(pod.Spec.ResourceClaims) == 0 || specs == nil {
		return nil, 0
	}
	var out priority.Resources
	var notes note
	for _, pc := range pod.Spec.ResourceClaims {
		var spec *resourceapi.ResourceClaimSpec
		switch {
		case pc.ResourceClaimName != nil:
			if c := specs.Claim(pod.Namespace, *pc.ResourceClaimName); c != nil {
				spec = &c.Spec
			}
		case pc.ResourceClaimTemplateName != nil:
			if t := specs.Template(pod.Namespace, *pc.ResourceClaimTemplateName); t != nil {
				spec = &t.Spec.Spec
			}
		}
		if spec == nil {
			continue
		}
		if len(spec.Devices.Constraints) > 0 {
			notes |= noteConstraints
		}
		for _, r := range spec.Devices.Requests {
			className, selectors, count, ok := requested(r)
			if !ok {
				continue
			}
			notes |= requestNote(r)
			if out == nil {
				out = priority.Resources{}
			}
			out[ClassResource(className)] += count
			if inv != nil {
				notes |= inv.notes[ClassResource(className)]
			}
			if name := SelectedResource(className, selectors); name != "" {
				out[name] += count
				if inv != nil {
					notes |= inv.notes[name]
				}
			}
		}
	}
	return out, notes
}

// requested is a request's class, own selectors and device count; ok false when it takes
// no device.
func requested(r resourceapi.DeviceRequest) (className string, selectors []resourceapi.DeviceSelector, count int64, ok bool) {
	switch {
	case r.Exactly != nil:
		e := r.Exactly
		if e.AdminAccess != nil && *e.AdminAccess {
			return "", nil, 0, false
		}
		if e.AllocationMode == resourceapi.DeviceAllocationModeAll {
			return e.DeviceClassName, e.Selectors, 1, true
		}
		return e.DeviceClassName, e.Selectors, max(e.Count, 1), true
	case len(r.FirstAvailable) > 0:
		s := r.FirstAvailable[0]
		if s.AllocationMode == resourceapi.DeviceAllocationModeAll {
			return s.DeviceClassName, s.Selectors, 1, true
		}
		return s.DeviceClassName, s.Selectors, max(s.Count, 1), true
	}
	return "", nil, 0, false
}

// SelectedOf lists the request selector sets of a claim spec (SelectedResource).
func SelectedOf(spec *resourceapi.ResourceClaimSpec) []Selected {
	var out []Selected
	for _, r := range spec.Devices.Requests {
		className, selectors, _, ok := requested(r)
		if !ok {
			continue
		}
		if name := SelectedResource(className, selectors); name != "" {
			out = append(out, Selected{Name: name, Class: className, Selectors: selectors})
		}
	}
	return out
}
