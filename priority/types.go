// Package priority is the pure model of cps-extender: jobs and their gangs, the combined
// priority of a job, the admission queue and its turn, the placement fit, and the PS-worker
// affinity scores. It does no I/O and reads no clock: the current time is always an input,
// so the same state gives the same answer on every replica. See README.md for the formulas.
package priority

import "time"

// Resources is a set of resource quantities by name: "cpu" in millicores, "memory" in
// bytes, "pods" as a count, and extended resources (e.g. "nvidia.com/gpu") in their own
// integer units. A missing name means zero.
type Resources map[string]int64

// Role is a pod's role inside its job. Roles with a lower rank are placed first.
type Role int

// The roles, in intra-job order: parameter servers and the chief/master first, then
// workers, then evaluators. RoleOther is a pod whose role is unknown; it ranks with workers.
const (
	RolePS Role = iota
	RoleChief
	RoleWorker
	RoleOther
	RoleEvaluator
)

// PodState is where one of a job's pods stands in scheduling.
type PodState int

// The pod states the model distinguishes. Terminated pods are not part of a job's view.
const (
	// PodPending has no node yet and no bind in progress.
	PodPending PodState = iota
	// PodHeld has reached bind: the gate holds its bind call, and Node is its target.
	PodHeld
	// PodBound is bound to Node (spec.nodeName is set).
	PodBound
)

// Pod is one member of a job's gang, as the model sees it.
type Pod struct {
	UID  string
	Name string // the pod's name, used in explanations
	Role Role
	// Index is the replica index within its role (-1 when unknown); it orders pods of one role.
	Index   int
	Request Resources
	State   PodState
	// Node is the node the pod is bound to or held for; empty while pending.
	Node string
	// Gated is true while the pod has scheduling gates: the scheduler will not try it yet.
	Gated bool
	// Nodes are the nodes the pod may use (its node selector, required node affinity and
	// tolerations leave out the others); nil means every node. Pods with the same
	// constraints should share one set: the model works out each distinct set once.
	Nodes *NodeSet
	// RuleRefs names the job's Rules that concern the pod; nil when none does (most pods:
	// a pointer keeps the Pod at 128 bytes, not 192).
	RuleRefs *RuleRefs
	// MayNotFit names what the pod asks for that the fit does not count (DRA features, as
	// phrases: "DRA constraints between requests"); nil when the fit's count is exact. The
	// job's sentence then says it may not fit.
	MayNotFit []string
}

// RuleRefs are the job's Rules, by index, that concern one pod: Keeps the required ones it
// must keep, Prefers its preferred ones (Weight > 0), and Counts those whose pods it is one
// of (its labels match their selector): where it runs counts for them.
type RuleRefs struct {
	Keeps   []int
	Prefers []int
	Counts  []int
}

// keeps, prefers and counts are p's RuleRefs lists (nil when it has none).
func (p *Pod) keeps() []int {
	if p.RuleRefs == nil {
		return nil
	}
	return p.RuleRefs.Keeps
}

func (p *Pod) prefers() []int {
	if p.RuleRefs == nil {
		return nil
	}
	return p.RuleRefs.Prefers
}

func (p *Pod) counts() []int {
	if p.RuleRefs == nil {
		return nil
	}
	return p.RuleRefs.Counts
}

// NodeSet is a set of nodes, by name, that a pod may use, with words that say which.
type NodeSet struct {
	// Why names the nodes for sentences, as a noun phrase: "the 2 of 4 nodes without a
	// taint it does not tolerate (nvidia.com/gpu=present:NoSchedule)".
	Why   string
	names map[string]struct{}
}

// NewNodeSet returns the set of the named nodes, described by why.
func NewNodeSet(why string, names []string) *NodeSet {
	s := &NodeSet{Why: why, names: make(map[string]struct{}, len(names))}
	for _, n := range names {
		s.names[n] = struct{}{}
	}
	return s
}

// Has reports whether the set holds the node; a nil set holds every node.
func (s *NodeSet) Has(name string) bool {
	if s == nil {
		return true
	}
	_, ok := s.names[name]
	return ok
}

// Len is how many nodes the set holds (-1 for a nil set: every node).
func (s *NodeSet) Len() int {
	if s == nil {
		return -1
	}
	return len(s.names)
}

