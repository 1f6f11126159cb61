package view

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/priority"
)

// fakeJobView serves a snapshot computed by the real model from a fixed set of jobs.
type fakeJobView struct {
	snap *Snapshot
}

func newFakeJobView(t *testing.T, jobs []priority.Job, nodes []priority.Node) *fakeJobView {
	t.Helper()
	return &fakeJobView{snap: SnapshotOf(jobs, nodes, priority.DefaultModel(), time.Unix(1_700_000_000, 0))}
}

func (f *fakeJobView) Snapshot() *Snapshot { return f.snap }

func ref(name string) gang.PodRef {
	return gang.PodRef{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}
}

// fillStores puts nodes and pods into the informer caches of c, as a sync would.
func fillStores(tb testing.TB, c *Cluster, nodes []*corev1.Node, pods []*corev1.Pod) {
	tb.Helper()
	nodeStore := c.factory.Core().V1().Nodes().Informer().GetStore()
	podStore := c.factory.Core().V1().Pods().Informer().GetStore()
	for _, n := range nodes {
		if err := nodeStore.Add(n); err != nil {
			tb.Fatal(err)
		}
	}
	for _, p := range pods {
		if err := podStore.Add(p); err != nil {
			tb.Fatal(err)
		}
	}
}
