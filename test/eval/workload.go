package eval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Scale is how much faster than simulated time a run goes: one simulated minute per real
// second.
const Scale = 60

// Real converts a simulated duration to the real duration a run waits for it.
func Real(sim time.Duration) time.Duration { return sim / Scale }

// Sim converts a measured real duration to simulated time.
func Sim(real time.Duration) time.Duration { return real * Scale }

// Minutes renders a simulated duration in minutes.
func Minutes(sim time.Duration) float64 { return sim.Minutes() }

// Tier names, highest first, as the extender's model knows them.
const (
	TierGold   = "gold"
	TierSilver = "silver"
	TierBronze = "bronze"
)

// Tiers lists the tiers, highest first.
var Tiers = []string{TierGold, TierSilver, TierBronze}

// User is a workload user: a name, a tier, and a weight (its share of submissions).
type User struct {
	Name   string
	Tier   string
	Weight float64
}

// Users are the workload's users. A few users submit most jobs (as in both traces), and the
// heavy submitters are not the top tier: bronze users submit 7/16 of the jobs, gold 3/16.
var Users = []User{
	{"ana", TierGold, 2}, {"ben", TierGold, 1},
	{"cai", TierSilver, 3}, {"dee", TierSilver, 2}, {"eli", TierSilver, 1},
	{"fay", TierBronze, 4}, {"gus", TierBronze, 2}, {"hal", TierBronze, 1},
}

// NamespacePrefix names a user's namespace: the jobs of user u run in NamespacePrefix+u,
// "team-ana", as tenants have them (a namespace per team, which the cluster's admins label
// with its user). The extender takes a job's user from its namespace, not from the pods.
const NamespacePrefix = "team-"

// NamespaceOf is the namespace of a user's jobs.
func NamespaceOf(user string) string { return NamespacePrefix + user }

// Namespaces are the workload's namespaces, one per user, in the order of Users.
func Namespaces() []string {
	out := make([]string, len(Users))
	for i, u := range Users {
		out[i] = NamespaceOf(u.Name)
	}
	return out
}

// PriorityClass is a Kubernetes PriorityClass the workload uses.
type PriorityClass struct {
	Name  string
	Value int32
	// Share is the fraction of non-urgent jobs in this class.
	Share float64
}

// UrgentClass is the class of urgent jobs: the extender's priority ceiling, so that the
// PriorityClass-only setups see urgency too (a user of plain priorities would express it so).
var UrgentClass = PriorityClass{Name: "eval-urgent", Value: 1000000}

// PriorityClasses are the classes of non-urgent jobs, highest first.
var PriorityClasses = []PriorityClass{
	{Name: "eval-high", Value: 900000, Share: 0.2},
	{Name: "eval-normal", Value: 500000, Share: 0.5},
	{Name: "eval-low", Value: 100000, Share: 0.3},
}

// Pod shapes. A worker holds one GPU (most PAI and Philly instances ask for at most one
// GPU); a PS holds none but more CPU.
const (
	WorkerCPUMilli = 2000
	WorkerMemMi    = 8192
	WorkerGPU      = 1
	PSCPUMilli     = 4000
	PSMemMi        = 8192
)

// Node shape: 8 GPUs (a common GPU server), 24 CPU, 96 GiB.
const (
	NodeCPU   = 24
	NodeMemGi = 96
	NodeGPU   = 8
)

// weighted is a value with a probability weight.
type weighted struct {
	value  int
	weight float64
}

// workerCounts: most PS/worker jobs are small, a few percent are large (PAI 2020 task table:
// worker instance counts are heavy-tailed; Philly: jobs of 16+ GPUs are rare but hold a large
// share of GPU time).
var workerCounts = []weighted{{2, 0.35}, {4, 0.25}, {8, 0.20}, {16, 0.12}, {32, 0.08}}

// psCounts: one PS is most common, up to 4 (PAI 2020), never more than half the workers.
var psCounts = []weighted{{1, 0.5}, {2, 0.3}, {3, 0.1}, {4, 0.1}}

