package devices

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/cps-extender/cps-extender/priority"
)

func deviceClass(name, expr, extended string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if expr != "" {
		c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
	}
	if extended != "" {
		c.Spec.ExtendedResourceName = &extended
	}
	return c
}

// slice is a ResourceSlice of driver on node ("" : all nodes) in pool generation gen, with
// devices named by the keys of models (each with a string attribute model).
func slice(driver, node string, gen int64, models map[string]string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver,
		Pool: resourceapi.ResourcePool{Name: "pool-" + node, Generation: gen, ResourceSliceCount: 1}}}
	if node != "" {
		s.Spec.NodeName = &node
	} else {
		all := true
		s.Spec.AllNodes = &all
		s.Spec.Pool.Name = "shared"
	}
	for name, model := range models {
		m := model
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: &m}}})
	}
	return s
}

func allocated(driver, pool string, reserved bool, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: pool, Device: d})
	}
	if reserved {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
	}
	return c
}

func TestCapacity(t *testing.T) {
	gpu := ClassResource("gpu")
	big := ClassResource("big")
	classes := []*resourceapi.DeviceClass{
		deviceClass("gpu", `device.driver == "gpu.example.com"`, "example.com/gpu"),
		deviceClass("big", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "b200"`, ""),
		deviceClass("broken", `device.nosuchfield`, "example.com/broken"),
	}
	twoModels := map[string]string{"g0": "h100", "g1": "h100", "g2": "b200"}
	h100 := SelectedOf(&resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 1, Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.attributes["gpu.example.com"].model == "h100"`}}}}}}}})[0]
	tests := []struct {
		name        string
		slices      []*resourceapi.ResourceSlice
		claims      []*resourceapi.ResourceClaim
		selected    []Selected
		node        string
		allocatable priority.Resources
		want        priority.Resources
	}{
		{name: "no devices: the allocatable as it is", node: "n1", allocatable: priority.Resources{"cpu": 8000},
			want: priority.Resources{"cpu": 8000}},
		{name: "each class counts the devices its selectors accept, the extended name too; one whose selectors cannot be evaluated none",
			slices: []*resourceapi.ResourceSlice{slice("gpu.example.com", "n1", 1, twoModels)},
			node:   "n1", allocatable: priority.Resources{"cpu": 8000},
			want: priority.Resources{"cpu": 8000, gpu: 3, "example.com/gpu": 3, big: 1}},
		{name: "another driver's devices are not the class's",
			slices: []*resourceapi.ResourceSlice{slice("nic.example.com", "n1", 1, twoModels)},
			node:   "n1", allocatable: priority.Resources{"cpu": 8000}, want: priority.Resources{"cpu": 8000}},
		{name: "another node's devices are not this node's",
			slices: []*resourceapi.ResourceSlice{slice("gpu.example.com", "n2", 1, twoModels)},
			node:   "n1", allocatable: priority.Resources{"cpu": 8000}, want: priority.Resources{"cpu": 8000}},
		{name: "a device plugin's resource of the same name wins",
			slices: []*resourceapi.ResourceSlice{slice("gpu.example.com", "n1", 1, twoModels)},
			node:   "n1", allocatable: priority.Resources{"example.com/gpu": 8},
			want: priority.Resources{"example.com/gpu": 8, gpu: 3, big: 1}},
		{name: "only a pool's newest generation counts",
			slices: []*resourceapi.ResourceSlice{slice("gpu.example.com", "n1", 1, twoModels), slice("gpu.example.com", "n1", 2, map[string]string{"g0": "h100"})},
			node:   "n1", want: priority.Resources{gpu: 1, "example.com/gpu": 1}},
		{name: "network-attached devices are left out",
			slices: []*resourceapi.ResourceSlice{slice("gpu.example.com", "", 1, twoModels)},
			node:   "n1", want: nil},
		{name: "an allocated claim no pod is reserved for takes its devices off",
			slices: []*resourceapi.ResourceSlice{slice("gpu.example.com", "n1", 1, twoModels)},
			claims: []*resourceapi.ResourceClaim{allocated("gpu.example.com", "pool-n1", false, "g2")},
			node:   "n1", want: priority.Resources{gpu: 2, "example.com/gpu": 2, big: 0}},
		{name: "a request's own selectors count the devices of its class they accept",
			slices:   []*resourceapi.ResourceSlice{slice("gpu.example.com", "n1", 1, twoModels)},
			selected: []Selected{h100, h100, {Name: "on-no-class", Class: "none", Selectors: h100.Selectors}},
			node:     "n1", want: priority.Resources{gpu: 3, "example.com/gpu": 3, big: 1, h100.Name: 2}},
		{name: "a reserved claim's pod counts it in its request instead",
			slices: []*resourceapi.ResourceSlice{slice("gpu.example.com", "n1", 1, twoModels)},
			claims: []*resourceapi.ResourceClaim{allocated("gpu.example.com", "pool-n1", true, "g2", "g1")},
			node:   "n1", want: priority.Resources{gpu: 3, "example.com/gpu": 3, big: 1}},
	}
	cache := cel.NewCache(10, cel.Features{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			free := NewFree(NewInventory(classes, tt.slices, tt.selected, cache), tt.claims)
			if diff := cmp.Diff(tt.want, free.Capacity(tt.node, tt.allocatable)); diff != "" {
				t.Errorf("Capacity (-want +got):\n%s", diff)
			}
		})
	}
}

