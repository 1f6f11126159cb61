package view

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cps-extender/cps-extender/priority"
)

// TestLevelNotes: the levels the nodes carry are logged at the first queue and when they
// change; a level on no node is warned about once.
func TestLevelNotes(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	var n levelNotes
	none := []priority.TopologyLevel{{Key: "topology.kubernetes.io/zone"}}
	some := []priority.TopologyLevel{{Key: "topology.kubernetes.io/zone", Nodes: 3, Domains: 1}}
	for _, levels := range [][]priority.TopologyLevel{none, none, some, some, none} {
		n.note(log, levels)
	}
	var got []string
	for _, e := range logs.All() {
		line := e.Level.String() + " " + e.Message
		if v, ok := e.ContextMap()["levels"]; ok {
			for _, l := range v.([]any) {
				line += " | " + l.(string)
			}
		}
		got = append(got, line)
	}
	want := []string{
		"info topology levels the nodes carry | topology.kubernetes.io/zone on no node (left out of the placement)",
		"warn a configured topology level is on no node: the placement leaves it out, and no job waits for a domain of it",
		"info topology levels the nodes carry | topology.kubernetes.io/zone on 3 nodes in 1 domain",
		"info topology levels the nodes carry | topology.kubernetes.io/zone on no node (left out of the placement)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
