package priority

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// AntiAffinityMode says how strongly the parameter servers (PS) of one job are kept apart.
type AntiAffinityMode string

// The PS anti-affinity modes. The empty mode means AntiAffinitySoft.
const (
	// AntiAffinityOff does not spread a job's PS: prioritize ignores where its other PS are.
	AntiAffinityOff AntiAffinityMode = "off"
	// AntiAffinitySoft (the default) penalises, in prioritize only, nodes that already host
	// another PS of the same job; filter lets them pass.
	AntiAffinitySoft AntiAffinityMode = "soft"
	// AntiAffinityHard scores like AntiAffinitySoft, and filter also rejects a node that
	// already hosts another PS of the same job (see Affinity.PSConflict).
	AntiAffinityHard AntiAffinityMode = "hard"
)

// MaxAffinityScore is the highest node score Score gives; it is kube-scheduler's
// MaxExtenderPriority. The lowest is 0.
const MaxAffinityScore int64 = 10

// hostnameLabel is the well-known node label of the implicit node level.
const hostnameLabel = "kubernetes.io/hostname"

// Closeness of two different nodes that share topology level i is
// closenessLevel0 * closenessDecay^i: 0.6 for the nearest listed level, then 0.3, 0.15, ...
const (
	closenessLevel0 = 0.6
	closenessDecay  = 0.5
)

// Weights of the terms of a PS pod's score. The spread weight exceeds the other two
// together, so a node hosting another PS of the job never outscores one that does not.
const (
	weightSpread = 0.6
	weightNear   = 0.2
	weightRoom   = 0.2
)

// roomCap is the number of pending workers beyond which a node has "room enough": the room
// term is min(fit, pending, roomCap) / min(pending, roomCap).
const roomCap = 8

// The names of the parts of a NodeScore. The per-level names append the label key, e.g.
// "ps-same-topology.kubernetes.io/zone".
const (
	partPSSameNode     = "ps-same-node"
	partPSSame         = "ps-same-"
	partWorkerSameNode = "worker-same-node"
	partWorkerSame     = "worker-same-"
	partPSSpread       = "ps-spread"
	partWorkersNear    = "workers-near"
	partRoomForWorkers = "room-for-workers"
)

// Affinity configures the PS-worker affinity scores of prioritize and the hard PS
// anti-affinity of filter. The zero value is valid: no topology levels, soft anti-affinity.
type Affinity struct {
	// Topology lists node label keys of topology domains, nearest first (e.g. a rack label,
	// then "topology.kubernetes.io/zone"). The node itself is always the implicit first
	// level and must not be listed ("kubernetes.io/hostname" is rejected by Validate).
	Topology []string `json:"topology,omitempty" yaml:"topology,omitempty"`
	// PSAntiAffinity is off, soft or hard; empty means soft.
	PSAntiAffinity AntiAffinityMode `json:"psAntiAffinity,omitempty" yaml:"psAntiAffinity,omitempty"`
}

// ZoneLabel is the well-known node label of a node's zone, the default topology level.
const ZoneLabel = "topology.kubernetes.io/zone"

// DefaultAffinity returns the default affinity configuration: one topology level, the zone
// (ZoneLabel; racks have no well-known label, so a rack level must be configured), and soft
// PS anti-affinity. Each call returns a new Topology slice.
func DefaultAffinity() Affinity {
	return Affinity{Topology: []string{ZoneLabel}, PSAntiAffinity: AntiAffinitySoft}
}