// Job is a gang of pods that is useful only when at least MinMember of them run together.
type Job struct {
	// Key is "namespace/name"; it is unique and the last tie-break of the order.
	Key  string
	User string
	// UserFrom says where User came from ("namespace", "namespace label", "pod label"), for
	// explanations.
	UserFrom string
	// Priority is the job's pods' spec.priority (from their PriorityClass).
	Priority int32
	// Urgent jobs count as having the priority ceiling, are walked ahead of every job
	// that is not urgent (after repairs, gatherings and turns) and preempt as a class (see
	// Model.VictimBar). Urgency is granted by the admin; UrgentFrom says how ("PriorityClass
	// ml-urgent"), for explanations.
	Urgent     bool
	UrgentFrom string
	// MinMember is the gang minimum; 0 means every pod of the job.
	MinMember int
	// Created is when the job started waiting: its PodGroup's or first pod's creation.
	Created time.Time
	// LastCreated is when its newest pod was created: a job short of pods whose pods were
	// created within Model.ArrivalWindow is taken to be still arriving.
	LastCreated time.Time
	Pods        []Pod
	// Topology is the job's own say on how close its pods must or should sit.
	Topology TopologyRequest
	// PSApart is set when the job's PS must sit on distinct nodes (hard PS anti-affinity):
	// the placement never plans two of them on one node, since the filter would refuse it.
	PSApart bool
	// Rules are the job's pods' pod (anti-)affinity terms and topology spread constraints,
	// each once (see Rule); the pods name theirs in their RuleRefs. A job with
	// required rules is placed pod by pod keeping them (rules.go); preferred ones only steer
	// the choice among the nodes that fit (prefer.go).
	Rules []Rule
	// RunningSince is when the job last had its minimum bound (the latest bind of the pods
	// that make it run); zero when not known. A job is a preemption victim only after
	// running Model.MinRunTime.
	RunningSince time.Time
	// SizeUnknown says why the job's gang size is not known yet, e.g. the object its pods
	// come from has not been read: the job then waits for it, saying so, takes no turn
	// and holds nobody back ("" when the size is known).
	SizeUnknown string
	// Finished says how the workload the job's pods come from ended ("its TFJob
	// succeeded"): whatever pods of it are left (a parameter server the operator keeps)
	// run on, but the job waits for nothing and counts as running ("" while it runs).
	Finished string
	// Leaving is how many of the job's bound pods are being deleted (they are not in Pods).
	// A job losing pods, a preemption victim most often, is taken to be on its way out:
	// its other bound pods' room counts as leaving for a preemptor, and it is no victim.
	Leaving int
}

// TopologyRequest names topology levels, by node label key: one of State.Topology's keys,
// or HostnameLevel for a single node. An empty key asks nothing.
type TopologyRequest struct {
	// Required places the job only inside one domain of this level: it waits until one
	// domain can hold its whole gang.
	Required string `json:"required,omitempty"`
	// Preferred places the job inside the domain of this level that holds it most
	// tightly, when one can; else it spreads over as few domains as it can. Without it
	// the job goes to the lowest level at which one domain holds it.
	Preferred string `json:"preferred,omitempty"`
}

// HostnameLevel is the node level's label key in a TopologyRequest.
const HostnameLevel = "kubernetes.io/hostname"

// Placement says where the admission plan puts a job (its bound, held and planned pods).
type Placement struct {
	// Level is the lowest level one domain of which holds every pod of the job: "node",
	// a topology label key, or "cluster" when the job spans several top-level domains.
	Level string `json:"level"`
	// Domains are the domains of the nearest topology level (or the nodes, with no
	// topology) that the job's pods use, by name, in placement order.
	Domains []string `json:"domains"`
	// Workers is the number of the job's worker-side pods (every role but PS) placed or
	// planned; NearPSNode of them share a node with a PS of the job, and NearPSDomain
	// share a node or a domain of the nearest topology level with one. Zero when the job
	// has no PS.
	Workers      int `json:"workers"`
	NearPSNode   int `json:"nearPSNode"`
	NearPSDomain int `json:"nearPSDomain"`
}

