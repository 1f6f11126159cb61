package view

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/nodesel"
	"github.com/cps-extender/cps-extender/extender/tenant"
	"github.com/cps-extender/cps-extender/priority"
)

// The queue's jobs are built per group of the index (jobPods: the counted pods of one job
// key) and kept from recompute to recompute: after a pod event only the groups that event
// touched are built again, and the rest are taken over as they were. A group's jobs depend
// on
//   - its pods' records: the group's version changes with any of them (index.go);
//   - the held binds of its pods: a held bind makes a pod held, on a node;
//   - the config, the namespaces and PodGroups (sources), and the nodes (the pods' node
//     sets are made anew after a node change): a cacheGen; a change rebuilds every group.
//
// A group with pod rules (required pod affinity, anti-affinity, hard spread) is built
// every time: its rules count the placed pods of other jobs.
//
// Jobs are made per group: two groups would make two jobs of one key only if a stage's key
// (a JobSet's "ns/name.stage") were another group's own; the recompute before the cache merged
// such pods into one job, in map order. Neither is tested: the test has no PodGroup sources.

// cacheGen is what every group's jobs depend on.
type cacheGen struct {
	cfg      *viewConfig
	sources  uint64
	nodeSets uint64
}

// builtGroup is the jobs one group of the index made, and what they were made from.
// Published snapshots share its jobs' pods: nothing writes to them once built.
type builtGroup struct {
	version uint64
	jobs    []priority.Job // Leaving is counted per recompute, on the snapshot's copies
	// podKeys is, for each pod of the group in order, its job's index in jobs.
	podKeys []int
	pods    []podName
	// hardPS is whether each job asks for hard PS anti-affinity; ruled is the jobs with a
	// pending pod that has rules, and rules whether any pod of the group has rules.
	hardPS   []bool
	ruled    []int
	rules    bool
	warnings []PodWarning
	seen     uint64 // the last recompute that used it
}

// podName is a pod's UID and "namespace/name".
type podName struct {
	uid    types.UID
	nsName string
}

// jobCache is the groups built by the previous recompute.
type jobCache struct {
	gen    cacheGen
	held   map[types.UID]string // the held binds the groups were built with
	groups map[string]*builtGroup
	passes uint64
	kept   int // the groups the last pass took over as they were
	// warnings is every group's, gathered anew only when a group's change changed them:
	// published snapshots share it.
	warnings []PodWarning
}

// heldMoved is the pods whose held bind differs between a and b.
func heldMoved(a, b map[types.UID]string) []types.UID {
	var out []types.UID
	for uid, node := range a {
		if other, ok := b[uid]; !ok || other != node {
			out = append(out, uid)
		}
	}
	for uid := range b {
		if _, ok := a[uid]; !ok {
			out = append(out, uid)
		}
	}
	return out
}

// groupInputs is what building a group reads besides its pods.
type groupInputs struct {
	cfg    *viewConfig
	groups *gang.GroupMemo
	held   map[types.UID]string
	sets   map[*nodesel.Constraints]*priority.NodeSet
}

// keeps is what records keeps of the jobs the cache holds (nil: none): a group built at
// the same version, not moved by a held bind (records checks), without rules, under the same
// cacheGen.
func (c *Cluster) keeps(cfg *viewConfig, sources uint64) keepFunc {
	cache := c.jobs
	if c.full || cache == nil {
		return nil
	}
	return func(nodeSets uint64, key string, version uint64) bool {
		if cache.gen != (cacheGen{cfg: cfg, sources: sources, nodeSets: nodeSets}) {
			return false
		}
		b := cache.groups[key]
		return b != nil && b.version == version && !b.rules
	}
}

// builtGroups returns the built group of each of idx's jobs, in idx.jobs' order, and
// their warnings: taken from the cache where nothing it depends on changed (none in full
// mode), else built now. It keeps them for the next recompute.
func (c *Cluster) builtGroups(idx indexed, in groupInputs, gen cacheGen) ([]*builtGroup, []PodWarning) {
	cache, warned := c.jobs, false // warned: the warnings changed
	if c.full || cache == nil || cache.gen != gen {
		cache, warned = &jobCache{gen: gen, groups: make(map[string]*builtGroup, len(idx.jobs))}, true
	}
	cache.passes, cache.kept = cache.passes+1, 0
	out := make([]*builtGroup, len(idx.jobs))
	for i, g := range idx.jobs {
		b := cache.groups[g.key]
		if !g.kept { // records kept it only as built in cache (keeps)
			fresh := c.buildGroup(g, in)
			if b == nil && len(fresh.warnings) > 0 || b != nil && !slices.Equal(b.warnings, fresh.warnings) {
				warned = true
			}
			b = fresh
			cache.groups[g.key] = b
		} else {
			cache.kept++
		}
		b.seen = cache.passes
		out[i] = b
	}
	if len(cache.groups) > len(out) {
		for key, b := range cache.groups {
			if b.seen != cache.passes {
				warned = warned || len(b.warnings) > 0
				delete(cache.groups, key)
			}
		}
	}
	if warned {
		n := 0
		for _, b := range out {
			n += len(b.warnings)
		}
		cache.warnings = make([]PodWarning, 0, n)
		for _, b := range out {
			cache.warnings = append(cache.warnings, b.warnings...)
		}
	}
	cache.held = maps.Clone(in.held)
	c.jobs = cache
	return out, cache.warnings
}

// buildGroup builds the jobs of one group of the index: most groups make one, a group its
// object splits into stages (a JobSet's) one per stage.
func (c *Cluster) buildGroup(g jobPods, in groupInputs) *builtGroup {
	cfg := in.cfg
	hardPS := cfg.affinity.PSAntiAffinity == priority.AntiAffinityHard
	b := &builtGroup{version: g.version, podKeys: make([]int, len(g.pods)), pods: make([]podName, len(g.pods))}
	warned := tenant.Warned{}
	for i, pod := range g.pods {
		pm := pod.membership()
		m := in.groups.Complete(&pm, pod.namespace)
		k := 0
		for k < len(b.jobs) && b.jobs[k].Key != m.JobKey {
			k++
		}
		if k == len(b.jobs) {
			b.jobs = append(b.jobs, priority.Job{Key: m.JobKey, Pods: make([]priority.Pod, 0, len(g.pods)), Created: m.Created, Finished: m.Finished})
			b.hardPS = append(b.hardPS, false)
		}
		job := &b.jobs[k]
		b.podKeys[i], b.pods[i] = k, podName{uid: pod.uid, nsName: pod.nsName}
		addMember(job, pod, m, in.held, in.sets)
		if pod.rules != nil {
			b.rules = true
			if pod.node == "" && !slices.Contains(b.ruled, k) {
				b.ruled = append(b.ruled, k)
			}
		}
		b.hardPS[k] = b.hardPS[k] || m.HardPSAntiAffinity
		job.PSApart = hardPS || b.hardPS[k]
		if job.User == "" {
			job.User, job.UserFrom = c.tenants.UserOf(cfg.gang, pod.namespace, m.User)
		}
		if !job.Urgent {
			if from, _ := c.tenants.UrgencyOf(cfg.gang, pod.namespace, pod.priorityClass, m.Urgent); from != "" {
				job.Urgent, job.UrgentFrom = true, from
			}
		}
		if m.User != "" || m.Urgent {
			b.warnings = appendWarnings(b.warnings, pod, c.tenants.LabelWarnings(cfg.gang, pod.namespace, pod.priorityClass, m, warned))
		}
	}
	for k := range b.jobs {
		gang.ChiefServes(&b.jobs[k])
	}
	return b
}