// Validate reports every problem of a at once: an unknown anti-affinity mode, and empty,
// duplicate or implicit ("kubernetes.io/hostname") topology label keys. It returns nil when
// a is valid.
func (a Affinity) Validate() []error {
	var errs []error
	switch a.PSAntiAffinity {
	case "", AntiAffinityOff, AntiAffinitySoft, AntiAffinityHard:
	default:
		errs = append(errs, fmt.Errorf("affinity.psAntiAffinity: unknown mode %q (want %q, %q or %q)",
			a.PSAntiAffinity, AntiAffinityOff, AntiAffinitySoft, AntiAffinityHard))
	}
	seen := make(map[string]int, len(a.Topology))
	for i, key := range a.Topology {
		switch {
		case strings.TrimSpace(key) == "":
			errs = append(errs, fmt.Errorf("affinity.topology[%d]: empty label key", i))
		case key == hostnameLabel:
			errs = append(errs, fmt.Errorf("affinity.topology[%d]: %q is the implicit node level; list only domains larger than a node", i, key))
		default:
			if j, dup := seen[key]; dup {
				errs = append(errs, fmt.Errorf("affinity.topology[%d]: duplicate label key %q (also at [%d])", i, key, j))
				continue
			}
			seen[key] = i
		}
	}
	return errs
}

// mode returns the effective anti-affinity mode: the empty mode is soft.
func (a Affinity) mode() AntiAffinityMode {
	if a.PSAntiAffinity == "" {
		return AntiAffinitySoft
	}
	return a.PSAntiAffinity
}

// ScorePart is one named term of a node score, so an explanation can show how the score came about.
type ScorePart struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// NodeScore is the affinity score of one candidate node: an integer in 0..MaxAffinityScore and
// the named terms it was computed from.
type NodeScore struct {
	Node  string      `json:"node"`
	Score int64       `json:"score"`
	Parts []ScorePart `json:"parts,omitempty"`
}

// String renders s for logs and explanations, e.g. "n-3=8 (ps-same-node 1.00, ps-same-rack 0.00)".
func (s NodeScore) String() string {
	var b strings.Builder
	b.WriteString(s.Node)
	b.WriteByte('=')
	b.WriteString(strconv.FormatInt(s.Score, 10))
	for i, p := range s.Parts {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(p.Name)
		b.WriteByte(' ')
		b.WriteString(strconv.FormatFloat(p.Value, 'f', 2, 64))
	}
	if len(s.Parts) > 0 {
		b.WriteByte(')')
	}
	return b.String()
}