// Node is a node's free capacity and its labels.
type Node struct {
	Name string
	// Free is allocatable minus the requests of every pod bound to or held for the node.
	Free Resources
	// Capacity is the most the node can ever offer the jobs: allocatable minus the requests
	// of the pods on it that belong to no job (system pods, daemons, plain pods), which the
	// queue cannot wait out. Jobs' pods end and free what they use; these need not. A nil
	// Capacity is not known and counts as unlimited: no job is called unschedulable for
	// lack of room on such a node.
	Capacity Resources
	Labels   map[string]string
	// Leaving is what the node's pods being deleted (evicted victims, finished jobs) ask
	// for: room that frees soon. A preemption counts it as free when it chooses victims.
	Leaving Resources
}

// Terms are the four normalised terms of a job's combined priority, each in [0,1].
type Terms struct {
	User        float64 `json:"user"`
	Job         float64 `json:"job"`
	Wait        float64 `json:"wait"`
	Parallelism float64 `json:"parallelism"`
}

// Weights weigh the terms of the combined priority; valid weights are >= 0 and sum to 1.
type Weights struct {
	User        float64 `json:"user"`
	Job         float64 `json:"job"`
	Wait        float64 `json:"wait"`
	Parallelism float64 `json:"parallelism"`
}

// Policy decides which jobs besides the head of the queue may be admitted.
type Policy string

// The admission policies.
const (
	// PolicyStrict admits jobs strictly in queue order: a job that does not fit stops
	// every job behind it, and the cluster drains for it.
	PolicyStrict Policy = "strict"
	// PolicyReserve sets the head's needs aside when it does not fit; jobs behind it may
	// backfill only into what is left.
	PolicyReserve Policy = "reserve"
	// PolicyBestEffort admits, in queue order, every job that fits.
	PolicyBestEffort Policy = "besteffort"
	// PolicyBackfill admits, in queue order, every job that fits, as besteffort does, until
	// a job that does not fit has waited Model.ReserveAfter (or is starved): the first such
	// job then reserves, as under reserve, and jobs behind it backfill only into what is
	// left. Short waits cost nobody a reservation; a long one ends.
	PolicyBackfill Policy = "backfill"
)

// Model holds every parameter of the combined priority and the admission queue.
type Model struct {
	Weights Weights
	// Tiers maps a tier name to its user priority U in [0,1].
	Tiers map[string]float64
	// UserTiers maps a user to a tier; users not in it get DefaultTier.
	UserTiers   map[string]string
	DefaultTier string
	// PriorityFloor and PriorityCeiling map spec.priority linearly onto J in [0,1].
	PriorityFloor   int32
	PriorityCeiling int32
	// Tau is the time constant of the waiting term W = 1 - exp(-wait/Tau).
	Tau time.Duration
	// MaxGang is nMax of the parallelism term N = log(1+n)/log(1+nMax).
	MaxGang int
	// StarvationBound sends a job that has waited longer than it to the front of the queue.
	StarvationBound time.Duration
	Policy          Policy
	// TurnHold is how long a job that has the turn (State.Previous) keeps it: it is walked
	// right after the jobs gathering at bind, ahead of newcomers of higher P, and its pods
	// keep their planned nodes while those fit. kube-scheduler places an admitted job's
	// pods over a second or so; a plan that moved under them meanwhile would send them
	// where the job no longer fits. 0 keeps no turn.
	TurnHold time.Duration
	// SpreadAfter is how long after its creation a job whose gang one domain of the
	// nearest topology level (a rack) could hold, were it empty, waits for one with room
	// rather than being spread over several: a gang spread over racks runs slower for as
	// long as it runs. The wait ends earlier when a domain frees, and it is taken only
	// while it leaves nothing idle: while the jobs behind it use the room it could run in
	// now spread (else it is spread at once). A domain exists only where nodes carry the
	// level's label. 0 spreads at once; so does the strict policy, where a job that waits
	// stops every job behind it.
	SpreadAfter time.Duration
	// ReserveAfter is how long a job that does not fit waits under the backfill policy
	// before it reserves room (its wait counts from its creation); other policies ignore
	// it. 0 reserves at once, as reserve does.
	ReserveAfter time.Duration

	// Preemption says which waiting jobs may have running jobs evicted for them.
	Preemption PreemptionMode
	// PreemptionMargin: a victim's P plus it is at most the preemptor's P, so two jobs of
	// about the same P never evict each other.
	PreemptionMargin float64
	// MinRunTime is how long a job runs before it may be a victim.
	MinRunTime time.Duration
	// UrgentMinRunTime is how long a job that is not urgent runs before an urgent job may
	// evict it (MinRunTime shields it from the rest). 0: at once, as PriorityClass
	// preemption does.
	UrgentMinRunTime time.Duration
	// ArrivalWindow is how long after its newest pod was created an urgent job, or the
	// job at the head of the queue, still short of pods keeps the room its whole gang
	// needs: no job walked after it takes that room while its pods arrive. 0 keeps none.
	ArrivalWindow time.Duration
	// MaxPreemptions bounds the victim jobs evicted within PreemptionWindow, all
	// preemptors together (State.Preempted counts them).
	MaxPreemptions   int
	PreemptionWindow time.Duration
}

