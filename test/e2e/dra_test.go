//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The admission fit counts DRA devices: a test driver's ResourceSlices, created as objects
// (kube-scheduler allocates from them; no driver process runs), and a DeviceClass that also
// serves them as the extended resource example.com/gpu (KEP-5004). kwok's nodes carry no
// example.com/gpu in their allocatable.

const (
	testDriver  = "gpu.example.com"
	testClass   = "gpu.example.com"
	testGPUName = "example.com/gpu"
)

// createDevices makes the test DeviceClass and, on each node, a ResourceSlice of perNode
// devices of the test driver.
func (e *env) createDevices(nodes []string, perNode int) {
	e.t.Helper()
	ctx := context.Background()
	api := e.cp.Client.ResourceV1()
	extended := testGPUName
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: testClass}, Spec: resourceapi.DeviceClassSpec{
		Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", testDriver)}}},
		ExtendedResourceName: &extended,
	}}
	if _, err := api.DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create DeviceClass: %v", err)
	}
	for _, node := range nodes {
		slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: testDriver, NodeName: &node,
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		}}
		model := node // each device says which node it is on: a request's selector can pick one
		for i := range perNode {
			slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: &model}}})
		}
		if _, err := api.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			e.t.Fatalf("create ResourceSlice: %v", err)
		}
	}
}

// createClaimTemplate makes a ResourceClaimTemplate in namespace default asking for count
// devices of the test class (0: all the devices of a node, allocation mode All); with
// onNode, only devices of that node (by the request's own selector).
func (e *env) createClaimTemplate(name string, count int64, onNode string) {
	e.t.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: testClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}},
		}}}}
	if count == 0 {
		tmpl.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	}
	if onNode != "" {
		tmpl.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes[%q].model == %q", testDriver, onNode)}}}
	}
	if _, err := e.cp.Client.ResourceV1().ResourceClaimTemplates("default").Create(context.Background(), tmpl, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create ResourceClaimTemplate: %v", err)
	}
}

// TestDRAExtendedResourceInTheFit: 2 nodes of 4 devices each, served as example.com/gpu by
// the DeviceClass. A pod asking for 5 can never be placed: Unschedulable, saying why. A gang
// of 4 x 2 fills both nodes: before the fit read the devices it was Unschedulable for ever
// (nothing in the nodes' allocatable); now it binds whole, with no hold timeout.
func TestDRAExtendedResourceInTheFit(t *testing.T) {
	nodes := framework.Nodes("node", 2, "8", "32Gi")
	e := newEnv(t, nodes...)
	e.createDevices([]string{nodes[0].Name, nodes[1].Name}, 4)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")

	huge := jobSpec{name: "huge", workers: 1, cpu: "1", extended: map[string]string{testGPUName: "5"}}
	gpus := jobSpec{name: "gpus", workers: 4, cpu: "1", extended: map[string]string{testGPUName: "2"}}
	watch := e.watchPartial([]jobSpec{huge, gpus})
	e.createJobs(huge)
	d := e.waitQueued(huge, "Unschedulable", "needs example.com/gpu 5 on a node; the most free on any node is 4")
	t.Logf("huge: %s", d.Reason)

	created := time.Now()
	e.createJobs(gpus)
	e.boundWithin(rec, gpus, created, "its creation", 20*time.Second)
	perNode := map[string]int{}
	for _, p := range gpus.pods() {
		perNode[e.bound("default")[p.name]]++
	}
	if len(perNode) != 2 || perNode[nodes[0].Name] != 2 || perNode[nodes[1].Name] != 2 {
		t.Errorf("gpus' pods per node: %v, want 2 on each node", perNode)
	}
	checkWhole(t, rec, gpus)
	if n := e.countBound(huge); n != 0 {
		t.Errorf("huge has %d pods bound", n)
	}
	if partial := watch.Stop(); len(partial) > 0 {
		t.Errorf("partly bound: %v", partial)
	}
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts", n)
	}
}

// newClaimsEnv is 2 nodes of 16 CPU with 4 test devices each, kube-controller-manager's
// resourceclaim controller (and the garbage collector) and the template one-gpu (one device
// of the test class); it returns the nodes' names.
func newClaimsEnv(t *testing.T) (*env, []string) {
	nodes := framework.Nodes("node", 2, "16", "64Gi")
	e := newEnv(t, nodes...)
	e.cp.StartControllerManager(t, "resourceclaim-controller", "garbage-collector-controller")
	names := []string{nodes[0].Name, nodes[1].Name}
	e.createDevices(names, 4)
	e.createClaimTemplate("one-gpu", 1, "")
	return e, names
}

