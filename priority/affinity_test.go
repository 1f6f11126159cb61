package priority

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// affinityPod builds a pod of the test job "ns/a"; its UID is its name.
func affinityPod(name string, role Role, state PodState, node string) Pod {
	return Pod{UID: "uid-" + name, Name: name, Role: role, Index: -1, State: state, Node: node}
}

// affinityWithRequest returns p with request r.
func affinityWithRequest(p Pod, r Resources) Pod {
	p.Request = r
	return p
}

// affinityJob builds the job "ns/a" with pods.
func affinityJob(pods ...Pod) *Job {
	return &Job{Key: "ns/a", Pods: pods}
}

// affinityLabels is the test cluster's topology: n1 and n2 share rack r1, n3 is in another
// rack of the same zone z1, n4 in another zone, n5 has no labels.
var affinityLabels = map[string]map[string]string{
	"n1": {"rack": "r1", "zone": "z1", "region": "eu"},
	"n2": {"rack": "r1", "zone": "z1", "region": "eu"},
	"n3": {"rack": "r2", "zone": "z1", "region": "eu"},
	"n4": {"rack": "r3", "zone": "z2", "region": "eu"},
	"n5": nil,
	"n6": {"rack": "r9", "zone": "z9", "region": "eu"},
}

func affinityLabelsOf(node string) map[string]string { return affinityLabels[node] }

// affinityNodes returns candidates n1..n5 without labels (Score falls back to labelsOf).
func affinityNodes() []Node {
	return []Node{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}, {Name: "n4"}, {Name: "n5"}}
}

// affinityScores returns the integer scores of got by node name.
func affinityScores(got []NodeScore) map[string]int64 {
	m := make(map[string]int64, len(got))
	for _, s := range got {
		m[s.Node] = s.Score
	}
	return m
}

var affinityRackZone = Affinity{Topology: []string{"rack", "zone"}}

