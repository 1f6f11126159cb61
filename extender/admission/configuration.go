package admission

import (
	"context"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
)

// updateWebhooks applies edit to every webhook of the MutatingWebhookConfiguration name and
// updates it when edit changed one (reading it again on a conflict). A missing
// configuration is no error (found is false): the webhook is not installed, and nothing
// calls it. Certs (the caBundle) and Switch (the calls) edit the same object this way,
// each its own fields.
func updateWebhooks(ctx context.Context, client admissionregistrationv1.MutatingWebhookConfigurationsGetter, name string,
	edit func(*admissionv1.MutatingWebhook) bool) (found, updated bool, err error) {
	hooks := client.MutatingWebhookConfigurations()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := hooks.Get(ctx, name, metav1.GetOptions{})
		found, updated = !apierrors.IsNotFound(err), false
		if !found {
			return nil
		}
		if err != nil {
			return err
		}
		changed := false
		for i := range cfg.Webhooks {
			changed = edit(&cfg.Webhooks[i]) || changed
		}
		if !changed {
			return nil
		}
		if _, err := hooks.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			return err
		}
		updated = true
		return nil
	})
	return found, updated, err
}