// PreemptionMode says which waiting jobs may have running jobs evicted for them, whole
// gangs of lower combined priority.
type PreemptionMode string

// The preemption modes.
const (
	// PreemptOff: no job preempts; a job waits until running jobs end.
	PreemptOff PreemptionMode = "off"
	// PreemptUrgent: urgent jobs, and jobs waiting past the starvation bound, preempt.
	// An urgent job may evict any running job that is not urgent (Model.UrgentMinRunTime);
	// other preemptors, and urgent ones against urgent victims, only jobs of P
	// PreemptionMargin lower that ran MinRunTime.
	PreemptUrgent PreemptionMode = "urgent"
	// PreemptPriority: besides those, the first job in queue order that does not fit.
	PreemptPriority PreemptionMode = "priority"
)

// Turn is a job's turn as the previous queue gave it (State.Previous).
type Turn struct {
	// Since is when the job got the turn.
	Since time.Time
	// Plan is where that queue planned its pending pods (pod UID -> node).
	Plan map[string]string
}

// State is everything the admission queue is computed from.
type State struct {
	// Jobs are the jobs with at least one pod that is not terminated.
	Jobs []Job
	// Nodes are the schedulable nodes with their free capacity.
	Nodes []Node
	// Topology is the nodes' topology levels (NewNodeIndex over Nodes, in their order),
	// which the placement keeps each gang inside; nil places by node name alone. An index
	// built for other nodes is rebuilt from Nodes' labels over the same levels.
	Topology *NodeIndex
	// CoolDown holds, by job key, the time until which a job may not take the turn
	// (the gate's circuit breaker after a hold timeout).
	CoolDown map[string]time.Time
	// Previous is the queue computed before this one: the jobs it admitted keep their turn
	// for Model.TurnHold. Nil: none (a first queue, or a restart).
	Previous *Queue
	// Preempted is how many victim jobs were evicted within Model.PreemptionWindow.
	Preempted int
	// Protected holds, by job key, the time until which a job is no preemption victim: an
	// eviction of one of its pods was refused (a PodDisruptionBudget), and a gang half
	// evicted is worse than none.
	Protected map[string]time.Time
}

// JobPhase is a job's place in the admission queue.
type JobPhase string

// The job phases.
const (
	// PhaseRunning jobs have at least their minimum bound: further pods pass at once.
	PhaseRunning JobPhase = "Running"
	// PhaseAdmitted jobs have the turn: their pods may be scheduled and their binds gathered.
	PhaseAdmitted JobPhase = "Admitted"
	// PhaseWaiting jobs wait for their turn.
	PhaseWaiting JobPhase = "Waiting"
	// PhaseUnschedulable jobs cannot be placed even if every other job's pods were gone
	// (on the nodes' Capacity): waiting would hold others back for room that cannot come.
	// They take no turn and set nothing aside, under every policy, until the nodes or the
	// pods in no job change.
	PhaseUnschedulable JobPhase = "Unschedulable"
	// PhasePreempting jobs wait while running jobs of lower P, their Victims, are evicted
	// whole to make room for them; that room is set aside for them meanwhile.
	PhasePreempting JobPhase = "Preempting"
)

// Victim is a running job a preempting job has evicted for it.
type Victim struct {
	Key string `json:"job"`
	// P is its combined priority when it started to run (the waiting term stops there).
	P float64 `json:"p"`
	// Pods are its bound pods, all evicted.
	Pods int `json:"pods"`
	// RunMinutes is how long it had run: what its eviction loses, per pod.
	RunMinutes float64 `json:"runMinutes"`
}