// TestDRAClaimTemplatesInTheFit: 2 nodes of 4 devices each; every pod takes a claim of one
// device from a ResourceClaimTemplate (kube-controller-manager's resourceclaim controller
// makes the claims). A gang of 10 is larger than the devices: Unschedulable, naming the
// class, nothing bound; so is a gang of 5 whose request selector picks the first node's 4
// devices. Two gangs of 6 compete for the 8 devices: the first binds whole, the
// second waits with none bound, and binds whole once the first is deleted; no hold timeout.
// Then a pod whose claim asks for all the devices of a node (allocation mode All, which the
// fit counts as one device) is admitted, its sentence saying it may not fit.
func TestDRAClaimTemplatesInTheFit(t *testing.T) {
	e, nodes := newClaimsEnv(t)
	e.createClaimTemplate("first-node", 1, nodes[0])
	e.createClaimTemplate("all-gpus", 0, "")
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")

	big := jobSpec{name: "big", workers: 10, cpu: "1", claim: "one-gpu"}
	first := jobSpec{name: "first", workers: 6, cpu: "1", claim: "one-gpu"}
	second := jobSpec{name: "second", workers: 6, cpu: "1", claim: "one-gpu"}
	picky := jobSpec{name: "picky", workers: 5, cpu: "1", claim: "first-node"}
	watch := e.watchPartial([]jobSpec{big, picky, first, second})
	e.createJobs(big)
	d := e.waitQueued(big, "Unschedulable", "only 8 of the 10 pods it needs fit (they need 10 "+testClass+" devices; the nodes have 8)")
	t.Logf("big: %s", d.Reason)
	e.createJobs(picky)
	d = e.waitQueued(picky, "Unschedulable", "only 4 of the 5 pods it needs fit (they need 5 "+testClass+" devices its requests' selectors accept; the nodes have 4)")
	t.Logf("picky: %s", d.Reason)

	created := time.Now()
	e.createJobs(first)
	e.boundWithin(rec, first, created, "its creation", 20*time.Second)
	e.createJobs(second)
	d = e.waitQueued(second, "Waiting", "needs 1 "+testClass+" device on a node; the most free on any node is 0")
	t.Logf("second: %s", d.Reason)
	time.Sleep(3 * time.Second) // a gang admitted by mistake would be gathering at bind by now
	if n := e.countBound(second); n != 0 {
		t.Errorf("second has %d pods bound while first holds the devices", n)
	}
	for _, j := range []jobSpec{big, picky} {
		if n := e.countBound(j); n != 0 {
			t.Errorf("%s has %d pods bound", j.name, n)
		}
	}

	deleting := time.Now()
	e.deleteJob(first)
	e.boundWithin(rec, second, deleting, "first was being deleted", 30*time.Second)
	checkWhole(t, rec, first, second)

	// second holds 6 of the 8 devices: no node has all 4 free, so kube-scheduler cannot
	// place whole; the fit counts it as one device and admits it, saying so.
	whole := jobSpec{name: "whole", workers: 1, cpu: "1", claim: "all-gpus"}
	e.createJobs(whole)
	d = e.waitQueued(whole, "Admitted", "; may not fit: allocationMode All counted as one device, which the fit does not count")
	t.Logf("whole: %s", d.Reason)
	if partial := watch.Stop(); len(partial) > 0 {
		t.Errorf("partly bound: %v", partial)
	}
	if n := e.holdTimeouts(); n != 0 {
		t.Errorf("%d hold timeouts", n)
	}
}

// claimsOf returns the job's pods' ResourceClaims by name (those the resourceclaim controller
// has made so far), with the pod each belongs to.
func (e *env) claimsOf(j jobSpec) map[string]resourceapi.ResourceClaim {
	e.t.Helper()
	pods := map[string]bool{}
	for _, p := range j.pods() {
		pods[p.name] = true
	}
	list, err := e.cp.Client.ResourceV1().ResourceClaims("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("list ResourceClaims: %v", err)
	}
	out := map[string]resourceapi.ResourceClaim{}
	for _, c := range list.Items {
		for _, o := range c.OwnerReferences {
			if o.Kind == "Pod" && pods[o.Name] {
				out[c.Name] = c
			}
		}
	}
	return out
}

