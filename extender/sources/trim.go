package sources

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimForCache drops what the view never reads from objects before the informers cache
// them: managed fields everywhere; of a pod, its status but the phase and the status of its
// PodScheduled condition, and of its spec all
// but what the view reads (the node, priority, scheduling gates, overhead, and each
// container's name and resources). At 5000 nodes and 20000 pods they are most of the
// cache's memory; real training pods carry long env lists, volumes and commands. What is
// kept of the containers and the tolerations is shared between pods that ask the same
// (internTable): the pods of a job mostly do, and a pod's containers and resource maps are
// a third of what is left (5000 nodes, 100k pods: docs/performance.md); so are the strings
// many pods repeat (shareStrings). Cached objects are read-only, so sharing them is safe.
func TrimForCache(obj any) (any, error) {
	if m, ok := obj.(interface {
		SetManagedFields([]metav1.ManagedFieldsEntry)
	}); ok {
		m.SetManagedFields(nil)
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		// What podRequest reads of a resize in progress stays, and PodScheduled.
		status := corev1.PodStatus{Phase: pod.Status.Phase, Resources: pod.Status.Resources, AllocatedResources: pod.Status.AllocatedResources,
			ContainerStatuses: containerStatusResources(pod.Status.ContainerStatuses), InitContainerStatuses: containerStatusResources(pod.Status.InitContainerStatuses)}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled || c.Type == corev1.PodResizePending {
				status.Conditions = append(status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
			}
		}
		pod.Status = status
		spec := pod.Spec
		pod.Spec = corev1.PodSpec{
			NodeName: spec.NodeName, SchedulerName: spec.SchedulerName, Priority: spec.Priority, PriorityClassName: spec.PriorityClassName,
			SchedulingGates: spec.SchedulingGates, SchedulingGroup: spec.SchedulingGroup, Overhead: spec.Overhead, Resources: spec.Resources, ResourceClaims: spec.ResourceClaims,
			NodeSelector: spec.NodeSelector, Affinity: readAffinity(spec.Affinity),
			TopologySpreadConstraints: spec.TopologySpreadConstraints,
		}
		pod.Spec.Containers, pod.Spec.InitContainers = shared.sharedContainers(spec.Containers), shared.sharedContainers(spec.InitContainers)
		pod.Spec.Tolerations = shared.sharedTolerations(spec.Tolerations)
		shared.shareStrings(pod)
	}
	return obj, nil
}

// readAffinity keeps the terms of an affinity that the view reads (nil when there are
// none): required node affinity, and pod (anti-)affinity, required and preferred.
func readAffinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil {
		return nil
	}
	var out corev1.Affinity
	if na := a.NodeAffinity; na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		out.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: na.RequiredDuringSchedulingIgnoredDuringExecution}
	}
	if pa := a.PodAffinity; pa != nil && (len(pa.RequiredDuringSchedulingIgnoredDuringExecution) > 0 || len(pa.PreferredDuringSchedulingIgnoredDuringExecution) > 0) {
		out.PodAffinity = pa
	}
	if pa := a.PodAntiAffinity; pa != nil && (len(pa.RequiredDuringSchedulingIgnoredDuringExecution) > 0 || len(pa.PreferredDuringSchedulingIgnoredDuringExecution) > 0) {
		out.PodAntiAffinity = pa
	}
	if out == (corev1.Affinity{}) {
		return nil
	}
	return &out
}

// containerStatusResources keeps the name and resources of each container status that
// reports resources (nil when none does). One reporting none reads as no status at all to
// the request helpers (component-helpers' resource.PodRequests), and is most of them: a
// running pod without a resize carries one a container.
func containerStatusResources(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for i := range cs {
		if cs[i].Resources != nil || cs[i].AllocatedResources != nil {
			out = append(out, corev1.ContainerStatus{Name: cs[i].Name, Resources: cs[i].Resources, AllocatedResources: cs[i].AllocatedResources})
		}
	}
	return out
}

// containerResources keeps each container's name, resources and restart policy.
func containerResources(cs []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{Name: cs[i].Name, Resources: cs[i].Resources, RestartPolicy: cs[i].RestartPolicy}
	}
	return out
}