// Decision is the admission decision for one job, with every part needed to explain it.
type Decision struct {
	Key   string   `json:"job"`
	Phase JobPhase `json:"phase"`
	// Position is the job's 1-based place in the queue of jobs that may take a turn (0
	// when running or unschedulable).
	Position int     `json:"position"`
	QueueLen int     `json:"queueLength"`
	Terms    Terms   `json:"terms"`
	P        float64 `json:"p"`
	// User is the job's user and UserFrom where it came from (Job.User, Job.UserFrom).
	User     string `json:"user,omitempty"`
	UserFrom string `json:"userFrom,omitempty"`
	// Urgent is Job.Urgent and UrgentFrom how the job was granted it.
	Urgent     bool   `json:"urgent,omitempty"`
	UrgentFrom string `json:"urgentFrom,omitempty"`
	// Arriving is true for a job short of pods that keeps the room its gang needs while
	// its pods arrive (Model.ArrivalWindow).
	Arriving bool `json:"arriving,omitempty"`
	// Starved is true when the job has waited past the starvation bound.
	Starved bool `json:"starved,omitempty"`
	// Repair is true for a job with 0 < bound < minimum, which gets the first turn.
	Repair bool `json:"repair,omitempty"`
	// Gang progress: pods that exist, are bound, are held, and the minimum.
	Pods      int `json:"pods"`
	Bound     int `json:"bound"`
	Held      int `json:"held"`
	MinMember int `json:"minMember"`
	// Ahead is the job this one waits behind, and its P ("" when none).
	Ahead  string  `json:"ahead,omitempty"`
	AheadP float64 `json:"aheadP,omitempty"`
	// Blocker names what keeps a waiting job from the turn, in a few words.
	Blocker string `json:"blocker,omitempty"`
	// CoolingDown is true while the job sits out a cool-down after a hold timeout: a wait
	// that ends on a timer, not with any change in the cluster.
	CoolingDown bool `json:"coolingDown,omitempty"`
	// SizeUnknown is true while the job waits for its gang size to be known (Job.SizeUnknown):
	// it waits for no room and no turn.
	SizeUnknown bool `json:"sizeUnknown,omitempty"`
	// Finished says how the job's workload ended (Job.Finished): a finished job is running,
	// whatever is left of it.
	Finished string `json:"finished,omitempty"`
	// YieldHeld is true for a job whose held binds are to be given back now: its gang
	// cannot gather (what it still needs does not fit), or a gathering job of higher P
	// cannot gather without their room. Admit counts their room as free for the jobs
	// walked after it; the gate answers them with an error the scheduler retries, so the
	// wait ends within a backoff rather than the gate's hold timeout.
	YieldHeld bool `json:"yieldHeld,omitempty"`
	// Reason is the one-sentence explanation that explain, /debug/queue and Events show.
	Reason string `json:"reason"`
	// Wait is, for a job that waits or is unschedulable, the sentence the filter answers:
	// what it waits for, with no position, no P and no free amounts, so that it reads the
	// same until the wait itself changes. kube-scheduler writes the filter's answer into
	// the pod's status when it changes, and that write wakes the parked pod again: a
	// sentence that changed with every move of the queue kept thousands of waiting pods
	// cycling through the scheduler.
	Wait string `json:"wait,omitempty"`
	// Plan is, for an admitted job, where the fit put each of its required pending pods
	// (pod UID -> node). Affinity scores treat planned pods as placed, so that the pods of
	// a gang agree on where to go before any of their binds has reached the extender.
	Plan map[string]string `json:"plan,omitempty"`
	// TurnSince is, for an admitted job, when it got the turn: now, or its TurnSince in
	// State.Previous when it was admitted there.
	TurnSince time.Time `json:"turnSince,omitzero"`
	// Victims are, for a Preempting job, the running jobs evicted for it.
	Victims []Victim `json:"victims,omitempty"`
	// Placement says where the plan puts an admitted job. For a job that reserves, its
	// Level and Domains name the domain of the reservation ("cluster" when it is not kept
	// to one) and its counts what fits of the job now. Zero otherwise.
	Placement Placement `json:"placement,omitzero"`
}
