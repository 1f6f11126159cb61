package preempt

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
)

// Ledger is what the preemptor must remember across a change of leader or a restart: the
// victim jobs evicted lately (they count against maxPreemptions, and are not chosen
// again), and the jobs a refused eviction protects, each with its time.
type Ledger struct {
	Evicted   map[string]time.Time `json:"evicted"`
	Protected map[string]time.Time `json:"protected"`
}

// LedgerStore keeps the Ledger where every replica finds it.
type LedgerStore interface {
	Load(ctx context.Context) (Ledger, error)
	Save(ctx context.Context, l Ledger) error
}

// ledgerKey is the ConfigMap's data key.
const ledgerKey = "ledger.json"

// ConfigMapLedger keeps the Ledger as JSON in a ConfigMap of the extender's namespace,
// where `kubectl get configmap -o yaml` shows the evictions of the last window.
type ConfigMapLedger struct {
	client          corev1client.ConfigMapsGetter
	namespace, name string
}

// NewConfigMapLedger keeps the Ledger in the ConfigMap namespace/name.
func NewConfigMapLedger(client corev1client.ConfigMapsGetter, namespace, name string) *ConfigMapLedger {
	return &ConfigMapLedger{client: client, namespace: namespace, name: name}
}

// Load reads the Ledger; a ConfigMap not made yet is an empty one.
func (c *ConfigMapLedger) Load(ctx context.Context) (Ledger, error) {
	cm, err := c.client.ConfigMaps(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Ledger{}, nil
	}
	if err != nil {
		return Ledger{}, fmt.Errorf("reading the preemption ledger %s/%s: %w", c.namespace, c.name, err)
	}
	var l Ledger
	if raw := cm.Data[ledgerKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			return Ledger{}, fmt.Errorf("the preemption ledger %s/%s: %w", c.namespace, c.name, err)
		}
	}
	return l, nil
}

// Save writes the Ledger, making the ConfigMap when it is not there.
func (c *ConfigMapLedger) Save(ctx context.Context, l Ledger) error {
	raw, err := json.Marshal(l)
	if err != nil {
		return err
	}
	cms := c.client.ConfigMaps(c.namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, c.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "cps-extender"}}, Data: map[string]string{ledgerKey: string(raw)}}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data[ledgerKey] == string(raw) {
			return nil
		}
		cm.Data = maps.Clone(cm.Data)
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[ledgerKey] = string(raw)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