// score returns the PS-worker affinity score of pod on each candidate node: one NodeScore
// per candidate, in candidate order, each an integer in 0..10 (kube-scheduler's
// MaxExtenderPriority) with its named parts.
//
// Placed pods. A pod of job other than pod itself (matched by UID, else by name) is placed on
// node m when its State is PodHeld or PodBound and its Node m is set: pods held at the bind
// gate count like bound ones. PS means RolePS; every other role (chief, worker, evaluator,
// unknown) is worker-side: the chief pulls and pushes parameters like a worker, so it is
// scored like one.
//
// Closeness. With topology levels k_0..k_{L-1} (Affinity.Topology) and level weights
// w_i = 0.6 * 0.5^i (0.6, 0.3, 0.15, ...; w_L = 0), the closeness of a placed pod on node m
// to candidate n is
//
//	c(m, n) = 1                                         if m == n
//	c(m, n) = sum_i (w_i - w_{i+1}) * [m, n share k_i]  otherwise
//
// where nodes share k_i when both carry label k_i with the same non-empty value (the candidate's
// labels are Node.Labels, else labelsOf; a placed pod's node's labels are labelsOf(m)). When the
// domains nest (each rack in one zone) this is simply w_j for the nearest shared level j:
// same node 1, same rack 0.6, same zone 0.3, elsewhere 0. When they do not (a rack name
// reused in another zone, a node missing a label) each shared level adds only its own step,
// so such a pair is never scored as close as a true same-rack pair.
//
// Worker-side pod. With T > 0 placed PS, the score is the mean closeness to them,
//
//	S(n) = round(10 * sum_p c(node(p), n) / T)
//
// so with several PS a node near more of them scores higher. With no placed PS but placed
// worker-side pods, the same formula over those pods keeps the gang together. With neither,
// every node scores 0. Parts: the fraction of the targets on the same node
// ("ps-same-node" or "worker-same-node") and, per level, the fraction on other nodes that
// share that level ("ps-same-<key>", "worker-same-<key>").
//
// PS pod. Three terms, each in [0,1]:
//
//	spread(n) = 1 if n hosts no other placed PS of the job, else 0   ("ps-spread")
//	near(n)   = mean closeness of n to the job's placed worker-side pods ("workers-near")
//	room(n)   = min(f(n), P, 8) / min(P, 8)                           ("room-for-workers")
//
// where P is the number of the job's pending worker-side pods and f(n) the number of them
// that fit on n after this PS: for every resource r a pending worker requests,
// floor((Free_n[r] - Request_pod[r]) / R[r]) with R the largest request of each resource over
// the pending workers (a conservative shape: exact when the workers are alike). Then
//
//	S(n) = round(10 * sum_t W_t * term_t(n) / sum_t W_t)
//
// over the active terms t, with W_spread = 0.6, W_near = 0.2, W_room = 0.2. A term is active
// only when it can tell nodes apart: spread when the mode is not off and another PS of the
// job is placed; near when a worker-side pod is placed; room when one is pending. Because
// W_spread > W_near + W_room, in soft and hard mode a node with another PS of the job always
// scores below one without. With no active term every node scores 0. Parts are the active terms.
//
// round rounds half up (4.5 -> 5), absorbing floating-point error, and the result is
// clamped to 0..10.
//
// Neutral score. A pod in no job (job nil) gets 0 on every node, as does a pod whose job
// gives no signal. kube-scheduler adds an extender's score, times its weight, to every node's
// total, so equal scores add the same amount everywhere and never change its choice; 0 also
// reads as "no preference" in an explanation.
//
// Cost: O(len(candidates) * (len(Topology) + resources requested)) after an O(len(job.Pods))
// pass that counts placed pods by node and by label value, with one allocation for all parts.
// Integer counts make the result independent of the order of job.Pods. score never panics.
func (a Affinity) score(pod Pod, job *Job, candidates []Node, labelsOf func(node string) map[string]string) []NodeScore {
	out := make([]NodeScore, len(candidates))
	for i, n := range candidates {
		out[i].Node = n.Name
	}
	if job == nil || len(candidates) == 0 {
		return out
	}
	s := a.newScorer(pod, job, labelsOf)
	if s.k == 0 {
		return out
	}
	parts := make([]ScorePart, len(candidates)*s.k)
	for c := range candidates {
		ps := parts[c*s.k : (c+1)*s.k : (c+1)*s.k]
		out[c].Score = s.score(&candidates[c], ps)
		out[c].Parts = ps
	}
	return out
}

// scorer holds what a pod's scores depend on besides the candidate node, worked out once
// per pod: the placed targets counted by node and level, and for a PS the active terms.
// Scoring one node then costs a few comparisons and lookups and allocates nothing.
type scorer struct {
	k  int // parts per node; 0 when every node scores 0
	ps bool

	// Worker-side pod: closeness to the targets, named sameNode then per level.
	targets   *podPlacement
	targetsAt *placementIndex // targets in a NodeIndex, once on is called
	names     []string
	counts    []int // per-level scratch for the parts

	// PS pod: the active terms.
	psOn                     map[string]int
	workers                  *podPlacement
	workersAt                *placementIndex
	shape                    []shapeResource
	want                     int
	spreadOn, nearOn, roomOn bool
	wsum                     float64
}

// newScorer prepares the scores of pod in job; see score. The job is not changed.
func (a Affinity) newScorer(pod Pod, job *Job, labelsOf func(string) map[string]string) *scorer {
	if labelsOf == nil {
		labelsOf = func(string) map[string]string { return nil }
	}
	if pod.Role == RolePS {
		return a.newPSScorer(pod, job, labelsOf)
	}
	return a.newWorkerScorer(pod, job, labelsOf)
}

