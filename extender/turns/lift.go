package turns

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/extender/view"
	"github.com/cps-extender/cps-extender/priority"
)

// WaitingNotifier tells a pod that waits for its job's turn why (an Event on the pod). It
// must not block.
type WaitingNotifier interface {
	NotifyWaiting(pod *corev1.Pod, adm view.Admission)
	// Warn gives pod a Warning Event, once per warning key in a while.
	Warn(pod *corev1.Pod, warning view.Warning)
}

// PodUngater lifts gang.TurnGate from a pod.
type PodUngater interface {
	Ungate(ctx context.Context, pod gang.PodRef) error
}

// Ungate removes gang.TurnGate from the pod's scheduling gates (a strategic merge patch
// that deletes that one entry, so any other gate stays), refused when the pod of that name
// is not the one with that UID any more.
func (n *APINudger) Ungate(ctx context.Context, pod gang.PodRef) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"spec": map[string]any{"schedulingGates": []map[string]string{
			{"$patch": "delete", "name": gang.TurnGate},
		}},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	_, err = n.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// queueLifts queues the lift of gang.TurnGate from the pods of every job that has the turn
// in snap, and from the pods of no counted job, and forgets the lifts snap no longer needs.
// t.mu is held.
func (t *Turns) queueLifts(snap *view.Snapshot) {
	if t.ungater == nil {
		return
	}
	explain := t.waiting != nil && !t.clock.Now().Before(t.explainedAt.Add(explainEvery))
	if explain {
		t.explainedAt = t.clock.Now()
	}
	for job, pods := range snap.TurnGated() {
		if job != "" && !hasTurn(snap, job) {
			if explain {
				t.explainGated(snap, job, pods)
			}
			continue
		}
		for _, ref := range pods {
			if _, queued := t.lifting[ref.UID]; queued {
				continue
			}
			t.lifting[ref.UID] = struct{}{}
			t.lifts.Add(ref)
		}
	}
	for uid := range t.lifting {
		if _, gated := snap.TurnGatedJob(uid); !gated {
			delete(t.lifting, uid) // lifted (or gone): the view has seen it
		}
	}
}

// explainEvery is how often the waiting gated pods are told why they wait; the notifier
// limits each pod's Events further (events.waitingInterval).
const explainEvery = time.Second

// explainGated tells the gated pods of a job that waits why, as the filter tells the pods it
// turns away: kube-scheduler never tries a gated pod, so no FailedScheduling says it.
func (t *Turns) explainGated(snap *view.Snapshot, job string, pods []gang.PodRef) {
	_, d, ok := snap.Job(job)
	if !ok {
		return
	}
	adm := view.Admission{Reason: d.Wait, Explain: d.Reason, Job: job, Queued: true,
		Unschedulable: d.Phase == priority.PhaseUnschedulable}
	for _, ref := range pods {
		t.waiting.NotifyWaiting(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}}, adm)
	}
}

// liftable reports whether snap still has the pod gated with its job's turn.
func liftable(snap *view.Snapshot, ref gang.PodRef) bool {
	job, gated := snap.TurnGatedJob(ref.UID)
	return gated && (job == "" || hasTurn(snap, job))
}

// nextLift lifts the gate of one queued pod; false when the queue is shut down.
func (t *Turns) nextLift(ctx context.Context) bool {
	ref, quit := t.lifts.Get()
	if quit {
		return false
	}
	defer t.lifts.Done(ref)
	t.mu.Lock()
	current := t.current
	t.mu.Unlock()
	if !liftable(current, ref) {
		// The turn passed before the write (the next one queues it anew), or the pod is
		// gone or lifted.
		t.lifts.Forget(ref)
		t.mu.Lock()
		delete(t.lifting, ref.UID)
		t.mu.Unlock()
		t.metrics.TurnLift(metrics.NudgeSkipped)
		return true
	}
	err := t.ungater.Ungate(ctx, ref)
	switch {
	case err == nil:
		t.lifts.Forget(ref)
		t.lifted.Add(1)
		t.metrics.TurnLift(metrics.NudgeSent)
		t.log.Debug("lifted the turn gate", zap.Stringer("pod", ref))
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) || errors.Is(err, context.Canceled):
		// Gone, or another pod of that name by now. Should the same pod still be gated,
		// the next snapshot with its job's turn queues it again.
		t.lifts.Forget(ref)
		t.mu.Lock()
		delete(t.lifting, ref.UID)
		t.mu.Unlock()
		t.metrics.TurnLift(metrics.NudgeSkipped)
	case t.lifts.NumRequeues(ref) < maxNudgeRetries:
		t.lifts.AddRateLimited(ref)
		t.metrics.TurnLift(metrics.NudgeFailed)
	default:
		// Given up for now; the next snapshot that gives the job the turn queues it again.
		t.lifts.Forget(ref)
		t.mu.Lock()
		delete(t.lifting, ref.UID)
		t.mu.Unlock()
		t.metrics.TurnLift(metrics.NudgeFailed)
		t.log.Warn("lifting the turn gate of a pod whose turn came failed", zap.Stringer("pod", ref), zap.Error(err))
	}
	return true
}

// Lifts is how many turn gates were lifted.
func (t *Turns) Lifts() uint64 { return t.lifted.Load() }
