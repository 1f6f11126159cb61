package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	admissionregistrationclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"

	"github.com/cps-extender/cps-extender/extender/admission"
	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/preempt"
	"github.com/cps-extender/cps-extender/extender/view"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaseNamespace is the namespace of the leader Lease (and of the preemption ledger): the
// configured one, else the pod's own, else cps-system. With the election on, it must exist:
// a Lease in a namespace that is not there would leave every replica a follower, and
// nothing evicted, nudged or lifted, for ever.
func leaseNamespace(ctx context.Context, client kubernetes.Interface, le config.LeaderElectionConfig) (string, error) {
	ns := le.ResourceNamespace
	if ns == "" {
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		ns = "cps-system"
	}
	if !le.LeaderElect {
		return ns, nil
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return "", fmt.Errorf("leaderElection: the Lease's namespace %s does not exist: create it, set leaderElection.resourceNamespace, or leaderElection.leaderElect: false for a single replica", ns)
	} else if err != nil {
		return "", fmt.Errorf("leaderElection: checking the Lease's namespace %s: %w", ns, err)
	}
	return ns, nil
}

// victimsSeen tells the gate which jobs a preemption is evicting: those the preemptor of this
// process evicts, and, on a replica that does not lead (the leader evicts), the jobs whose
// bound pods the view sees being deleted.
type victimsSeen struct {
	preemptor *preempt.Preemptor
	leaving   func(job string) bool
}

func (v victimsSeen) Evicting(job string) bool {
	if v.preemptor.Evicting(job) {
		return true
	}
	return !v.preemptor.Leading() && v.leaving(job)
}

// leaveGates is a leader's last care on its way out: it switches the webhook's calls off,
// so that pods created while no replica leads are not gated, and when the webhook
// configuration is gone (an uninstall: docs/deploy.md) it lifts every turn gate the view
// knows of, since nothing would lift them after. A replica that leads next switches the
// calls on again when a job waits.
func leaveGates(ctx context.Context, log *zap.Logger, leading bool, toggle *admission.Switch, webhooks admissionregistrationclient.MutatingWebhookConfigurationsGetter,
	configuration string, cluster *view.Cluster, ungater interface {
		Ungate(context.Context, gang.PodRef) error
	}) {
	if !leading || configuration == "" {
		return
	}
	if toggle != nil {
		if _, err := toggle.Off(ctx); err != nil {
			log.Warn("switching the turn-gate webhook's calls off on the way out", zap.Error(err))
		}
	}
	if _, err := webhooks.MutatingWebhookConfigurations().Get(ctx, configuration, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return // installed (or unknown): the next leader lifts the gates in their turn
	}
	lifted, failed := 0, 0
	for _, pods := range cluster.Snapshot().TurnGated() {
		for _, ref := range pods {
			if err := ungater.Ungate(ctx, ref); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				failed++
				continue
			}
			lifted++
		}
	}
	log.Info("the turn-gate webhook is uninstalled: lifted every turn gate on the way out", zap.Int("lifted", lifted), zap.Int("failed", failed))
}