// newWorkerScorer prepares a worker-side pod's scores; see Score.
func (a Affinity) newWorkerScorer(pod Pod, job *Job, labelsOf func(string) map[string]string) *scorer {
	targets := a.newPlacement(labelsOf)
	for i := range job.Pods {
		if p := &job.Pods[i]; p.Role == RolePS && placedOnNode(p) && !isSamePod(pod, *p) {
			targets.add(p.Node)
		}
	}
	sameNode, sameLevel := partPSSameNode, partPSSame
	if targets.total == 0 {
		for i := range job.Pods {
			if p := &job.Pods[i]; p.Role != RolePS && placedOnNode(p) && !isSamePod(pod, *p) {
				targets.add(p.Node)
			}
		}
		sameNode, sameLevel = partWorkerSameNode, partWorkerSame
	}
	if targets.total == 0 {
		return &scorer{}
	}
	k := 1 + len(a.Topology)
	names := make([]string, k)
	names[0] = sameNode
	for i, key := range a.Topology {
		names[1+i] = sameLevel + key
	}
	return &scorer{k: k, targets: targets, names: names, counts: make([]int, len(a.Topology))}
}

// newPSScorer prepares a PS pod's scores; see Score.
func (a Affinity) newPSScorer(pod Pod, job *Job, labelsOf func(string) map[string]string) *scorer {
	s := &scorer{ps: true, workers: a.newPlacement(labelsOf)}
	pending := 0
	for i := range job.Pods {
		p := &job.Pods[i]
		if isSamePod(pod, *p) {
			continue
		}
		switch {
		case p.Role == RolePS:
			if placedOnNode(p) {
				if s.psOn == nil {
					s.psOn = make(map[string]int)
				}
				s.psOn[p.Node]++
			}
		case placedOnNode(p):
			s.workers.add(p.Node)
		case p.State == PodPending:
			pending++
			s.shape = mergeMaxRequest(s.shape, p.Request)
		}
	}
	s.spreadOn = a.mode() != AntiAffinityOff && len(s.psOn) > 0
	s.nearOn = s.workers.total > 0
	s.roomOn = pending > 0
	if s.spreadOn {
		s.k++
		s.wsum += weightSpread
	}
	if s.nearOn {
		s.k++
		s.wsum += weightNear
	}
	if s.roomOn {
		s.k++
		s.wsum += weightRoom
	}
	// The room term subtracts this PS's own request from the node's free capacity first.
	for i := range s.shape {
		s.shape[i].own = max(pod.Request[s.shape[i].name], 0)
	}
	s.want = min(pending, roomCap)
	return s
}

// score returns the score of node n and, when parts is not nil (it has room for k parts),
// fills in its parts.
func (s *scorer) score(n *Node, parts []ScorePart) int64 { return s.scoreAt(-1, n, parts) }

// on numbers the scorer's placed pods in x, for scoreAt.
func (s *scorer) on(x *NodeIndex) {
	if s.targets != nil {
		s.targetsAt = s.targets.indexOn(x)
	}
	if s.workers != nil {
		s.workersAt = s.workers.indexOn(x)
	}
}

// closeness is pl's closeness to n; i >= 0 is n's number in the index at (see on), which
// then answers without n's labels.
func closenessOf(pl *podPlacement, at *placementIndex, i int, n *Node, counts []int) (int, float64) {
	if i >= 0 && at != nil && counts == nil {
		return pl.closenessAt(at, i, n)
	}
	return pl.closeness(n, counts)
}

// scoreAt is score for node n, which is node i of the index the scorer is on (i < 0: in
// none).
func (s *scorer) scoreAt(i int, n *Node, parts []ScorePart) int64 {
	if s.k == 0 {
		return 0
	}
	if !s.ps {
		var counts []int
		if parts != nil {
			counts = s.counts
		}
		onNode, shared := closenessOf(s.targets, s.targetsAt, i, n, counts)
		t := float64(s.targets.total)
		if parts != nil {
			parts[0] = ScorePart{Name: s.names[0], Value: float64(onNode) / t}
			for i, c := range counts {
				parts[1+i] = ScorePart{Name: s.names[1+i], Value: float64(c) / t}
			}
		}
		return toScore((float64(onNode) + shared) / t)
	}
	var sum float64
	part := 0
	add := func(name string, weight, v float64) {
		sum += weight * v
		if parts != nil {
			parts[part] = ScorePart{Name: name, Value: v}
		}
		part++
	}
	if s.spreadOn {
		v := 1.0
		if s.psOn[n.Name] > 0 {
			v = 0
		}
		add(partPSSpread, weightSpread, v)
	}
	if s.nearOn {
		onNode, shared := closenessOf(s.workers, s.workersAt, i, n, nil)
		add(partWorkersNear, weightNear, (float64(onNode)+shared)/float64(s.workers.total))
	}
	if s.roomOn {
		add(partRoomForWorkers, weightRoom, float64(min(workersFitting(n.Free, s.shape, s.want), s.want))/float64(s.want))
	}
	return toScore(sum / s.wsum)
}

