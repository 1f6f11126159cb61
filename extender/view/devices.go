package view

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/priority"
)

// DeviceSource adds DRA devices to the fit (extender/devices): to each node's capacity and
// to each pod's request. A change to the devices rebuilds every record at the next
// recompute, or, when only the nodes' free devices changed, takes the nodes' capacities
// again.
type DeviceSource interface {
	// Start starts the source's informers and calls onChange after each change, podsToo
	// false when only NodeCapacity's answers may have changed; it returns the informers'
	// HasSynced by name. Until they have synced the fit may lack devices;
	// the view starts without them after a bound (groupSyncTimeout), as without a gang
	// source, and rebuilds its records once they come.
	Start(ctx context.Context, onChange func(podsToo bool)) map[string]cache.InformerSynced
	NodeCapacity(node string, allocatable priority.Resources) priority.Resources
	// PodDemand is the pod's request with its claims' devices, and what they use that the
	// fit does not count (priority.Pod.MayNotFit).
	PodDemand(pod *corev1.Pod, request priority.Resources) (priority.Resources, []string)
}

// startDevices starts the device source, if any, and returns its informers' HasSynced.
func (c *Cluster) startDevices(ctx context.Context) map[string]cache.InformerSynced {
	if c.index.devices == nil {
		return nil
	}
	return c.index.devices.Start(ctx, func(podsToo bool) {
		if podsToo {
			c.index.devicesChanged()
		} else {
			c.index.nodeDevicesChanged()
		}
		c.Trigger()
	})
}

// devicesChanged makes the next recompute rebuild the records: node capacities and pod
// requests both read the devices.
func (x *viewIndex) devicesChanged() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cfg = nil
	x.changes.Add(1)
}

// nodeDevicesChanged takes each node's capacity again from the devices, keeping every pod
// record: a claim's status (an allocation not reserved for a pod, a release) changes the
// nodes' free devices and no pod's request. Rebuilding every record for it cost 125-134 ms
// at 10k pods, on each claim released as a pod ended.
func (x *viewIndex) nodeDevicesChanged() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cfg == nil || x.devices == nil { // a rebuild is due, which takes them
		return
	}
	changed := false
	for name, r := range x.nodes {
		capacity := x.intern(x.devices.NodeCapacity(name, r.base))
		if maps.Equal(capacity, r.allocatable) {
			continue
		}
		fresh := *r // records are shared with published snapshots: never written
		fresh.allocatable = capacity
		x.nodes[name] = &fresh
		changed = true
	}
	if !changed {
		return
	}
	if x.schedulable != nil { // the same nodes in the same order: names, sets and topology stay
		fresh := make([]*nodeRecord, len(x.schedulable))
		for i, n := range x.schedulable {
			fresh[i] = x.nodes[n.name]
		}
		x.schedulable = fresh
	}
	x.changes.Add(1)
}
