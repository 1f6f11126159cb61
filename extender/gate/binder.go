package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// APIBinder binds pods by creating a Binding (POST pods/<name>/binding), as kube-scheduler's
// default binder does.
type APIBinder struct {
	client  kubernetes.Interface
	timeout time.Duration
}

// NewAPIBinder returns a Binder that posts Bindings with client, each bounded by timeout.
func NewAPIBinder(client kubernetes.Interface, timeout time.Duration) *APIBinder {
	return &APIBinder{client: client, timeout: timeout}
}

// Bind binds pod to node. The pod's UID, when known, is a precondition: a pod deleted and
// re-created under the same name is not bound by mistake.
func (b *APIBinder) Bind(ctx context.Context, pod gang.PodRef, node string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	err := b.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("pod %s no longer exists: not bound to %s", pod, node)
	case apierrors.IsConflict(err):
		return fmt.Errorf("pod %s could not be bound to %s: %v", pod, node, err)
	default:
		return fmt.Errorf("binding pod %s to node %s: %w", pod, node, err)
	}
}
