package view

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/priority"
)

// DeviceSource adds DRA devices to the fit (extender/devices): to each node's capacity and
// to each pod's request. A change to the devices rebuilds every record at the next
// recompute.
type DeviceSource interface {
	// Start starts the source's informers and calls onChange after each change; it returns
	// the informers' HasSynced by name. Until they have synced the fit may lack devices;
	// the view starts without them after a bound (groupSyncTimeout), as without a gang
	// source, and rebuilds its records once they come.
	Start(ctx context.Context, onChange func()) map[string]cache.InformerSynced
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
	return c.index.devices.Start(ctx, func() {
		c.index.devicesChanged()
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
