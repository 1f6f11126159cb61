package harness

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/eval"
)

// apiTimeout bounds one API call of the harness.
const apiTimeout = 10 * time.Second

// nodeSpecs are the workload's nodes: eval's node shape with GPUs as an extended resource,
// named node-00.., in racks of consecutive nodes (rack-0 holds the first nodes/racks).
func nodeSpecs(p eval.Params) []framework.NodeSpec {
	specs := make([]framework.NodeSpec, p.Nodes)
	perRack := max(1, p.Nodes/max(1, p.Racks))
	for i := range specs {
		specs[i] = framework.NodeSpec{
			Name: fmt.Sprintf("node-%02d", i),
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(eval.NodeCPU, resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse(strconv.Itoa(eval.NodeMemGi) + "Gi"),
				gpuResource:           *resource.NewQuantity(eval.NodeGPU, resource.DecimalSI),
			},
			Labels: map[string]string{rackLabel: fmt.Sprintf("rack-%d", min(i/perRack, p.Racks-1))},
		}
	}
	return specs
}

// rackOf maps node name to rack.
func rackOf(specs []framework.NodeSpec) map[string]string {
	out := make(map[string]string, len(specs))
	for _, s := range specs {
		out[s.Name] = s.Labels[rackLabel]
	}
	return out
}

// createPriorityClasses creates the workload's PriorityClasses (every setup has them; only
// those with Setup.PriorityClasses use them).
func createPriorityClasses(c kubernetes.Interface) error {
	for _, pc := range append([]eval.PriorityClass{eval.UrgentClass}, eval.PriorityClasses...) {
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		_, err := c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: pc.Name}, Value: pc.Value,
		}, metav1.CreateOptions{})
		cancel()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PriorityClass %s: %w", pc.Name, err)
		}
	}
	return nil
}

// createNamespaces creates a namespace per user (eval.NamespaceOf), labelled with its user
// (userLabel), as a cluster's admins set tenants up; every setup has them.
func createNamespaces(c kubernetes.Interface) error {
	for _, u := range eval.Users {
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		_, err := c.CoreV1().Namespaces().Create(ctx, userNamespace(u.Name), metav1.CreateOptions{})
		cancel()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", eval.NamespaceOf(u.Name), err)
		}
	}
	return nil
}

// userNamespace is the namespace of a user's jobs.
func userNamespace(user string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: eval.NamespaceOf(user), Labels: map[string]string{userLabel: user}}}
}

// podName names the i-th pod of a role of a job.
func podName(j eval.Job, role string, i int) string {
	return fmt.Sprintf("%s-%s-%d", j.Name, role, i)
}

// jobPods are the pods of j for setup s, PS first, in the namespace of j's user and
// labelled for cps-extender (harmless to the other setups). They do not name their user:
// their namespace does. An urgent job is urgent by its PriorityClass (eval.UrgentClass), as
// an admin grants urgency (the extender's gang.urgentPriorityClasses).
func jobPods(j eval.Job, s Setup) []*corev1.Pod {
	var out []*corev1.Pod
	add := func(role string, i int, cpuMilli, memMi, gpu int64) {
		labels := map[string]string{
			"cps-extender.io/job": j.Name, "cps-extender.io/role": role, "cps-extender.io/index": strconv.Itoa(i),
			"cps-extender.io/min-member": strconv.Itoa(j.Size()),
		}
		res := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(memMi<<20, resource.BinarySI),
		}
		if gpu > 0 {
			res[gpuResource] = *resource.NewQuantity(gpu, resource.DecimalSI)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName(j, role, i), Namespace: j.Namespace(), Labels: labels},
			Spec: corev1.PodSpec{
				SchedulerName: schedulerName,
				Containers: []corev1.Container{{
					Name: "main", Image: "fake",
					// Extended resources need limits equal to requests.
					Resources: corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()},
				}},
			},
		}
		if s.PriorityClasses {
			pod.Spec.PriorityClassName = j.PriorityClass
		}
		if s.NativeGang {
			group := j.Name
			pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
		}
		out = append(out, pod)
	}
	for i := range j.PS {
		add("ps", i, eval.PSCPUMilli, eval.PSMemMi, 0)
	}
	for i := range j.Workers {
		add("worker", i, eval.WorkerCPUMilli, eval.WorkerMemMi, eval.WorkerGPU)
	}
	return out
}

// createGang creates the Workload and PodGroup of j for native gang scheduling, in j's
// namespace: one group template, minCount the whole job, the job's priority class; with
// rack, a topology constraint that keeps the group inside one rack.
func createGang(c kubernetes.Interface, j eval.Job, rack bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	g := framework.NativeGang{Namespace: j.Namespace(), Name: j.Name, MinCount: j.Size(), PriorityClassName: j.PriorityClass}
	if rack {
		g.Constraints = &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: rackLabel}}}
	}
	return g.Create(ctx, c)
}

// createPod creates pod, retrying while a previous incarnation of the same name is still
// being removed.
func createPod(c kubernetes.Interface, pod *corev1.Pod) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		_, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod.DeepCopy(), metav1.CreateOptions{})
		cancel()
		if err == nil || !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("create pod %s: %w", podKey(pod), err)
			}
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deletePod deletes a pod at once; a pod already gone is fine.
func deletePod(c kubernetes.Interface, pod *corev1.Pod) error {
	zero := int64(0)
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", podKey(pod), err)
	}
	return nil
}

// podKey is a pod's namespace/name.
func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
