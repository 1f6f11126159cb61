package framework

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// KwokNodeAnnotation and KwokNodeAnnotationValue mark the nodes that kwok manages.
	KwokNodeAnnotation      = "kwok.x-k8s.io/node"
	KwokNodeAnnotationValue = "fake"

	// DefaultPodsPerNode is a node's pods capacity when NodeSpec.Capacity does not set it.
	DefaultPodsPerNode = "110"

	nodesReadyTimeout = 60 * time.Second
)

// NodeSpec describes a fake node for AddNodes.
type NodeSpec struct {
	// Name is the node's name, also its kubernetes.io/hostname label.
	Name string
	// Capacity is the node's capacity and allocatable; pods defaults to DefaultPodsPerNode.
	Capacity corev1.ResourceList
	// Labels are added to the node's labels.
	Labels map[string]string
	// Taints are the node's taints.
	Taints []corev1.Taint
}

// Nodes returns n node specs named prefix-0 .. prefix-(n-1), each with the given cpu and memory
// (resource quantities such as "4" and "8Gi").
func Nodes(prefix string, n int, cpu, memory string) []NodeSpec {
	specs := make([]NodeSpec, n)
	for i := range specs {
		specs[i] = NodeSpec{
			Name: fmt.Sprintf("%s-%d", prefix, i),
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
			},
		}
	}
	return specs
}

// node builds the Node object for spec: annotated for kwok, labelled with its hostname, with
// capacity and allocatable in its status (kube-apiserver keeps the status sent on create).
func (spec NodeSpec) node() *corev1.Node {
	capacity := corev1.ResourceList{corev1.ResourcePods: resource.MustParse(DefaultPodsPerNode)}
	for name, q := range spec.Capacity {
		capacity[name] = q.DeepCopy()
	}
	labels := map[string]string{
		"kubernetes.io/hostname": spec.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
	}
	maps.Copy(labels, spec.Labels)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeAnnotationValue},
		},
		Spec: corev1.NodeSpec{Taints: spec.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
		},
	}
}

// AddNodes creates a kwok-managed node per spec and waits until kwok has made all of them
// Ready.
func (cp *ControlPlane) AddNodes(t testing.TB, nodes ...NodeSpec) {
	t.Helper()
	ctx := context.Background()
	want := make(map[string]bool, len(nodes))
	for _, spec := range nodes {
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, spec.node(), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", spec.Name, err)
		}
		want[spec.Name] = true
	}
	WaitFor(t, nodesReadyTimeout, fmt.Sprintf("%d nodes to be Ready", len(nodes)), func() (bool, error) {
		list, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range list.Items {
			if want[list.Items[i].Name] && NodeReady(&list.Items[i]) {
				ready++
			}
		}
		if ready < len(want) {
			return false, fmt.Errorf("%d of %d Ready", ready, len(want))
		}
		return true, nil
	})
}

// NodeReady reports whether node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