// PSConflict reports whether placing pod on node breaks hard PS anti-affinity: only in hard
// mode, only for a PS pod, when another PS of the same job is placed (held or bound) on node.
// The reason names the node, that PS and the job, e.g. "node n-3 already hosts ps
// ns/a-ps-0 of job ns/a (hard PS anti-affinity)". When several PS are there it names the
// first by name, so the reason does not depend on the order of job.Pods.
func (a Affinity) PSConflict(pod Pod, job *Job, node string) (bool, string) {
	if a.mode() != AntiAffinityHard || pod.Role != RolePS || job == nil || node == "" {
		return false, ""
	}
	found := ""
	for i := range job.Pods {
		p := &job.Pods[i]
		if p.Role != RolePS || !placedOnNode(p) || p.Node != node || isSamePod(pod, *p) {
			continue
		}
		name := p.Name
		if name == "" {
			name = p.UID
		}
		if found == "" || name < found {
			found = name
		}
	}
	if found == "" {
		return false, ""
	}
	if ns, _, ok := strings.Cut(job.Key, "/"); ok && ns != "" && !strings.Contains(found, "/") {
		found = ns + "/" + found
	}
	return true, fmt.Sprintf("node %s already hosts ps %s of job %s (hard PS anti-affinity)", node, found, job.Key)
}

// placedOnNode reports whether p occupies a node: held at the gate or bound, with a node set.
func placedOnNode(p *Pod) bool {
	return (p.State == PodHeld || p.State == PodBound) && p.Node != ""
}

// isSamePod reports whether a and b are the same pod: by UID when both have one, else by name.
func isSamePod(a, b Pod) bool {
	if a.UID != "" && b.UID != "" {
		return a.UID == b.UID
	}
	return a.Name != "" && a.Name == b.Name
}

// roundSlack absorbs floating-point error before rounding, so that a term meant to be
// exactly 0.15 (1.5 points) rounds up to 2 rather than down on a representation error.
const roundSlack = 1e-9

// toScore maps x in [0,1] to an integer score in 0..MaxAffinityScore, rounding half up and
// clamping anything outside (including NaN) into range.
func toScore(x float64) int64 {
	s := math.Floor(x*float64(MaxAffinityScore) + 0.5 + roundSlack)
	switch {
	case !(s >= 0): // also NaN
		return 0
	case s > float64(MaxAffinityScore):
		return MaxAffinityScore
	}
	return int64(s)
}

// placedNodeCount is a node hosting placed target pods: how many, and its topology label
// values.
type placedNodeCount struct {
	count  int
	values []string
}

// keyIndex numbers distinct strings in order of first sight. A pod's targets sit on a
// handful of nodes and domains, and scanning a few strings is cheaper than hashing one
// for every candidate node, so the map is built only once there are more.
type keyIndex struct {
	keys []string
	m    map[string]int
}

// keyIndexScan is how many keys keyIndex scans before it builds its map.
const keyIndexScan = 8

