package preempt

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	policylisters "k8s.io/client-go/listers/policy/v1"

	"github.com/cps-extender/cps-extender/extender/gang"
)

// Budgets checks a whole gang against the PodDisruptionBudgets before its eviction. The
// Eviction API checks one pod at a time: the dry run of every pod of a gang passes a budget
// that allows one disruption, and the real evictions, which go out together, then leave the
// gang partly evicted. A gang whose pods a budget would not let go together is refused
// here, as a whole.
type Budgets interface {
	// Refusal names the budget that would refuse some of pods, all evicted at once, or
	// returns "" when none would (as far as the budgets' status says).
	Refusal(pods []gang.PodRef) string
}

// PodGetter finds a pod by namespace and name (view.Cluster.Pod).
type PodGetter func(namespace, name string) (*corev1.Pod, bool)

// ListedBudgets is Budgets over an informer's PodDisruptionBudgets.
type ListedBudgets struct {
	budgets policylisters.PodDisruptionBudgetLister
	pods    PodGetter
}

// NewListedBudgets checks against the budgets of lister; pods gives the victims' labels.
func NewListedBudgets(lister policylisters.PodDisruptionBudgetLister, pods PodGetter) *ListedBudgets {
	return &ListedBudgets{budgets: lister, pods: pods}
}

// Refusal counts, for each budget that selects some of pods, how many of them it selects,
// against the disruptions its status allows. A budget whose status is behind its spec is
// left to the Eviction API (it refuses every eviction then); so is a pod not found.
func (b *ListedBudgets) Refusal(pods []gang.PodRef) string {
	byNamespace := map[string][]labels.Set{}
	for _, ref := range pods {
		if pod, ok := b.pods(ref.Namespace, ref.Name); ok {
			byNamespace[ref.Namespace] = append(byNamespace[ref.Namespace], pod.Labels)
		}
	}
	for ns, podLabels := range byNamespace {
		budgets, err := b.budgets.PodDisruptionBudgets(ns).List(labels.Everything())
		if err != nil {
			continue // the dry run still asks the API server
		}
		for _, pdb := range budgets {
			if pdb.Status.ObservedGeneration < pdb.Generation {
				continue
			}
			selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || selector.Empty() {
				continue // the Eviction API ignores such a budget too
			}
			selected := 0
			for _, l := range podLabels {
				if selector.Matches(l) {
					selected++
				}
			}
			if selected > int(pdb.Status.DisruptionsAllowed) {
				return fmt.Sprintf("PodDisruptionBudget %s/%s allows %d disruptions; the gang has %d pods under it",
					ns, pdb.Name, pdb.Status.DisruptionsAllowed, selected)
			}
		}
	}
	return ""
}
