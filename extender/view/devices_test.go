package view

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/sources"
	"github.com/cps-extender/cps-extender/priority"
)

// fakeDevices gives nodes the devices in perNode and every pod with claims claimDemand.
type fakeDevices struct {
	perNode     map[string]priority.Resources
	claimDemand priority.Resources
}

func (f *fakeDevices) Start(context.Context, func(bool)) map[string]cache.InformerSynced { return nil }

func (f *fakeDevices) NodeCapacity(node string, allocatable priority.Resources) priority.Resources {
	out := priority.Resources{}
	for k, v := range allocatable {
		out[k] = v
	}
	for k, v := range f.perNode[node] {
		out[k] += v
	}
	return out
}

func (f *fakeDevices) PodDemand(pod *corev1.Pod, request priority.Resources) (priority.Resources, []string) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return request, nil
	}
	out := priority.Resources{}
	for k, v := range request {
		out[k] = v
	}
	for k, v := range f.claimDemand {
		out[k] += v
	}
	return out, nil
}

type listed struct {
	p []*corev1.Pod
	n []*corev1.Node
}

func (l listed) pods() ([]*corev1.Pod, error)   { return l.p, nil }
func (l listed) nodes() ([]*corev1.Node, error) { return l.n, nil }

// TestDevicesInTheRecords: the device source's counts reach the node and pod records (a
// terminated pod asks nothing), the trimmed cache keeps a pod's claims, a device change
// rebuilds the records with the new counts, and a change of the nodes' free devices alone
// gives the nodes new records and keeps the pods'.
func TestDevicesInTheRecords(t *testing.T) {
	const gpus = priority.DeviceClassPrefix + "gpu"
	template := "one-gpu"
	mkPod := func(name string, claims bool, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: phase}}
		if claims {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}}
		}
		trimmed, err := sources.TrimForCache(p)
		if err != nil {
			t.Fatal(err)
		}
		return trimmed.(*corev1.Pod)
	}
	mkNode := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}
	}
	dev := &fakeDevices{perNode: map[string]priority.Resources{"n1": {gpus: 4}}, claimDemand: priority.Resources{gpus: 2}}
	x := newViewIndex()
	x.devices = dev
	cfg := &viewConfig{gang: config.DefaultConfig().Gang}
	list := listed{p: []*corev1.Pod{mkPod("claims", true, corev1.PodPending), mkPod("plain", false, corev1.PodPending), mkPod("done", true, corev1.PodSucceeded)},
		n: []*corev1.Node{mkNode("n1"), mkNode("n2")}}
	check := func(when string, wantN1 int64) {
		t.Helper()
		if _, err := x.records(cfg, list, recordsFor{}); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name string
			got  priority.Resources
			want priority.Resources
		}{
			{"node with devices", x.nodes["n1"].allocatable, priority.Resources{"cpu": 8000, gpus: wantN1}},
			{"node without", x.nodes["n2"].allocatable, priority.Resources{"cpu": 8000}},
			{"pod with claims", x.pods["uid-claims"].request, priority.Resources{"cpu": 1000, gpus: 2}},
			{"pod without", x.pods["uid-plain"].request, priority.Resources{"cpu": 1000}},
			{"terminated pod", x.pods["uid-done"].request, nil},
		} {
			if diff := cmp.Diff(tt.want, tt.got, cmp.Comparer(func(a, b priority.Resources) bool { return cmp.Equal(clean(a), clean(b)) })); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", when, tt.name, diff)
			}
		}
	}
	check("at the first build", 4)
	dev.perNode["n1"] = priority.Resources{gpus: 1}
	before := x.changes.Load()
	x.devicesChanged()
	if x.changes.Load() == before {
		t.Error("a device change was not counted")
	}
	check("after a device change", 1)

	pod, n1 := x.pods["uid-claims"], x.nodes["n1"]
	dev.perNode["n1"] = priority.Resources{gpus: 3}
	before = x.changes.Load()
	x.nodeDevicesChanged()
	if x.changes.Load() == before {
		t.Error("a change of the nodes' devices was not counted")
	}
	check("after a change of the nodes' devices", 3)
	if x.pods["uid-claims"] != pod {
		t.Error("a change of the nodes' devices made the pod records anew")
	}
	if n1.allocatable[gpus] != 1 {
		t.Errorf("the previous record of n1 was written: %v", n1.allocatable)
	}
	for _, n := range x.schedulable {
		if n.name == "n1" && n != x.nodes["n1"] {
			t.Error("the schedulable nodes hold n1's previous record")
		}
	}
	before = x.changes.Load()
	x.nodeDevicesChanged()
	if x.changes.Load() != before {
		t.Error("taking the same devices again was counted as a change")
	}
}

// clean drops zero amounts and pod slots, which this test is not about.
func clean(r priority.Resources) priority.Resources {
	out := priority.Resources{}
	for k, v := range r {
		if v != 0 && k != "pods" {
			out[k] = v
		}
	}
	return out
}

// withGPUs gives every node of e 8 devices of a class from a fake device source, and
// recomputes.
func (e *recomputeEnv) withGPUs() *fakeDevices {
	dev := &fakeDevices{perNode: map[string]priority.Resources{}}
	for _, node := range e.nodes {
		dev.perNode[node.Name] = priority.Resources{priority.DeviceClassPrefix + "gpu": 8}
	}
	e.cluster.index.devices = dev
	e.cluster.index.devicesChanged()
	e.cluster.recompute(time.Now())
	return dev
}

// BenchmarkRecomputeAfterClaimEvent is the recompute after a claim's status changed some
// node's free devices (an allocation not reserved for a pod, a release): the nodes take their
// capacities again, the pod records stay (nodeDevicesChanged).
func BenchmarkRecomputeAfterClaimEvent(b *testing.B) {
	for _, pj := range benchJobs {
		b.Run(fmt.Sprintf("nodes=5000/pods=%d/jobs=%d", pj.pods, pj.jobs), func(b *testing.B) {
			e := recomputeBench(b, 5000, pj.pods, pj.jobs)
			dev := e.withGPUs()
			first := dev.perNode[e.nodes[0].Name]
			b.ReportAllocs()
			cpu := startCPU()
			defer cpu.report(b)
			i := 0
			for b.Loop() {
				first[priority.DeviceClassPrefix+"gpu"] = int64(7 + i%2) // one device taken, then given back
				i++
				e.cluster.index.nodeDevicesChanged()
				e.cluster.recompute(time.Now())
			}
		})
	}
}

// BenchmarkRecomputeAfterDeviceEvent is the recompute after a DRA object changed some
// node's free devices: every pod and node record is rebuilt (devicesChanged). The device
// source is a fake giving every node 8 devices of a class, so this is the view's cost, not the
// device counting's.
func BenchmarkRecomputeAfterDeviceEvent(b *testing.B) {
	for _, n := range benchNodes {
		for _, pj := range benchJobs {
			b.Run(fmt.Sprintf("nodes=%d/pods=%d/jobs=%d", n, pj.pods, pj.jobs), func(b *testing.B) {
				e := recomputeBench(b, n, pj.pods, pj.jobs)
				e.withGPUs()
				b.ReportAllocs()
				cpu := startCPU()
				defer cpu.report(b)
				for b.Loop() {
					e.cluster.index.devicesChanged()
					e.cluster.recompute(time.Now())
				}
			})
		}
	}
}