// UrgentShare is the fraction of urgent jobs.
const UrgentShare = 0.1

// Params shape a generated workload. All durations are simulated time.
type Params struct {
	Name  string
	Seed  uint64
	Jobs  int
	Nodes int
	Racks int
	// MeanGap is the mean time between submission events (exponential: Poisson arrivals).
	MeanGap time.Duration
	// MeanBatch is the mean number of jobs per submission event (geometric, at least 1):
	// users submit sweeps, several jobs at once.
	MeanBatch float64
	// OpeningBurst jobs of 32 workers are submitted together at time 0 (0: none): a burst
	// whose combined demand exceeds the cluster, the contended case of the deadlock claim.
	OpeningBurst int
	// Base durations are log-normal with this median and sigma, clamped to [MinDuration,
	// MaxDuration] (both traces: durations span orders of magnitude, median tens of minutes).
	MedianDuration time.Duration
	DurationSigma  float64
	MinDuration    time.Duration
	MaxDuration    time.Duration
	// Deadline stops a run: jobs not done by then count as incomplete.
	Deadline time.Duration
}

// Small is the workload of the end-to-end test: 16 nodes in 4 racks (128 GPUs), 28 jobs over
// about 25 simulated minutes, opening with 5 jobs of 32 workers (160 GPUs).
func Small() Params {
	return Params{
		Name: "small", Seed: 8, Jobs: 28, Nodes: 16, Racks: 4,
		MeanGap: 2 * time.Minute, MeanBatch: 2, OpeningBurst: 5,
		MedianDuration: 8 * time.Minute, DurationSigma: 0.8,
		MinDuration: 3 * time.Minute, MaxDuration: 25 * time.Minute,
		Deadline: 150 * time.Minute,
	}
}

// Medium is the workload of `make eval`: 32 nodes in 8 racks (256 GPUs), 120 jobs over about
// 40 simulated minutes in batches (no opening burst: contention comes from the load, above
// the cluster's capacity while jobs arrive, and from batches that happen to be large).
func Medium() Params {
	return Params{
		Name: "medium", Seed: 2020, Jobs: 120, Nodes: 32, Racks: 8,
		MeanGap: time.Minute, MeanBatch: 2.5,
		MedianDuration: 12 * time.Minute, DurationSigma: 0.9,
		MinDuration: 3 * time.Minute, MaxDuration: 45 * time.Minute,
		Deadline: 240 * time.Minute,
	}
}

// Large is the longer workload of `make eval EVAL_SIZE=large`: 64 nodes in 8 racks (512 GPUs),
// 300 jobs over about an hour, at medium's load per GPU (twice the nodes, arrivals twice as
// often), so that waits come from the same contention over a longer queue.
func Large() Params {
	return Params{
		Name: "large", Seed: 4040, Jobs: 300, Nodes: 64, Racks: 8,
		MeanGap: 30 * time.Second, MeanBatch: 2.5,
		MedianDuration: 12 * time.Minute, DurationSigma: 0.9,
		MinDuration: 3 * time.Minute, MaxDuration: 45 * time.Minute,
		Deadline: 360 * time.Minute,
	}
}

// Sized is the workload of the given size: small, medium or large.
func Sized(name string) (Params, error) {
	switch name {
	case "small":
		return Small(), nil
	case "medium":
		return Medium(), nil
	case "large":
		return Large(), nil
	}
	return Params{}, fmt.Errorf("size %q: want small, medium or large", name)
}

// Seeded is p for the i-th seed of an evaluation over several seeds: Seed + i, so that seed 0
// is p itself and a run on one seed stays comparable with earlier ones.
func (p Params) Seeded(i int) Params {
	p.Seed += uint64(i)
	return p
}

// Job is one generated PS/worker job.
type Job struct {
	Name          string
	User          string
	Tier          string
	PriorityClass string
	Priority      int32
	Urgent        bool
	PS            int
	Workers       int
	// Arrival is when the job is submitted, from the start of the run.
	Arrival time.Duration
	// Base is the run time with every worker beside a PS (factor 1).
	Base time.Duration
}

