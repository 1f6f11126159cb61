package view

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/priority"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// TestLayout: nothing before the first queue; then the snapshot's schedulable nodes, its
// jobs by key (the pods bound where they are) and the configured topology keys.
func TestLayout(t *testing.T) {
	spec := loadfixture.Spec{Nodes: 8, Jobs: 3, PodsPerJob: 3, PS: 1}
	nodes, pods := loadfixture.Nodes(spec), loadfixture.Pods(spec)
	nodes[2].Spec.Unschedulable = true
	pods[0].Spec.NodeName = nodes[5].Name
	cfg := config.DefaultConfig()
	cfg.Affinity.Topology = []string{loadfixture.RackLabel, loadfixture.ZoneLabel}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: cfg})
	if _, _, q, _, _ := c.Layout(); q != nil {
		t.Fatal("a queue before the first recompute")
	}
	fillStores(t, c, nodes, pods)
	now := time.Unix(1_700_000_000, 0)
	c.recompute(now)

	gotNodes, jobs, q, topology, computed := c.Layout()
	var names []string
	for _, n := range gotNodes {
		names = append(names, n.Name)
	}
	var want []string
	for i, n := range nodes {
		if i != 2 {
			want = append(want, n.Name)
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("nodes (-want +got): the schedulable ones by name\n%s", diff)
	}
	if !computed.Equal(now) || q != c.Snapshot().Queue || !slices.Equal(topology, cfg.Affinity.Topology) {
		t.Errorf("computed %v, queue %p (snapshot's %p), topology %v", computed, q, c.Snapshot().Queue, topology)
	}
	if len(jobs) != spec.Jobs || !slices.IsSortedFunc(jobs, func(a, b *priority.Job) int { return strings.Compare(a.Key, b.Key) }) {
		t.Fatalf("%d jobs, sorted %v: want %d by key", len(jobs), jobs, spec.Jobs)
	}
	bound := 0
	for _, j := range jobs {
		for _, p := range j.Pods {
			if p.State == priority.PodBound {
				bound++
				if p.Node != nodes[5].Name || p.Name != pods[0].Namespace+"/"+pods[0].Name {
					t.Errorf("bound pod %s on %s, want %s on %s", p.Name, p.Node, pods[0].Name, nodes[5].Name)
				}
			}
		}
	}
	if bound != 1 {
		t.Errorf("%d bound pods, want 1", bound)
	}
}