// specs is a ClaimSpecs from maps by namespace/name.
type specs struct {
	claims    map[string]*resourceapi.ResourceClaim
	templates map[string]*resourceapi.ResourceClaimTemplate
}

func (s specs) Claim(ns, name string) *resourceapi.ResourceClaim { return s.claims[ns+"/"+name] }
func (s specs) Template(ns, name string) *resourceapi.ResourceClaimTemplate {
	return s.templates[ns+"/"+name]
}

func exactly(class string, count int64, mode resourceapi.DeviceAllocationMode, admin bool) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Count: count, AllocationMode: mode}}
	if admin {
		r.Exactly.AdminAccess = &admin
	}
	return r
}

func TestDemand(t *testing.T) {
	claimSpec := func(reqs ...resourceapi.DeviceRequest) resourceapi.ResourceClaimSpec {
		return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}
	}
	picky := []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "h100"`}}}
	s := specs{
		claims: map[string]*resourceapi.ResourceClaim{
			"ns/shared": {Spec: claimSpec(exactly("nic", 1, resourceapi.DeviceAllocationModeExactCount, false))},
		},
		templates: map[string]*resourceapi.ResourceClaimTemplate{
			"ns/picky": {Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claimSpec(resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "gpu", Count: 2, Selectors: picky}})}},
			"ns/two-gpus": {Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claimSpec(exactly("gpu", 2, resourceapi.DeviceAllocationModeExactCount, false))}},
			"ns/mixed": {Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claimSpec(
				exactly("gpu", 1, "", false), exactly("gpu", 4, resourceapi.DeviceAllocationModeExactCount, true),
				exactly("fpga", 0, resourceapi.DeviceAllocationModeAll, false),
				resourceapi.DeviceRequest{Name: "alt", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: "nic", Count: 2}, {Name: "b", DeviceClassName: "gpu", Count: 1}}},
			)}},
		},
	}
	pod := func(claims ...corev1.PodResourceClaim) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: corev1.PodSpec{ResourceClaims: claims}}
	}
	name := func(n string) *string { return &n }
	tests := []struct {
		name string
		pod  *corev1.Pod
		want priority.Resources
	}{
		{name: "no claims", pod: pod(), want: nil},
		{name: "a template's exact count", pod: pod(corev1.PodResourceClaim{Name: "g", ResourceClaimTemplateName: name("two-gpus")}),
			want: priority.Resources{ClassResource("gpu"): 2}},
		{name: "a claim by name", pod: pod(corev1.PodResourceClaim{Name: "n", ResourceClaimName: name("shared")}),
			want: priority.Resources{ClassResource("nic"): 1}},
		{name: "claims add up by class", pod: pod(corev1.PodResourceClaim{Name: "g", ResourceClaimTemplateName: name("two-gpus")},
			corev1.PodResourceClaim{Name: "n", ResourceClaimName: name("shared")}, corev1.PodResourceClaim{Name: "m", ResourceClaimTemplateName: name("mixed")}),
			want: priority.Resources{ClassResource("gpu"): 3, ClassResource("nic"): 3, ClassResource("fpga"): 1}},
		{name: "a request's own selectors ask for their devices too", pod: pod(corev1.PodResourceClaim{Name: "g", ResourceClaimTemplateName: name("picky")}),
			want: priority.Resources{ClassResource("gpu"): 2, SelectedResource("gpu", picky): 2}},
		{name: "a template not seen asks nothing", pod: pod(corev1.PodResourceClaim{Name: "g", ResourceClaimTemplateName: name("missing")}), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Demand(tt.pod, s)); diff != "" {
				t.Errorf("Demand (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDemandNotes: a pod's demand names each DRA feature its claims use that the count does
// not model, from the claim's spec and from the devices its requests' classes and
// selectors accept; where the count is exact it names none.
func TestDemandNotes(t *testing.T) {
	const driver = "gpu.example.com"
	gpuClass := deviceClass("gpu", `device.driver == "gpu.example.com"`, "")
	h100 := []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "h100"`}}}
	anyModel := []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model != ""`}}}
	onN1 := func(edit func(d *resourceapi.Device)) []*resourceapi.ResourceSlice {
		s := slice(driver, "n1", 1, map[string]string{"g0": "h100"})
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "g1",
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: new("b200")}}})
		if edit != nil {
			edit(&s.Spec.Devices[1])
		}
		return []*resourceapi.ResourceSlice{s}
	}
	one := func(r resourceapi.ExactDeviceRequest) resourceapi.DeviceRequest {
		if r.DeviceClassName == "" {
			r.DeviceClassName = "gpu"
		}
		return resourceapi.DeviceRequest{Name: "r", Exactly: &r}
	}
	tests := []struct {
		name    string
		classes []*resourceapi.DeviceClass
		slices  []*resourceapi.ResourceSlice
		claim   resourceapi.DeviceClaim
		want    []string
	}{
		{name: "an exact count: nothing", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 2})}}},
		{name: "constraints between requests", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 2})},
				Constraints: []resourceapi.DeviceConstraint{{MatchAttribute: new(resourceapi.FullyQualifiedName("gpu.example.com/model"))}}},
			want: []string{"DRA constraints between requests"}},
		{name: "allocation mode All", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{AllocationMode: resourceapi.DeviceAllocationModeAll})}},
			want:  []string{"allocationMode All counted as one device"}},
		{name: "admin access takes no device: nothing", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{
				AllocationMode: resourceapi.DeviceAllocationModeAll, AdminAccess: new(true)})}}},
		{name: "firstAvailable with alternatives after the first", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "a", DeviceClassName: "gpu", Count: 2}, {Name: "b", DeviceClassName: "gpu", Count: 1}}}}},
			want: []string{"firstAvailable alternatives after the first"}},
		{name: "firstAvailable with one alternative: nothing", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "a", DeviceClassName: "gpu", Count: 2}}}}}},
		{name: "consumable capacity", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1,
				Capacity: &resourceapi.CapacityRequirements{}})}},
			want: []string{"consumable device capacity"}},
		{name: "a shared device the class accepts", slices: onN1(func(d *resourceapi.Device) { d.AllowMultipleAllocations = new(true) }),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1})}},
			want:  []string{"shared devices (allowMultipleAllocations)"}},
		{name: "a partitioned device and a tainted one", slices: onN1(func(d *resourceapi.Device) {
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "mem"}}
			d.Taints = []resourceapi.DeviceTaint{{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1})}},
			want:  []string{"partitioned devices' shared counters", "device taints"}},
		{name: "network-attached devices the class accepts",
			slices: append(onN1(nil), slice(driver, "", 1, map[string]string{"remote": "h100"})),
			claim:  resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1})}},
			want:   []string{"network-attached devices"}},
		{name: "another class's devices: nothing", slices: onN1(func(d *resourceapi.Device) { d.AllowMultipleAllocations = new(true) }),
			classes: []*resourceapi.DeviceClass{gpuClass, deviceClass("nic", `device.driver == "nic.example.com"`, "")},
			claim:   resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{DeviceClassName: "nic", Count: 1})}}},
		{name: "a device two classes accept", slices: onN1(nil),
			classes: []*resourceapi.DeviceClass{gpuClass, deviceClass("b200", `device.attributes["gpu.example.com"].model == "b200"`, "")},
			claim:   resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1})}},
			want:    []string{"devices two DeviceClasses accept"}},
		{name: "selectors picking some of the class's devices on a node", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1, Selectors: h100})}},
			want:  []string{"devices a request's selectors pick that other requests of its class may take"}},
		{name: "selectors picking all of the class's devices: nothing", slices: onN1(nil),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1, Selectors: anyModel})}}},
		{name: "selectors that fail on a device of the class", slices: onN1(func(d *resourceapi.Device) { d.Attributes = nil }),
			claim: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1, Selectors: h100})}},
			want: []string{"devices a request's selectors pick that other requests of its class may take",
				"device selectors that cannot be evaluated"}},
		{name: "a class selector that does not compile", slices: onN1(nil),
			classes: []*resourceapi.DeviceClass{deviceClass("gpu", `device.nosuchfield`, "")},
			claim:   resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{one(resourceapi.ExactDeviceRequest{Count: 1})}},
			want:    []string{"device selectors that cannot be evaluated"}},
	}
	cache := cel.NewCache(10, cel.Features{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			classes := tt.classes
			if classes == nil {
				classes = []*resourceapi.DeviceClass{gpuClass}
			}
			spec := resourceapi.ResourceClaimSpec{Devices: tt.claim}
			inv := NewInventory(classes, tt.slices, SelectedOf(&spec), cache)
			s := specs{templates: map[string]*resourceapi.ResourceClaimTemplate{
				"ns/t": {Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec}}}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
				{Name: "c", ResourceClaimTemplateName: new("t")}}}}
			demand, notes := DemandNotes(pod, s, inv)
			if diff := cmp.Diff(tt.want, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(Demand(pod, s), demand); diff != "" {
				t.Errorf("demand differs from Demand's (-Demand +DemandNotes):\n%s", diff)
			}
		})
	}
}
