package view

import (
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/config"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/priority"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// TestScoreThroughTheNodeIndexMatchesLabels: Cluster.Score, which numbers the snapshot's
// topology labels, gives every candidate the score the model gives from the node's labels:
// for workers and PS, for nodes of the snapshot, an unschedulable node, an unknown name,
// and after a reload changed the topology levels before the next recompute.
func TestScoreThroughTheNodeIndexMatchesLabels(t *testing.T) {
	spec := loadfixture.Spec{Nodes: 64, Jobs: 6, PodsPerJob: 5, PS: 2}
	nodes, pods := loadfixture.Nodes(spec), loadfixture.Pods(spec)
	nodes[3].Spec.Unschedulable = true
	// Place some pods: the first job's PS on two nodes of one rack, a worker of the second
	// job; the rest are pending.
	pods[0].Spec.NodeName, pods[1].Spec.NodeName = nodes[0].Name, nodes[1].Name
	pods[7].Spec.NodeName = nodes[40].Name
	pods[8].Spec.NodeName = nodes[3].Name // on the unschedulable node

	cfg := config.DefaultConfig()
	cfg.Affinity.Topology = []string{loadfixture.RackLabel, loadfixture.ZoneLabel}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: cfg})
	fillStores(t, c, nodes, pods)
	c.recompute(time.Now())

	names := []string{"no-such-node"}
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	check := func(t *testing.T) {
		d := c.Decisions()
		snap := d.snap
		for _, pod := range pods {
			if pod.Spec.NodeName != "" {
				continue
			}
			got := d.Score(pod, names, nil)
			job, member, ok := d.jobMember(pod)
			if !ok {
				t.Fatalf("%s: not in a job", pod.Name)
			}
			var plan map[string]string
			if _, d, ok := snap.Job(job.Key); ok {
				plan = d.Plan
			}
			scorer := c.affinity().NewScorer(member, job, plan, c.NodeLabels)
			nonzero := 0
			for i, name := range names {
				n := snap.node(name)
				if want := scorer.Score(&n); got[i].Host != name || got[i].Score != want {
					t.Errorf("%s on %s: got %+v, want score %d", pod.Name, name, got[i], want)
				}
				if got[i].Score > 0 {
					nonzero++
				}
			}
			if pod.Labels[loadfixture.JobLabel] == pods[0].Labels[loadfixture.JobLabel] && nonzero == 0 {
				t.Errorf("%s: every node scores 0, but its PS are placed", pod.Name)
			}
		}
	}
	t.Run("snapshot topology", check)
	t.Run("reloaded topology", func(t *testing.T) {
		reloaded := *c.config()
		reloaded.affinity = priority.Affinity{Topology: []string{loadfixture.ZoneLabel}}
		c.cfg.Store(&reloaded)
		check(t)
	})
}

// TestHasNode: the snapshot's schedulable nodes, and the informer cache for the rest.
func TestHasNode(t *testing.T) {
	nodes := loadfixture.Nodes(loadfixture.Spec{Nodes: 4})
	nodes[1].Spec.Unschedulable = true
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig()})
	fillStores(t, c, nodes[:3], nil)
	c.recompute(time.Now())
	fillStores(t, c, nodes[3:], nil) // newer than the snapshot
	for _, tt := range []struct {
		name string
		want bool
	}{
		{nodes[0].Name, true},
		{nodes[1].Name, true}, // unschedulable: not in the snapshot's list
		{nodes[3].Name, true},
		{"no-such-node", false},
		{"", false},
	} {
		if got := c.HasNode(tt.name); got != tt.want {
			t.Errorf("HasNode(%q) = %t, want %t", tt.name, got, tt.want)
		}
	}
}
