package view

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// TestNodeNameAnswersItsOwnStrings: the view answers the names of its nodes with its own
// strings, without allocating, and copies the others; no answer aliases the bytes asked
// with (TestHasNode: which nodes it knows).
func TestNodeNameAnswersItsOwnStrings(t *testing.T) {
	nodes := loadfixture.Nodes(loadfixture.Spec{Nodes: 2})
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig()})
	fillStores(t, c, nodes, nil)
	c.recompute(time.Now())
	for _, tt := range []struct {
		name  string
		known bool
	}{{nodes[1].Name, true}, {"ghost", false}, {nodes[0].Name, true}} {
		asked := []byte(tt.name)
		got, known := c.NodeName(asked)
		clear(asked)
		if got != tt.name || known != tt.known {
			t.Errorf("NodeName(%q) = %q, %t; want the name, %t", tt.name, got, known, tt.known)
		}
	}
	scheduled, d := []byte(nodes[0].Name), c.Decisions()
	if allocs := testing.AllocsPerRun(20, func() { d.NodeName(scheduled) }); allocs != 0 {
		t.Errorf("looking a node of the snapshot up: %v allocations, want 0", allocs)
	}
}
