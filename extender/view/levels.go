package view

import (
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/cps-extender/cps-extender/priority"
)

// levelNotes logs which configured topology levels the nodes carry: once at the first
// queue and whenever that changes, and a warning, once per level and process, for a level
// no node carries (the placement leaves it out: on a cluster without zone labels the
// default affinity.topology places as if no level were configured).
type levelNotes struct {
	mu     sync.Mutex
	last   []priority.TopologyLevel
	logged bool
	warned map[string]bool
}

func (n *levelNotes) note(log *zap.Logger, levels []priority.TopologyLevel) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.logged && slices.Equal(n.last, levels) {
		return
	}
	n.last, n.logged = slices.Clone(levels), true
	text := make([]string, len(levels))
	for i, l := range levels {
		text[i] = l.String()
	}
	log.Info("topology levels the nodes carry", zap.Strings("levels", text))
	for _, l := range levels {
		if l.Nodes > 0 || n.warned[l.Key] {
			continue
		}
		if n.warned == nil {
			n.warned = map[string]bool{}
		}
		n.warned[l.Key] = true
		log.Warn("a configured topology level is on no node: the placement leaves it out, and no job waits for a domain of it",
			zap.String("level", l.Key), zap.String("config", "affinity.topology"))
	}
}