// TestDRAGateFailureReleasesClaims: a gang the fit admits by mistake fails at bind, and
// gives back the devices kube-scheduler allocated for it, and nothing else. 2 nodes of 4
// devices; keep (one pod, one device) runs; each of picky's 2 pods asks for all the devices
// of a node (allocation mode All), which the fit counts as one device: it sees 7 free and
// admits picky, which only the node without keep can take one pod of. kube-scheduler's DRA
// PreBind writes the held pod's claim's allocation before the bind verb holds it; at the hold
// timeout the gate fails the binds and kube-scheduler's Unreserve must take the allocation
// back. Measured: how long after the hold timeout no claim of picky is allocated; keep's
// claim stays allocated and reserved, its pod bound.
func TestDRAGateFailureReleasesClaims(t *testing.T) {
	e, _ := newClaimsEnv(t)
	e.createClaimTemplate("whole-node", 0, "")
	e.startExtender("gate:\n  holdTimeout: 3s\n  coolDown: 60s\n")
	e.startScheduler(true)

	keep := jobSpec{name: "keep", workers: 1, cpu: "1", claim: "one-gpu"}
	e.createJobs(keep)
	e.waitJobBound(keep, 30*time.Second)
	kept := e.claimsOf(keep)
	if len(kept) != 1 {
		t.Fatalf("keep's claims: %d, want 1", len(kept))
	}

	picky := jobSpec{name: "picky", workers: 2, cpu: "1", claim: "whole-node"}
	e.createJobs(picky)
	// While picky's pods are held at bind, their claims are already allocated.
	var heldAllocated int
	framework.WaitFor(t, 30*time.Second, "picky's held pods' claims allocated", func() (bool, error) {
		heldAllocated = 0
		for _, c := range e.claimsOf(picky) {
			if c.Status.Allocation != nil {
				heldAllocated++
			}
		}
		return heldAllocated > 0 && e.countBound(picky) == 0, fmt.Errorf("%d allocated, %d bound", heldAllocated, e.countBound(picky))
	})
	t.Logf("picky: %d claims allocated by PreBind while no pod of it is bound", heldAllocated)

	framework.WaitFor(t, 30*time.Second, "a hold timeout", func() (bool, error) {
		return e.holdTimeouts() > 0, fmt.Errorf("none yet")
	})
	timedOut := time.Now()
	var left []string
	framework.WaitFor(t, 30*time.Second, "picky's claims deallocated", func() (bool, error) {
		left = left[:0]
		for name, c := range e.claimsOf(picky) {
			if c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0 {
				left = append(left, name)
			}
		}
		return len(left) == 0, fmt.Errorf("still allocated or reserved: %v", left)
	})
	t.Logf("picky's claims all deallocated %v after the hold timeout was logged", time.Since(timedOut).Round(10*time.Millisecond))
	if n := e.countBound(picky); n != 0 {
		t.Errorf("picky has %d pods bound", n)
	}
	for name := range kept {
		c, err := e.cp.Client.ResourceV1().ResourceClaims("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("keep's claim %s: %v", name, err)
		}
		if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 {
			t.Errorf("keep's claim %s lost its allocation or reservation: %+v", name, c.Status)
		}
	}
	if n := e.countBound(keep); n != 1 {
		t.Errorf("keep has %d pods bound, want 1", n)
	}
}

// TestDRAKubeSchedulerAlone is the reference: the same cluster and gangs with kube-scheduler
// alone (no extender). It places the extended-resource gang too (from the ResourceSlices, so
// the extender's fit was the only thing that called it Unschedulable before), and of two
// claim-template gangs of 5 on the 6 devices left it binds all of the first and 1 of the
// second, which then sits partly bound holding a device: what the gate prevents.
func TestDRAKubeSchedulerAlone(t *testing.T) {
	e, _ := newClaimsEnv(t)
	e.startScheduler(false)
	gpus := jobSpec{name: "gpus", workers: 2, cpu: "1", extended: map[string]string{testGPUName: "1"}}
	e.createJobs(gpus)
	e.waitJobBound(gpus, 30*time.Second)
	first := jobSpec{name: "first", workers: 5, cpu: "1", claim: "one-gpu"}
	second := jobSpec{name: "second", workers: 5, cpu: "1", claim: "one-gpu"}
	e.createJobs(first)
	e.waitJobBound(first, 30*time.Second)
	e.createJobs(second)
	// 8 devices, 2 taken by gpus and 5 by first: 1 left for second.
	framework.WaitFor(t, 30*time.Second, "second partly bound", func() (bool, error) {
		n := e.countBound(second)
		return n == 1, fmt.Errorf("%d of second bound", n)
	})
	time.Sleep(3 * time.Second)
	if n := e.countBound(second); n != 1 {
		t.Errorf("second: %d pods bound, want the 1 the free device allows", n)
	}
	t.Logf("kube-scheduler alone: gpus bound whole from the slices; second partly bound, %d of %d pods", e.countBound(second), len(second.pods()))
}
