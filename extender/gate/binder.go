package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// APIBinder binds pods by creating a Binding (POST pods/<name>/binding), as kube-scheduler's
// default binder does.
type APIBinder struct {
	client  kubernetes.Interface
	timeout time.Duration
	// settleEvery is how often an ambiguous Binding's pod is read while the reads fail.
	settleEvery time.Duration
}

// NewAPIBinder returns a Binder that posts Bindings with client, each bounded by timeout.
// A Binding whose answer is lost is settled by reading the pod for up to another timeout.
func NewAPIBinder(client kubernetes.Interface, timeout time.Duration) *APIBinder {
	return &APIBinder{client: client, timeout: timeout, settleEvery: 200 * time.Millisecond}
}

// Bind binds pod to node. The pod's UID, when known, is a precondition: a pod deleted and
// re-created under the same name is not bound by mistake.
//
// A Binding can be committed and its answer lost (the connection reset, the API server
// restarted, the call timed out), or refused because the pod is bound already (a 409 for
// a Binding of ours whose first answer was lost). Unless the API server refused it for
// good (the pod is gone, the request is bad or forbidden), the pod itself says: Bind reads
// it, retrying while the reads fail for up to the binder's timeout, and a pod that is bound
// is bound, whatever the Binding's answer was.
func (b *APIBinder) Bind(ctx context.Context, pod gang.PodRef, node string) error {
	post, cancel := context.WithTimeout(ctx, b.timeout)
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	err := b.client.CoreV1().Pods(pod.Namespace).Bind(post, binding, metav1.CreateOptions{})
	cancel()
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("pod %s no longer exists: not bound to %s", pod, node)
	case refused(err):
		return fmt.Errorf("binding pod %s to node %s: %w", pod, node, err)
	}
	on, serr := b.settle(ctx, pod)
	switch {
	case serr != nil:
		return fmt.Errorf("binding pod %s to node %s: %w; whether it is bound is not known: %v", pod, node, err, serr)
	case on == "":
		return fmt.Errorf("binding pod %s to node %s: %w; the pod is not bound", pod, node, err)
	}
	// Committed, and only its answer lost, or this is the answer to a retry of one that
	// was. A pod bound to another node (by someone else) is bound too: its gang goes on.
	return nil
}

// refused reports whether err is an API server's answer that the Binding was not committed
// and will not be: a bad, unauthorised, forbidden or invalid request. Anything else (a lost
// answer, a timeout, a conflict, a server error) may hide a committed Binding.
func refused(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	switch status.Status().Code {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// settle reads the pod to learn whether a Binding whose answer was lost was committed: the
// node it is bound to, "" when it is not bound. The reads are retried every settleEvery
// while they fail, for up to the binder's timeout. A pod that is gone, or is another pod
// under the same name, is an error.
func (b *APIBinder) settle(ctx context.Context, pod gang.PodRef) (string, error) {
	var node string
	var last error
	err := wait.PollUntilContextTimeout(context.WithoutCancel(ctx), b.settleEvery, b.timeout, true, func(ctx context.Context) (bool, error) {
		p, err := b.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("pod %s no longer exists", pod)
		case err != nil:
			last = err
			return false, nil
		case pod.UID != "" && p.UID != pod.UID:
			return false, fmt.Errorf("pod %s was replaced by another of the same name", pod)
		}
		node = p.Spec.NodeName
		return true, nil
	})
	if err != nil && last != nil && wait.Interrupted(err) {
		return "", fmt.Errorf("reading the pod: %w", last)
	}
	return node, err
}