// find returns key's number, or -1.
func (x *keyIndex) find(key string) int {
	if x.m != nil {
		if i, ok := x.m[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range x.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// insert returns key's number, numbering it when new.
func (x *keyIndex) insert(key string) int {
	if i := x.find(key); i >= 0 {
		return i
	}
	x.keys = append(x.keys, key)
	i := len(x.keys) - 1
	switch {
	case x.m != nil:
		x.m[key] = i
	case len(x.keys) > keyIndexScan:
		x.m = make(map[string]int, 2*len(x.keys))
		for j, k := range x.keys {
			x.m[k] = j
		}
	}
	return i
}

// levelCounts counts placed target pods by one level's label value.
type levelCounts struct {
	values keyIndex
	counts []int
}

func (l *levelCounts) get(value string) int {
	if i := l.values.find(value); i >= 0 {
		return l.counts[i]
	}
	return 0
}

// podPlacement counts placed target pods by node and, per topology level, by label value, so
// the closeness of a candidate to all of them costs O(levels) lookups.
type podPlacement struct {
	topology []string
	labelsOf func(string) map[string]string
	total    int
	nodes    keyIndex
	counts   []placedNodeCount // by the node's number in nodes
	levels   []levelCounts
}

// newPlacement returns an empty podPlacement over a's topology levels.
func (a Affinity) newPlacement(labelsOf func(string) map[string]string) *podPlacement {
	return &podPlacement{topology: a.Topology, labelsOf: labelsOf, levels: make([]levelCounts, len(a.Topology))}
}

// add counts one placed pod on node.
func (pl *podPlacement) add(node string) {
	pl.total++
	at := pl.nodes.insert(node)
	if at == len(pl.counts) {
		labels := pl.labelsOf(node)
		pn := placedNodeCount{values: make([]string, len(pl.topology))}
		for i, key := range pl.topology {
			pn.values[i] = labels[key]
		}
		pl.counts = append(pl.counts, pn)
	}
	pn := &pl.counts[at]
	pn.count++
	for i, v := range pn.values {
		if v != "" {
			l := &pl.levels[i]
			j := l.values.insert(v)
			if j == len(l.counts) {
				l.counts = append(l.counts, 0)
			}
			l.counts[j]++
		}
	}
}

// closeness returns, for candidate n, the number of placed pods on n itself and the sum of
// c(m, n) over the placed pods on other nodes m (see Score). When counts is not nil (it has
// one entry per topology level), counts[i] is set to the number of placed pods on other
// nodes that share level i with n.
func (pl *podPlacement) closeness(n *Node, counts []int) (int, float64) {
	onNode := 0
	var here []string
	if at := pl.nodes.find(n.Name); at >= 0 {
		onNode, here = pl.counts[at].count, pl.counts[at].values
	}
	if len(pl.topology) == 0 {
		return onNode, 0
	}
	labels := n.Labels
	if labels == nil {
		labels = pl.labelsOf(n.Name)
	}
	var shared float64
	w := closenessLevel0
	for i, key := range pl.topology {
		next := w * closenessDecay
		if i == len(pl.topology)-1 {
			next = 0
		}
		count := 0
		if v := labels[key]; v != "" {
			count = pl.levels[i].get(v)
			if here != nil && here[i] == v {
				count -= onNode // pods on n itself count as same node, not as same domain
			}
		}
		shared += (w - next) * float64(count)
		if counts != nil {
			counts[i] = count
		}
		w = next
	}
	return onNode, shared
}

// shapeResource is one resource of the pending workers' request shape: the largest request
// for name, and this PS's own request for it.
type shapeResource struct {
	name string
	qty  int64
	own  int64
}

// mergeMaxRequest merges req into shape, keeping the largest positive quantity per resource,
// and keeps shape sorted by name so that the result does not depend on the order of the pods.
func mergeMaxRequest(shape []shapeResource, req Resources) []shapeResource {
	for name, q := range req {
		if q <= 0 {
			continue
		}
		i, ok := slices.BinarySearchFunc(shape, name, func(r shapeResource, name string) int {
			return strings.Compare(r.name, name)
		})
		if ok {
			shape[i].qty = max(shape[i].qty, q)
			continue
		}
		shape = slices.Insert(shape, i, shapeResource{name: name, qty: q})
	}
	return shape
}

// workersFitting returns how many workers of the request shape fit in free after the PS's
// own request, counting no further than limit.
func workersFitting(free Resources, shape []shapeResource, limit int) int {
	n := int64(limit)
	for _, r := range shape {
		f := free[r.name]
		if f < r.own || f-r.own < r.qty {
			return 0
		}
		n = min(n, (f-r.own)/r.qty)
	}
	return int(n)
}