func TestAffinityScoreWorker(t *testing.T) {
	worker := affinityPod("w-9", RoleWorker, PodPending, "")
	tests := []struct {
		name     string
		affinity Affinity
		pod      Pod
		job      *Job
		want     map[string]int64
	}{
		{
			name:     "worker on the PS node scores 10, same rack 6, same zone 3, elsewhere 0",
			affinity: affinityRackZone,
			pod:      worker,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodBound, "n1"), worker),
			want:     map[string]int64{"n1": 10, "n2": 6, "n3": 3, "n4": 0, "n5": 0},
		},
		{
			name:     "no topology: only the PS node scores",
			affinity: Affinity{},
			pod:      worker,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodBound, "n1")),
			want:     map[string]int64{"n1": 10, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
		{
			name:     "zone only: the whole zone is one domain",
			affinity: Affinity{Topology: []string{"zone"}},
			pod:      worker,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodBound, "n1")),
			want:     map[string]int64{"n1": 10, "n2": 6, "n3": 6, "n4": 0, "n5": 0},
		},
		{
			name:     "third level scores 0.15 (rounds to 2)",
			affinity: Affinity{Topology: []string{"rack", "zone", "region"}},
			pod:      worker,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodBound, "n1")),
			want:     map[string]int64{"n1": 10, "n2": 6, "n3": 3, "n4": 2, "n5": 0},
		},
		{
			name:     "level order matters: zone listed first is the nearer level",
			affinity: Affinity{Topology: []string{"zone", "region"}},
			pod:      worker,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodBound, "n1")),
			want:     map[string]int64{"n1": 10, "n2": 6, "n3": 6, "n4": 3, "n5": 0},
		},
		{
			name:     "two PS on different zones: each near node gets half",
			affinity: affinityRackZone,
			pod:      worker,
			job: affinityJob(
				affinityPod("ps-0", RolePS, PodBound, "n1"),
				affinityPod("ps-1", RolePS, PodBound, "n4"),
			),
			// n1: (1+0)/2, n2: (0.6+0)/2, n3: (0.3+0)/2 = 0.15, n4: (0+1)/2.
			want: map[string]int64{"n1": 5, "n2": 3, "n3": 2, "n4": 5, "n5": 0},
		},
		{
			name:     "three PS: a node near two of them beats a node near one",
			affinity: affinityRackZone,
			pod:      worker,
			job: affinityJob(
				affinityPod("ps-0", RolePS, PodBound, "n1"),
				affinityPod("ps-1", RolePS, PodBound, "n1"),
				affinityPod("ps-2", RolePS, PodBound, "n4"),
			),
			// n1: 2/3, n2: 1.2/3, n3: 0.6/3, n4: 1/3.
			want: map[string]int64{"n1": 7, "n2": 4, "n3": 2, "n4": 3, "n5": 0},
		},
		{
			name:     "held PS counts as placed",
			affinity: affinityRackZone,
			pod:      worker,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodHeld, "n4")),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 10, "n5": 0},
		},
		{
			name:     "pending PS and held PS without a node do not count: neutral",
			affinity: affinityRackZone,
			pod:      worker,
			job: affinityJob(
				affinityPod("ps-0", RolePS, PodPending, "n1"),
				affinityPod("ps-1", RolePS, PodHeld, ""),
			),
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
		{
			name:     "no placed PS: near the job's placed workers",
			affinity: affinityRackZone,
			pod:      worker,
			job: affinityJob(
				affinityPod("ps-0", RolePS, PodPending, ""),
				affinityPod("w-0", RoleWorker, PodBound, "n3"),
				affinityPod("chief-0", RoleChief, PodHeld, "n3"),
			),
			want: map[string]int64{"n1": 3, "n2": 3, "n3": 10, "n4": 0, "n5": 0},
		},
		{
			name:     "placed PS win over placed workers",
			affinity: affinityRackZone,
			pod:      worker,
			job: affinityJob(
				affinityPod("ps-0", RolePS, PodBound, "n4"),
				affinityPod("w-0", RoleWorker, PodBound, "n3"),
			),
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 10, "n5": 0},
		},
		{
			name:     "nothing placed: neutral",
			affinity: affinityRackZone,
			pod:      worker,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodPending, ""), worker),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
		{
			name:     "job with no pods: neutral",
			affinity: affinityRackZone,
			pod:      worker,
			job:      affinityJob(),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
		{
			name:     "nil job: neutral",
			affinity: affinityRackZone,
			pod:      worker,
			job:      nil,
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
		{
			name:     "the pod itself is not its own neighbour",
			affinity: affinityRackZone,
			pod:      affinityPod("w-0", RoleWorker, PodHeld, "n3"),
			job:      affinityJob(affinityPod("w-0", RoleWorker, PodHeld, "n3")),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
		{
			name:     "chief and evaluator are scored like workers",
			affinity: affinityRackZone,
			pod:      affinityPod("chief-0", RoleChief, PodPending, ""),
			job:      affinityJob(affinityPod("ps-0", RolePS, PodBound, "n2")),
			want:     map[string]int64{"n1": 6, "n2": 10, "n3": 3, "n4": 0, "n5": 0},
		},
		{
			name:     "a PS on a node unknown to labelsOf: only that node scores",
			affinity: affinityRackZone,
			pod:      worker,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodBound, "gone")),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.affinity.NewScorer(tt.pod, tt.job, nil, affinityLabelsOf).Scores(affinityNodes())
			if diff := cmp.Diff(tt.want, affinityScores(got)); diff != "" {
				t.Errorf("Score() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAffinityScoreParts(t *testing.T) {
	approx := cmpopts.EquateApprox(0, 1e-9)
	tests := []struct {
		name string
		pod  Pod
		job  *Job
		want []NodeScore
	}{
		{
			name: "worker: fractions of the PS per level",
			pod:  affinityPod("w-0", RoleWorker, PodPending, ""),
			job: affinityJob(
				affinityPod("ps-0", RolePS, PodBound, "n1"),
				affinityPod("ps-1", RolePS, PodHeld, "n2"),
			),
			want: []NodeScore{
				{Node: "n1", Score: 8, Parts: []ScorePart{{"ps-same-node", 0.5}, {"ps-same-rack", 0.5}, {"ps-same-zone", 0.5}}},
				{Node: "n3", Score: 3, Parts: []ScorePart{{"ps-same-node", 0}, {"ps-same-rack", 0}, {"ps-same-zone", 1}}},
				{Node: "n4", Score: 0, Parts: []ScorePart{{"ps-same-node", 0}, {"ps-same-rack", 0}, {"ps-same-zone", 0}}},
			},
		},
		{
			name: "worker: no PS placed, parts name the workers",
			pod:  affinityPod("w-0", RoleWorker, PodPending, ""),
			job:  affinityJob(affinityPod("w-1", RoleWorker, PodBound, "n3")),
			want: []NodeScore{
				{Node: "n1", Score: 3, Parts: []ScorePart{{"worker-same-node", 0}, {"worker-same-rack", 0}, {"worker-same-zone", 1}}},
				{Node: "n3", Score: 10, Parts: []ScorePart{{"worker-same-node", 1}, {"worker-same-rack", 0}, {"worker-same-zone", 0}}},
				{Node: "n4", Score: 0, Parts: []ScorePart{{"worker-same-node", 0}, {"worker-same-rack", 0}, {"worker-same-zone", 0}}},
			},
		},
		{
			name: "PS: the three terms",
			pod:  affinityWithRequest(affinityPod("ps-1", RolePS, PodPending, ""), Resources{"cpu": 500}),
			job: affinityJob(
				affinityPod("ps-0", RolePS, PodBound, "n1"),
				affinityPod("w-0", RoleWorker, PodBound, "n3"),
				affinityWithRequest(affinityPod("w-1", RoleWorker, PodPending, ""), Resources{"cpu": 1000}),
			),
			want: []NodeScore{
				// 0.6*0 + 0.2*0.3 + 0.2*1 = 0.26
				{Node: "n1", Score: 3, Parts: []ScorePart{{"ps-spread", 0}, {"workers-near", 0.3}, {"room-for-workers", 1}}},
				// 0.6 + 0.2 + 0 = 0.8 (no room after the PS: 1200-500 < 1000)
				{Node: "n3", Score: 8, Parts: []ScorePart{{"ps-spread", 1}, {"workers-near", 1}, {"room-for-workers", 0}}},
				// 0.6 + 0 + 0.2 = 0.8
				{Node: "n4", Score: 8, Parts: []ScorePart{{"ps-spread", 1}, {"workers-near", 0}, {"room-for-workers", 1}}},
			},
		},
		{
			name: "no signal: score 0 and no parts",
			pod:  affinityPod("w-0", RoleWorker, PodPending, ""),
			job:  affinityJob(),
			want: []NodeScore{{Node: "n1"}, {Node: "n3"}, {Node: "n4"}},
		},
	}
	nodes := []Node{
		{Name: "n1", Free: Resources{"cpu": 4000}, Labels: affinityLabels["n1"]},
		{Name: "n3", Free: Resources{"cpu": 1200}, Labels: affinityLabels["n3"]},
		{Name: "n4", Free: Resources{"cpu": 1500}, Labels: affinityLabels["n4"]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := affinityRackZone.NewScorer(tt.pod, tt.job, nil, affinityLabelsOf).Scores(nodes)
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("Score() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAffinityScorePS(t *testing.T) {
	const gi = int64(1) << 30
	ps1 := affinityWithRequest(affinityPod("ps-1", RolePS, PodPending, ""), Resources{"cpu": 500, "memory": gi / 2})
	workerReq := Resources{"cpu": 1000, "memory": gi}
	// ps-0 on n1, w-0 on n2, two workers pending.
	job := affinityJob(
		affinityPod("ps-0", RolePS, PodBound, "n1"),
		affinityPod("w-0", RoleWorker, PodBound, "n2"),
		affinityWithRequest(affinityPod("w-1", RoleWorker, PodPending, ""), workerReq),
		affinityWithRequest(affinityPod("w-2", RoleWorker, PodPending, ""), workerReq),
		ps1,
	)
	nodes := []Node{
		{Name: "n1", Free: Resources{"cpu": 4000, "memory": 8 * gi}}, // room for 3 after the PS: room 1
		{Name: "n2", Free: Resources{"cpu": 1200, "memory": 8 * gi}}, // 700 cpu after the PS: room 0
		{Name: "n3", Free: Resources{"cpu": 2000, "memory": 8 * gi}}, // room for 1 of 2: room 0.5
		{Name: "n4", Free: Resources{"cpu": 8000, "memory": gi}},     // memory short after the PS: room 0
		{Name: "n5"}, // no free capacity
	}
	// workers-near: n1 0.6 (rack of n2), n2 1, n3 0.3 (zone), n4 0, n5 0.
	tests := []struct {
		name     string
		affinity Affinity
		pod      Pod
		job      *Job
		nodes    []Node
		want     map[string]int64
	}{
		{
			name:     "soft: the node with ps-0 is penalised",
			affinity: Affinity{Topology: []string{"rack", "zone"}, PSAntiAffinity: AntiAffinitySoft},
			pod:      ps1,
			job:      job,
			nodes:    nodes,
			// 0.6*spread + 0.2*near + 0.2*room
			want: map[string]int64{"n1": 3, "n2": 8, "n3": 8, "n4": 6, "n5": 6},
		},
		{
			name:     "empty mode is soft",
			affinity: Affinity{Topology: []string{"rack", "zone"}},
			pod:      ps1,
			job:      job,
			nodes:    nodes,
			want:     map[string]int64{"n1": 3, "n2": 8, "n3": 8, "n4": 6, "n5": 6},
		},
		{
			name:     "hard scores like soft",
			affinity: Affinity{Topology: []string{"rack", "zone"}, PSAntiAffinity: AntiAffinityHard},
			pod:      ps1,
			job:      job,
			nodes:    nodes,
			want:     map[string]int64{"n1": 3, "n2": 8, "n3": 8, "n4": 6, "n5": 6},
		},
		{
			name:     "off: no spread, the node with ps-0 and room wins",
			affinity: Affinity{Topology: []string{"rack", "zone"}, PSAntiAffinity: AntiAffinityOff},
			pod:      ps1,
			job:      job,
			nodes:    nodes,
			// (0.2*near + 0.2*room) / 0.4
			want: map[string]int64{"n1": 8, "n2": 5, "n3": 4, "n4": 0, "n5": 0},
		},
		{
			name:     "soft: a held PS is penalised like a bound one",
			affinity: affinityRackZone,
			pod:      affinityPod("ps-1", RolePS, PodPending, ""),
			job: affinityJob(
				affinityPod("ps-0", RolePS, PodHeld, "n3"),
				affinityPod("w-0", RoleWorker, PodHeld, "n3"),
			),
			nodes: affinityNodes(),
			// (0.6*spread + 0.2*near) / 0.8
			want: map[string]int64{"n1": 8, "n2": 8, "n3": 3, "n4": 8, "n5": 8},
		},
		{
			name:     "first PS, nothing else known: neutral",
			affinity: affinityRackZone,
			pod:      affinityPod("ps-0", RolePS, PodPending, ""),
			job:      affinityJob(affinityPod("ps-0", RolePS, PodPending, ""), affinityPod("ps-1", RolePS, PodPending, "")),
			nodes:    affinityNodes(),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
		{
			name:     "nil job: neutral",
			affinity: affinityRackZone,
			pod:      ps1,
			job:      nil,
			nodes:    nodes,
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.affinity.NewScorer(tt.pod, tt.job, nil, affinityLabelsOf).Scores(tt.nodes)
			if diff := cmp.Diff(tt.want, affinityScores(got)); diff != "" {
				t.Errorf("Score() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAffinityScoreRoomForWorkers(t *testing.T) {
	ps := affinityPod("ps-0", RolePS, PodPending, "")
	pending := func(n int, r Resources) []Pod {
		pods := []Pod{ps}
		for i := range n {
			pods = append(pods, affinityWithRequest(affinityPod(fmt.Sprintf("w-%d", i), RoleWorker, PodPending, ""), r))
		}
		return pods
	}
	tests := []struct {
		name  string
		pod   Pod
		pods  []Pod
		nodes []Node
		want  map[string]int64
	}{
		{
			name: "fraction of the pending workers that fit",
			pod:  ps,
			pods: pending(4, Resources{"cpu": 1000}),
			nodes: []Node{
				{Name: "a", Free: Resources{"cpu": 4000}},
				{Name: "b", Free: Resources{"cpu": 2500}},
				{Name: "c", Free: Resources{"cpu": 999}},
				{Name: "d", Free: Resources{"cpu": -5}},
				{Name: "e"},
			},
			want: map[string]int64{"a": 10, "b": 5, "c": 0, "d": 0, "e": 0},
		},
		{
			name: "room is capped at 8 workers",
			pod:  ps,
			pods: pending(20, Resources{"cpu": 1000}),
			nodes: []Node{
				{Name: "a", Free: Resources{"cpu": 20000}},
				{Name: "b", Free: Resources{"cpu": 8000}},
				{Name: "c", Free: Resources{"cpu": 4000}},
			},
			want: map[string]int64{"a": 10, "b": 10, "c": 5},
		},
		{
			name: "every requested resource counts, the largest request per resource",
			pod:  ps,
			pods: []Pod{
				ps,
				affinityWithRequest(affinityPod("w-0", RoleWorker, PodPending, ""), Resources{"cpu": 1000, "nvidia.com/gpu": 1}),
				affinityWithRequest(affinityPod("w-1", RoleWorker, PodPending, ""), Resources{"cpu": 2000, "memory": 0}),
			},
			nodes: []Node{
				{Name: "gpu", Free: Resources{"cpu": 4000, "nvidia.com/gpu": 4}},
				{Name: "gpu-small", Free: Resources{"cpu": 2000, "nvidia.com/gpu": 1}},
				{Name: "cpu", Free: Resources{"cpu": 64000}},
			},
			want: map[string]int64{"gpu": 10, "gpu-small": 5, "cpu": 0},
		},
		{
			name: "the PS's own request is taken first",
			pod:  affinityWithRequest(ps, Resources{"cpu": 2000, "memory": 1 << 30}),
			pods: pending(2, Resources{"cpu": 1000}),
			nodes: []Node{
				{Name: "a", Free: Resources{"cpu": 4000}},
				{Name: "b", Free: Resources{"cpu": 3000}},
				{Name: "c", Free: Resources{"cpu": 1500}},
			},
			want: map[string]int64{"a": 10, "b": 5, "c": 0},
		},
		{
			name:  "workers requesting nothing always fit",
			pod:   ps,
			pods:  pending(3, nil),
			nodes: []Node{{Name: "a"}, {Name: "b", Free: Resources{"cpu": 1}}},
			want:  map[string]int64{"a": 10, "b": 10},
		},
		{
			name: "gated workers are still pending workers",
			pod:  ps,
			pods: []Pod{ps, func() Pod {
				p := affinityWithRequest(affinityPod("w-0", RoleWorker, PodPending, ""), Resources{"cpu": 1000})
				p.Gated = true
				return p
			}()},
			nodes: []Node{{Name: "a", Free: Resources{"cpu": 1000}}, {Name: "b"}},
			want:  map[string]int64{"a": 10, "b": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Affinity{}.NewScorer(tt.pod, affinityJob(tt.pods...), nil, nil).Scores(tt.nodes)
			if diff := cmp.Diff(tt.want, affinityScores(got)); diff != "" {
				t.Errorf("Score() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAffinityScoreEdgeCases(t *testing.T) {
	job := affinityJob(affinityPod("ps-0", RolePS, PodBound, "n1"))
	worker := affinityPod("w-0", RoleWorker, PodPending, "")
	tests := []struct {
		name       string
		affinity   Affinity
		pod        Pod
		job        *Job
		candidates []Node
		labelsOf   func(string) map[string]string
		want       []NodeScore
	}{
		{
			name:     "no candidates",
			affinity: affinityRackZone,
			pod:      worker,
			job:      job,
			want:     []NodeScore{},
		},
		{
			name:       "nil labelsOf and no labels: only the same node scores",
			affinity:   affinityRackZone,
			pod:        worker,
			job:        job,
			candidates: []Node{{Name: "n1"}, {Name: "n2"}},
			want: []NodeScore{
				{Node: "n1", Score: 10, Parts: []ScorePart{{"ps-same-node", 1}, {"ps-same-rack", 0}, {"ps-same-zone", 0}}},
				{Node: "n2", Score: 0, Parts: []ScorePart{{"ps-same-node", 0}, {"ps-same-rack", 0}, {"ps-same-zone", 0}}},
			},
		},
		{
			name:       "candidate labels take precedence over labelsOf",
			affinity:   affinityRackZone,
			pod:        worker,
			job:        job,
			candidates: []Node{{Name: "n4", Labels: map[string]string{"rack": "r1", "zone": "z1"}}},
			labelsOf:   affinityLabelsOf, // says n4 is in r3, z2
			want: []NodeScore{
				{Node: "n4", Score: 6, Parts: []ScorePart{{"ps-same-node", 0}, {"ps-same-rack", 1}, {"ps-same-zone", 1}}},
			},
		},
		{
			name:       "a rack name reused in another zone counts one step (0.3), not a true same rack",
			affinity:   affinityRackZone,
			pod:        worker,
			job:        job,
			candidates: []Node{{Name: "x", Labels: map[string]string{"rack": "r1", "zone": "z2"}}},
			labelsOf:   affinityLabelsOf,
			want: []NodeScore{
				{Node: "x", Score: 3, Parts: []ScorePart{{"ps-same-node", 0}, {"ps-same-rack", 1}, {"ps-same-zone", 0}}},
			},
		},
		{
			name:       "empty label values never match",
			affinity:   Affinity{Topology: []string{"rack"}},
			pod:        worker,
			job:        affinityJob(affinityPod("ps-0", RolePS, PodBound, "x")),
			candidates: []Node{{Name: "y", Labels: map[string]string{"rack": ""}}},
			labelsOf:   func(string) map[string]string { return map[string]string{"rack": ""} },
			want:       []NodeScore{{Node: "y", Score: 0, Parts: []ScorePart{{"ps-same-node", 0}, {"ps-same-rack", 0}}}},
		},
		{
			name:       "duplicate candidates are scored independently",
			affinity:   Affinity{},
			pod:        worker,
			job:        job,
			candidates: []Node{{Name: "n1"}, {Name: "n1"}},
			want: []NodeScore{
				{Node: "n1", Score: 10, Parts: []ScorePart{{"ps-same-node", 1}}},
				{Node: "n1", Score: 10, Parts: []ScorePart{{"ps-same-node", 1}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.affinity.NewScorer(tt.pod, tt.job, nil, tt.labelsOf).Scores(tt.candidates)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Score() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAffinityScoreDeterministic(t *testing.T) {
	pods := []Pod{
		affinityPod("ps-0", RolePS, PodBound, "n1"),
		affinityPod("ps-1", RolePS, PodHeld, "n4"),
		affinityPod("ps-2", RolePS, PodPending, ""),
		affinityPod("w-0", RoleWorker, PodBound, "n2"),
		affinityPod("w-1", RoleWorker, PodHeld, "n3"),
		affinityPod("chief-0", RoleChief, PodBound, "n3"),
		affinityWithRequest(affinityPod("w-2", RoleWorker, PodPending, ""), Resources{"cpu": 1000, "memory": 1 << 30}),
		affinityWithRequest(affinityPod("w-3", RoleWorker, PodPending, ""), Resources{"cpu": 2000, "nvidia.com/gpu": 1}),
		affinityWithRequest(affinityPod("eval-0", RoleEvaluator, PodPending, ""), Resources{"cpu": 500, "memory": 2 << 30}),
	}
	nodes := []Node{
		{Name: "n1", Free: Resources{"cpu": 8000, "memory": 8 << 30, "nvidia.com/gpu": 2}},
		{Name: "n2", Free: Resources{"cpu": 4000, "memory": 8 << 30, "nvidia.com/gpu": 1}},
		{Name: "n3", Free: Resources{"cpu": 2000, "memory": 2 << 30}},
		{Name: "n4", Free: Resources{"cpu": 16000, "memory": 64 << 30, "nvidia.com/gpu": 8}},
		{Name: "n5"},
		{Name: "n6", Free: Resources{"cpu": 16000, "memory": 64 << 30, "nvidia.com/gpu": 8}},
	}
	a := Affinity{Topology: []string{"rack", "zone", "region"}}
	tests := []struct {
		name string
		pod  Pod
	}{
		{name: "worker", pod: affinityPod("w-9", RoleWorker, PodPending, "")},
		{name: "ps", pod: affinityWithRequest(pods[2], Resources{"cpu": 500})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := a.NewScorer(tt.pod, affinityJob(pods...), nil, affinityLabelsOf).Scores(nodes)
			distinct := map[int64]bool{}
			for _, s := range want {
				distinct[s.Score] = true
			}
			if len(distinct) < 3 {
				t.Fatalf("fixture too weak: scores %v", want)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range 50 {
				shuffled := append([]Pod(nil), pods...)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				got := a.NewScorer(tt.pod, affinityJob(shuffled...), nil, affinityLabelsOf).Scores(nodes)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("shuffle %d: Score() differs (-first +shuffled):\n%s", i, diff)
				}
			}
		})
	}
}

func TestAffinityPSConflict(t *testing.T) {
	ps1 := affinityPod("ps-1", RolePS, PodPending, "")
	job := affinityJob(
		affinityPod("ps-0", RolePS, PodBound, "n1"),
		affinityPod("ps-2", RolePS, PodHeld, "n2"),
		affinityPod("w-0", RoleWorker, PodBound, "n3"),
		ps1,
	)
	hard := Affinity{PSAntiAffinity: AntiAffinityHard}
	type result struct {
		Conflict bool
		Reason   string
	}
	tests := []struct {
		name     string
		affinity Affinity
		pod      Pod
		job      *Job
		node     string
		want     result
	}{
		{
			name:     "hard: bound PS on the node",
			affinity: hard,
			pod:      ps1,
			job:      job,
			node:     "n1",
			want:     result{true, "node n1 already hosts ps ns/ps-0 of job ns/a (hard PS anti-affinity)"},
		},
		{
			name:     "hard: held PS on the node",
			affinity: hard,
			pod:      ps1,
			job:      job,
			node:     "n2",
			want:     result{true, "node n2 already hosts ps ns/ps-2 of job ns/a (hard PS anti-affinity)"},
		},
		{
			name:     "hard: only a worker on the node",
			affinity: hard,
			pod:      ps1,
			job:      job,
			node:     "n3",
			want:     result{},
		},
		{
			name:     "hard: empty node",
			affinity: hard,
			pod:      ps1,
			job:      job,
			node:     "n4",
			want:     result{},
		},
		{
			name:     "hard: several PS there, the first by name is named",
			affinity: hard,
			pod:      ps1,
			job: affinityJob(
				affinityPod("ps-3", RolePS, PodBound, "n1"),
				affinityPod("ps-0", RolePS, PodBound, "n1"),
			),
			node: "n1",
			want: result{true, "node n1 already hosts ps ns/ps-0 of job ns/a (hard PS anti-affinity)"},
		},
		{
			name:     "hard: the pod itself held there is no conflict",
			affinity: hard,
			pod:      affinityPod("ps-0", RolePS, PodHeld, "n1"),
			job:      job,
			node:     "n1",
			want:     result{},
		},
		{
			name:     "hard: a worker pod is never in conflict",
			affinity: hard,
			pod:      affinityPod("w-1", RoleWorker, PodPending, ""),
			job:      job,
			node:     "n1",
			want:     result{},
		},
		{
			name:     "hard: a pending PS with a node does not count",
			affinity: hard,
			pod:      ps1,
			job:      affinityJob(affinityPod("ps-0", RolePS, PodPending, "n1")),
			node:     "n1",
			want:     result{},
		},
		{
			name:     "hard: job key without namespace",
			affinity: hard,
			pod:      ps1,
			job:      &Job{Key: "a", Pods: []Pod{affinityPod("ps-0", RolePS, PodBound, "n1")}},
			node:     "n1",
			want:     result{true, "node n1 already hosts ps ps-0 of job a (hard PS anti-affinity)"},
		},
		{
			name:     "hard: a PS without a name is named by its UID",
			affinity: hard,
			pod:      ps1,
			job:      affinityJob(Pod{UID: "u-7", Role: RolePS, State: PodBound, Node: "n1"}),
			node:     "n1",
			want:     result{true, "node n1 already hosts ps ns/u-7 of job ns/a (hard PS anti-affinity)"},
		},
		{
			name:     "hard: nil job",
			affinity: hard,
			pod:      ps1,
			node:     "n1",
			want:     result{},
		},
		{
			name:     "soft: never a conflict",
			affinity: Affinity{PSAntiAffinity: AntiAffinitySoft},
			pod:      ps1,
			job:      job,
			node:     "n1",
			want:     result{},
		},
		{
			name:     "default mode: never a conflict",
			affinity: Affinity{},
			pod:      ps1,
			job:      job,
			node:     "n1",
			want:     result{},
		},
		{
			name:     "off: never a conflict",
			affinity: Affinity{PSAntiAffinity: AntiAffinityOff},
			pod:      ps1,
			job:      job,
			node:     "n1",
			want:     result{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conflict, reason := tt.affinity.PSConflict(tt.pod, tt.job, tt.node)
			if diff := cmp.Diff(tt.want, result{conflict, reason}); diff != "" {
				t.Errorf("PSConflict() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAffinityValidate(t *testing.T) {
	tests := []struct {
		name string
		a    Affinity
		want []string
	}{
		{name: "zero value", a: Affinity{}},
		{name: "default", a: DefaultAffinity()},
		{
			name: "all modes and two levels",
			a:    Affinity{Topology: []string{"rack", "topology.kubernetes.io/zone"}, PSAntiAffinity: AntiAffinityHard},
		},
		{name: "off", a: Affinity{PSAntiAffinity: AntiAffinityOff}},
		{name: "soft", a: Affinity{PSAntiAffinity: AntiAffinitySoft}},
		{
			name: "unknown mode",
			a:    Affinity{PSAntiAffinity: "strict"},
			want: []string{`affinity.psAntiAffinity: unknown mode "strict" (want "off", "soft" or "hard")`},
		},
		{
			name: "every problem at once",
			a:    Affinity{Topology: []string{"rack", "", "rack", " ", "kubernetes.io/hostname", "rack"}, PSAntiAffinity: "Soft"},
			want: []string{
				`affinity.psAntiAffinity: unknown mode "Soft" (want "off", "soft" or "hard")`,
				`affinity.topology[1]: empty label key`,
				`affinity.topology[2]: duplicate label key "rack" (also at [0])`,
				`affinity.topology[3]: empty label key`,
				`affinity.topology[4]: "kubernetes.io/hostname" is the implicit node level; list only domains larger than a node`,
				`affinity.topology[5]: duplicate label key "rack" (also at [0])`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, err := range tt.a.Validate() {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
			if tt.want == nil && errors.Join(tt.a.Validate()...) != nil {
				t.Errorf("Validate() = non-nil for a valid config")
			}
		})
	}
}

func TestAffinityDefault(t *testing.T) {
	tests := []struct {
		name string
		got  func() Affinity
		want Affinity
	}{
		{
			name: "zone level, soft",
			got:  DefaultAffinity,
			want: Affinity{Topology: []string{"topology.kubernetes.io/zone"}, PSAntiAffinity: AntiAffinitySoft},
		},
		{
			name: "a caller's change does not leak into the next default",
			got: func() Affinity {
				DefaultAffinity().Topology[0] = "changed"
				return DefaultAffinity()
			},
			want: Affinity{Topology: []string{"topology.kubernetes.io/zone"}, PSAntiAffinity: AntiAffinitySoft},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got()); diff != "" {
				t.Errorf("DefaultAffinity() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAffinityNodeScoreString(t *testing.T) {
	tests := []struct {
		name string
		s    NodeScore
		want string
	}{
		{
			name: "with parts",
			s:    NodeScore{Node: "n-3", Score: 8, Parts: []ScorePart{{"ps-same-node", 1}, {"ps-same-rack", 0}}},
			want: "n-3=8 (ps-same-node 1.00, ps-same-rack 0.00)",
		},
		{name: "no parts", s: NodeScore{Node: "n-1"}, want: "n-1=0"},
		{
			name: "computed",
			s:    affinityRackZone.NewScorer(affinityPod("w-0", RoleWorker, PodPending, ""), affinityJob(affinityPod("ps-0", RolePS, PodBound, "n1"), affinityPod("ps-1", RolePS, PodBound, "n4")), nil, affinityLabelsOf).Scores([]Node{{Name: "n2"}})[0],
			want: "n2=3 (ps-same-node 0.00, ps-same-rack 0.50, ps-same-zone 0.50)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.s.String()); diff != "" {
				t.Errorf("String() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkAffinityScore scores 5000 candidate nodes (125 racks of 40 in 5 zones) for a job
// with 2 PS and 6 workers placed and 4 workers pending.
func BenchmarkAffinityScore(b *testing.B) {
	const nodes = 5000
	labels := make(map[string]map[string]string, nodes)
	candidates := make([]Node, nodes)
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		l := map[string]string{
			"rack":                        fmt.Sprintf("rack-%03d", i/40),
			"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i/1000),
		}
		labels[name] = l
		candidates[i] = Node{
			Name:   name,
			Free:   Resources{"cpu": int64(1000 * (i % 17)), "memory": int64(i%9) << 30, "pods": 110},
			Labels: l,
		}
	}
	labelsOf := func(n string) map[string]string { return labels[n] }
	req := Resources{"cpu": 2000, "memory": 4 << 30, "pods": 1}
	pods := []Pod{
		affinityPod("ps-0", RolePS, PodBound, "node-0001"),
		affinityPod("ps-1", RolePS, PodHeld, "node-2042"),
	}
	for i := range 6 {
		pods = append(pods, affinityPod(fmt.Sprintf("w-%d", i), RoleWorker, PodBound, fmt.Sprintf("node-%04d", i*7+3)))
	}
	for i := 6; i < 10; i++ {
		pods = append(pods, affinityWithRequest(affinityPod(fmt.Sprintf("w-%d", i), RoleWorker, PodPending, ""), req))
	}
	job := affinityJob(pods...)
	a := Affinity{Topology: []string{"rack", "topology.kubernetes.io/zone"}}
	for _, bc := range []struct {
		name string
		pod  Pod
	}{
		{name: "worker", pod: affinityPod("w-9", RoleWorker, PodPending, "")},
		{name: "ps", pod: affinityWithRequest(affinityPod("ps-2", RolePS, PodPending, ""), req)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := a.NewScorer(bc.pod, job, nil, labelsOf).Scores(candidates); len(got) != nodes {
					b.Fatalf("got %d scores", len(got))
				}
			}
		})
	}
}

// TestAffinityPSConflictQualifiedName: a pod name that already carries its namespace (as the
// extender's view gives them) is not qualified twice.
func TestAffinityPSConflictQualifiedName(t *testing.T) {
	job := &Job{Key: "ns/a", Pods: []Pod{
		{UID: "u0", Name: "ns/a-ps-0", Role: RolePS, State: PodBound, Node: "n1"},
		{UID: "u1", Name: "ns/a-ps-1", Role: RolePS},
	}}
	_, reason := Affinity{PSAntiAffinity: AntiAffinityHard}.PSConflict(job.Pods[1], job, "n1")
	if want := "node n1 already hosts ps ns/a-ps-0 of job ns/a (hard PS anti-affinity)"; reason != want {
		t.Errorf("reason %q, want %q", reason, want)
	}
}

func TestKeyIndex(t *testing.T) {
	for _, n := range []int{0, 1, keyIndexScan, keyIndexScan + 1, 3 * keyIndexScan} {
		t.Run(fmt.Sprint(n, " keys"), func(t *testing.T) {
			var x keyIndex
			for i := range n {
				if got := x.insert(fmt.Sprint("k", i)); got != i {
					t.Fatalf("insert(k%d) = %d, want %d", i, got, i)
				}
			}
			for i := range n {
				key := fmt.Sprint("k", i)
				if got := x.find(key); got != i {
					t.Errorf("find(%s) = %d, want %d", key, got, i)
				}
				if got := x.insert(key); got != i {
					t.Errorf("insert(%s) again = %d, want %d", key, got, i)
				}
			}
			if got := x.find("missing"); got != -1 {
				t.Errorf("find(missing) = %d, want -1", got)
			}
			if len(x.keys) != n {
				t.Errorf("%d keys kept, want %d", len(x.keys), n)
			}
		})
	}
}

// TestAffinityScoreManyTargets: with more placed PS nodes and zones than keyIndex scans,
// the scores still follow the closeness formula, computed here pod by pod.
func TestAffinityScoreManyTargets(t *testing.T) {
	const nodes, zones = 3 * keyIndexScan, 2 * keyIndexScan
	labels := map[string]map[string]string{}
	var candidates []Node
	var pods []Pod
	for i := range nodes {
		name := fmt.Sprint("n", i)
		labels[name] = map[string]string{"zone": fmt.Sprint("z", i%zones)}
		candidates = append(candidates, Node{Name: name})
		if i%4 != 3 { // some nodes host no PS
			pods = append(pods, affinityPod(fmt.Sprint("ps-", i), RolePS, PodBound, name))
			if i%5 == 0 { // and some host two
				pods = append(pods, affinityPod(fmt.Sprint("ps-", i, "b"), RolePS, PodHeld, name))
			}
		}
	}
	candidates = append(candidates, Node{Name: "elsewhere", Labels: map[string]string{"zone": "z-none"}})
	worker := affinityPod("w-0", RoleWorker, PodPending, "")
	a := Affinity{Topology: []string{"zone"}}
	got := a.NewScorer(worker, affinityJob(append(pods, worker)...), nil, func(n string) map[string]string { return labels[n] }).Scores(candidates)
	distinct := map[int64]bool{}
	for i, c := range candidates {
		var sum float64
		for _, p := range pods {
			switch {
			case p.Node == c.Name:
				sum++
			case labels[p.Node]["zone"] == labels[c.Name]["zone"] || labels[p.Node]["zone"] == c.Labels["zone"]:
				sum += closenessLevel0
			}
		}
		want := toScore(sum / float64(len(pods)))
		distinct[want] = true
		if got[i].Score != want {
			t.Errorf("%s: score %d, want %d", c.Name, got[i].Score, want)
		}
	}
	if len(distinct) < 2 {
		t.Fatalf("fixture too weak: every node scores the same")
	}
}
