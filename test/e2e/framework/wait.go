package framework

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PollInterval is how often WaitFor checks its condition.
const PollInterval = 100 * time.Millisecond

// stopPolling marks a condition error that ends WaitFor at once.
type stopPolling struct{ err error }

func (s stopPolling) Error() string { return s.err.Error() }
func (s stopPolling) Unwrap() error { return s.err }

// StopPolling wraps err so that WaitFor fails at once instead of polling on, for conditions
// that can no longer come true (a process exited, a pod failed).
func StopPolling(err error) error { return stopPolling{err: err} }

// WaitFor calls cond every PollInterval, starting at once, until it returns true, and fails
// the test naming what was awaited if timeout passes first. An error from cond does not end
// the wait (API calls fail transiently while components start); the last one is reported on
// timeout. An error wrapped with StopPolling fails the test at once. Call it from the test's
// goroutine.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// poll is WaitFor returning an error instead of failing the test.
func poll(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if stop := (stopPolling{}); errors.As(err, &stop) {
			return stop.err
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("timed out after %v (last error: %w)", timeout, last)
			}
			return fmt.Errorf("timed out after %v", timeout)
		}
		time.Sleep(PollInterval)
	}
}

// PodPlacements lists the pods in namespace and maps each pod's name to the node it is bound
// to ("" while unbound).
func PodPlacements(t testing.TB, c kubernetes.Interface, namespace string) map[string]string {
	t.Helper()
	pods, err := c.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods in %q: %v", namespace, err)
	}
	placements := make(map[string]string, len(pods.Items))
	for _, pod := range pods.Items {
		placements[pod.Name] = pod.Spec.NodeName
	}
	return placements
}