// Namespace is the namespace of the job's pods (and of its Workload and PodGroup under
// native gang scheduling): its user's.
func (j Job) Namespace() string { return NamespaceOf(j.User) }

// Key identifies the job in a run, as the extender keys it: namespace/name.
func (j Job) Key() string { return j.Namespace() + "/" + j.Name }

// Size is the number of pods, which is also the gang minimum.
func (j Job) Size() int { return j.PS + j.Workers }

// GPUs is the job's GPU demand.
func (j Job) GPUs() int { return j.Workers * WorkerGPU }

// SizeBucket groups gang sizes for the report: "3-5", "6-12", "13-36".
func (j Job) SizeBucket() string {
	switch n := j.Size(); {
	case n <= 5:
		return "gang 3-5"
	case n <= 12:
		return "gang 6-12"
	default:
		return "gang 13-36"
	}
}

// Workload is a generated workload: the cluster shape and the jobs by arrival.
type Workload struct {
	Params Params
	Jobs   []Job
}

// Generate draws a workload from p; the same p gives the same workload.
func Generate(p Params) Workload {
	rng := rand.New(rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15))
	var jobs []Job
	add := func(at time.Duration, workers int) {
		j := Job{Name: fmt.Sprintf("job-%03d", len(jobs)), Arrival: at}
		u := pickUser(rng)
		j.User, j.Tier = u.Name, u.Tier
		if rng.Float64() < UrgentShare {
			j.Urgent, j.PriorityClass, j.Priority = true, UrgentClass.Name, UrgentClass.Value
		} else {
			c := pickClass(rng)
			j.PriorityClass, j.Priority = c.Name, c.Value
		}
		if workers == 0 {
			workers = pick(rng, workerCounts)
		}
		j.Workers = workers
		j.PS = min(pick(rng, psCounts), max(1, workers/2))
		j.Base = logNormal(rng, p)
		jobs = append(jobs, j)
	}
	for range min(p.OpeningBurst, p.Jobs) {
		add(0, 32)
	}
	at := time.Duration(0)
	for len(jobs) < p.Jobs {
		at += time.Duration(rng.ExpFloat64() * float64(p.MeanGap)).Round(time.Second)
		batch := 1
		for rng.Float64() > 1/max(p.MeanBatch, 1) { // geometric with mean MeanBatch
			batch++
		}
		for range min(batch, p.Jobs-len(jobs)) {
			add(at, 0)
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Arrival < jobs[b].Arrival })
	return Workload{Params: p, Jobs: jobs}
}

func pick(rng *rand.Rand, table []weighted) int {
	total := 0.0
	for _, w := range table {
		total += w.weight
	}
	x := rng.Float64() * total
	for _, w := range table {
		if x < w.weight {
			return w.value
		}
		x -= w.weight
	}
	return table[len(table)-1].value
}

func pickUser(rng *rand.Rand) User {
	table := make([]weighted, len(Users))
	for i, u := range Users {
		table[i] = weighted{i, u.Weight}
	}
	return Users[pick(rng, table)]
}

func pickClass(rng *rand.Rand) PriorityClass {
	table := make([]weighted, len(PriorityClasses))
	for i, c := range PriorityClasses {
		table[i] = weighted{i, c.Share}
	}
	return PriorityClasses[pick(rng, table)]
}

func logNormal(rng *rand.Rand, p Params) time.Duration {
	d := float64(p.MedianDuration) * math.Exp(p.DurationSigma*rng.NormFloat64())
	d = min(max(d, float64(p.MinDuration)), float64(p.MaxDuration))
	return time.Duration(d).Round(time.Second)
}

// UserTiers maps every workload user to its tier, for the extender's model.userTiers.
func UserTiers() map[string]string {
	out := make(map[string]string, len(Users))
	for _, u := range Users {
		out[u.Name] = u.Tier
	}
	return out
}

// ClassOf names the report group of a job's priority: urgent, or its class without the prefix.
func (j Job) ClassOf() string {
	if j.Urgent {
		return "urgent"
	}
	return j.PriorityClass
}
