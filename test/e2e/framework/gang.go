package framework

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NativeGangFeatureGate turns on kube-scheduler's own gang scheduling in Kubernetes 1.37
// (GenericWorkload, beta and off by default). kube-apiserver (Options.FeatureGates) and
// kube-scheduler (StartScheduler's extraArgs, as --feature-gates=) both need it.
const NativeGangFeatureGate = "GenericWorkload=true"

// WorkloadAPIRuntimeConfig makes kube-apiserver serve the Workload API that native gang
// scheduling reads (Workload and PodGroup); pass it as Options.RuntimeConfig.
const WorkloadAPIRuntimeConfig = "scheduling.k8s.io/v1beta1=true"

// nativeGangTemplate names the one PodGroup template of a NativeGang's Workload.
const nativeGangTemplate = "gang"

// NativeGang is one job's gang under kube-scheduler's native gang scheduling: a Workload
// with a single PodGroup template and the PodGroup made from it, both called Name.
type NativeGang struct {
	Namespace, Name string
	// MinCount is the gang's size: kube-scheduler places none of its pods until it can
	// place MinCount of them at once.
	MinCount int
	// PriorityClassName must give the group its pods' priority; empty for pods without one.
	PriorityClassName string
	// Constraints, when set, bound where the whole group may go (e.g. inside one rack).
	Constraints *schedv1beta1.PodGroupSchedulingConstraints
}

// Create creates the Workload, then the PodGroup; call it before creating the gang's pods.
func (g NativeGang) Create(ctx context.Context, c kubernetes.Interface) error {
	policy := schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: int32(g.MinCount)}}
	w := &schedv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace},
		Spec: schedv1beta1.WorkloadSpec{PodGroupTemplates: []schedv1beta1.PodGroupTemplate{{
			Name: nativeGangTemplate, SchedulingPolicy: policy, PriorityClassName: g.PriorityClassName, SchedulingConstraints: g.Constraints,
		}}},
	}
	if _, err := c.SchedulingV1beta1().Workloads(g.Namespace).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Workload %s: %w", g.Name, err)
	}
	pg := &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace},
		Spec: schedv1beta1.PodGroupSpec{
			WorkloadRef:           &schedv1beta1.WorkloadReference{WorkloadName: g.Name, TemplateName: nativeGangTemplate},
			SchedulingPolicy:      policy,
			SchedulingConstraints: g.Constraints,
			PriorityClassName:     g.PriorityClassName,
		},
	}
	if _, err := c.SchedulingV1beta1().PodGroups(g.Namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create PodGroup %s: %w", g.Name, err)
	}
	return nil
}

// Join makes pod a member of the gang: it names the PodGroup in spec.schedulingGroup.
func (g NativeGang) Join(pod *corev1.Pod) {
	name := g.Name
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
}
