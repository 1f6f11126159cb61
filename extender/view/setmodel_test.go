package view

import (
	"testing"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/priority"
)

// TestClusterSetModelKeepsTheGangConfig: a reload swaps the model and affinity only.
func TestClusterSetModelKeepsTheGangConfig(t *testing.T) {
	cfg := config.DefaultConfig()
	c := &Cluster{kick: make(chan struct{}, 1)}
	c.cfg.Store(&viewConfig{gang: cfg.Gang, model: cfg.Model.PriorityModel(), affinity: cfg.Affinity})
	m := cfg.Model.PriorityModel()
	m.Policy = priority.PolicyStrict
	a := cfg.Affinity
	a.PSAntiAffinity = priority.AntiAffinityHard
	c.SetModel(m, a)
	got := c.config()
	if got.model.Policy != priority.PolicyStrict || got.affinity.PSAntiAffinity != priority.AntiAffinityHard || got.gang.JobLabel != cfg.Gang.JobLabel {
		t.Errorf("after SetModel: %+v", got)
	}
	select {
	case <-c.kick:
	default:
		t.Error("SetModel did not ask for a recompute")
	}
}
