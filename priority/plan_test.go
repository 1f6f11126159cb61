package priority

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScoresWithAPlan(t *testing.T) {
	ps := Pod{UID: "ps", Name: "ps-0", Role: RolePS, Request: Resources{"cpu": 1000}}
	w0 := Pod{UID: "w0", Name: "w-0", Role: RoleWorker, Request: Resources{"cpu": 1000}}
	w1 := Pod{UID: "w1", Name: "w-1", Role: RoleWorker, Request: Resources{"cpu": 1000}}
	nodes := []Node{{Name: "n1", Free: Resources{"cpu": 8000}}, {Name: "n2", Free: Resources{"cpu": 8000}}, {Name: "n3", Free: Resources{"cpu": 8000}}}
	scoreOf := func(s []NodeScore) map[string]int64 {
		out := map[string]int64{}
		for _, n := range s {
			out[n.Node] = n.Score
		}
		return out
	}
	tests := []struct {
		name string
		pod  Pod
		plan map[string]string
		want map[string]int64
	}{
		{
			name: "no plan: nothing placed, every node neutral",
			pod:  w0,
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 0},
		},
		{
			name: "a worker follows its PS's planned node before the PS is bound",
			pod:  w1,
			plan: map[string]string{"ps": "n2"},
			want: map[string]int64{"n1": 0, "n2": 10, "n3": 0},
		},
		{
			name: "the pod's own planned node gets the top score",
			pod:  w0,
			plan: map[string]string{"ps": "n2", "w0": "n3"},
			want: map[string]int64{"n1": 0, "n2": 10, "n3": 10},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &Job{Key: "ns/a", Pods: []Pod{ps, w0, w1}}
			got := Affinity{}.NewScorer(tt.pod, job, tt.plan, nil).Scores(nodes)
			if diff := cmp.Diff(tt.want, scoreOf(got)); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
			for _, p := range job.Pods {
				if p.State != PodPending || p.Node != "" {
					t.Errorf("the job was changed: %+v", p)
				}
			}
		})
	}
}

// TestScorerMatchesScores: node by node, Score and ScoreAt give the scores
// Scores gives, for PS and worker-side pods, with and without a plan, in every
// anti-affinity mode, with candidates that carry their labels and ones that do not.
func TestScorerMatchesScores(t *testing.T) {
	pods := []Pod{
		affinityPod("ps-0", RolePS, PodBound, "n1"),
		affinityPod("ps-1", RolePS, PodHeld, "n4"),
		affinityWithRequest(affinityPod("ps-2", RolePS, PodPending, ""), Resources{"cpu": 500}),
		affinityPod("w-0", RoleWorker, PodBound, "n2"),
		affinityPod("chief-0", RoleChief, PodHeld, "n3"),
		affinityWithRequest(affinityPod("w-2", RoleWorker, PodPending, ""), Resources{"cpu": 1000, "memory": 1 << 30}),
		affinityWithRequest(affinityPod("w-3", RoleWorker, PodPending, ""), Resources{"cpu": 2000, "nvidia.com/gpu": 1}),
	}
	onlyPending := []Pod{pods[2], pods[5], pods[6]}
	nodes := []Node{
		{Name: "n1", Free: Resources{"cpu": 8000, "memory": 8 << 30, "nvidia.com/gpu": 2}},
		{Name: "n2", Free: Resources{"cpu": 4000, "memory": 8 << 30, "nvidia.com/gpu": 1}, Labels: affinityLabels["n2"]},
		{Name: "n3", Free: Resources{"cpu": 2000, "memory": 2 << 30}},
		{Name: "n4", Free: Resources{"cpu": 16000, "memory": 64 << 30, "nvidia.com/gpu": 8}},
		{Name: "n5"},
		{Name: "n6", Free: Resources{"cpu": 16000, "memory": 64 << 30, "nvidia.com/gpu": 8}, Labels: affinityLabels["n6"]},
		{Name: "unknown"},
	}
	plan := map[string]string{"uid-ps-2": "n6", "uid-w-2": "n3", "uid-w-3": "n1"}
	tests := []struct {
		name string
		pods []Pod
		pod  Pod
		plan map[string]string
	}{
		{name: "worker, placed PS", pods: pods, pod: pods[5]},
		{name: "worker, placed PS, planned", pods: pods, pod: pods[5], plan: plan},
		{name: "worker, nothing placed", pods: onlyPending, pod: pods[6]},
		{name: "worker, nothing placed but the plan", pods: onlyPending, pod: pods[6], plan: plan},
		{name: "worker in no plan entry", pods: pods, pod: affinityPod("w-9", RoleWorker, PodPending, ""), plan: plan},
		{name: "ps, placed PS and workers", pods: pods, pod: pods[2]},
		{name: "ps, planned", pods: pods, pod: pods[2], plan: plan},
		{name: "ps, nothing placed", pods: onlyPending, pod: pods[2]},
		{name: "ps, nothing placed but the plan", pods: onlyPending, pod: pods[2], plan: plan},
	}
	affinities := map[string]Affinity{
		"none":           {},
		"rack-zone":      affinityRackZone,
		"rack-zone-off":  {Topology: []string{"rack", "zone"}, PSAntiAffinity: AntiAffinityOff},
		"zone-region-hd": {Topology: []string{"zone", "region"}, PSAntiAffinity: AntiAffinityHard},
	}
	for _, tt := range tests {
		for aname, a := range affinities {
			t.Run(tt.name+"/"+aname, func(t *testing.T) {
				job := affinityJob(tt.pods...)
				want := a.NewScorer(tt.pod, job, tt.plan, affinityLabelsOf).Scores(nodes)
				scorer := a.NewScorer(tt.pod, job, tt.plan, affinityLabelsOf)
				for i := range nodes {
					if got := scorer.Score(&nodes[i]); got != want[i].Score {
						t.Errorf("node %s: Score %d, Scores %d (%s)", nodes[i].Name, got, want[i].Score, want[i])
					}
				}
				// The same through a NodeIndex of the candidates.
				if !scorer.On(NewNodeIndex(nodes, a.Topology, affinityLabelsOf)) {
					t.Fatal("On refused an index of the scorer's own topology")
				}
				for i := range nodes {
					if got := scorer.ScoreAt(i, &nodes[i]); got != want[i].Score {
						t.Errorf("node %s: ScoreAt %d, Scores %d (%s)", nodes[i].Name, got, want[i].Score, want[i])
					}
				}
			})
		}
	}
	t.Run("no job", func(t *testing.T) {
		scorer := affinityRackZone.NewScorer(pods[5], nil, plan, affinityLabelsOf)
		for i := range nodes {
			if got := scorer.Score(&nodes[i]); got != 0 {
				t.Errorf("node %s: %d, want 0", nodes[i].Name, got)
			}
		}
	})
}

// TestScorerOnIndexRefusesOtherTopology: an index built for other levels is not used.
func TestScorerOnIndexRefusesOtherTopology(t *testing.T) {
	job := affinityJob(affinityPod("ps-0", RolePS, PodBound, "n1"))
	scorer := affinityRackZone.NewScorer(affinityPod("w-0", RoleWorker, PodPending, ""), job, nil, affinityLabelsOf)
	for _, topology := range [][]string{nil, {"zone"}, {"zone", "rack"}} {
		if scorer.On(NewNodeIndex(affinityNodes(), topology, affinityLabelsOf)) {
			t.Errorf("On accepted an index of %v for a scorer of %v", topology, affinityRackZone.Topology)
		}
	}
	if scorer.On(nil) {
		t.Error("On accepted no index")
	}
}

// TestScoreAtMatchesScoreOnRandomClusters: on random clusters, jobs and plans, scoring
// through a NodeIndex gives every node the score Score gives it from its labels.
func TestScoreAtMatchesScoreOnRandomClusters(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	levels := []string{"rack", "zone", "region"}
	for round := range 300 {
		topology := levels[:rng.IntN(len(levels)+1)]
		a := Affinity{Topology: topology, PSAntiAffinity: []AntiAffinityMode{AntiAffinityOff, AntiAffinitySoft, AntiAffinityHard}[rng.IntN(3)]}
		nodes := make([]Node, 1+rng.IntN(40))
		labels := map[string]map[string]string{}
		for i := range nodes {
			name := fmt.Sprintf("n%d", i)
			l := map[string]string{}
			for _, key := range levels {
				if rng.IntN(5) > 0 { // some nodes lack a level; some values are empty
					l[key] = fmt.Sprintf("%s-%d", key, rng.IntN(4))[:len(key)+1+rng.IntN(2)]
				}
			}
			labels[name] = l
			nodes[i] = Node{Name: name, Free: Resources{"cpu": int64(rng.IntN(8000))}}
			if rng.IntN(3) > 0 {
				nodes[i].Labels = l
			}
		}
		labelsOf := func(n string) map[string]string { return labels[n] }
		var pods []Pod
		plan := map[string]string{}
		for k := range 1 + rng.IntN(12) {
			role := []Role{RolePS, RoleWorker, RoleChief}[rng.IntN(3)]
			p := Pod{UID: fmt.Sprintf("u%d", k), Name: fmt.Sprintf("p%d", k), Role: role, Index: -1, Request: Resources{"cpu": int64(1 + rng.IntN(2000))}}
			switch rng.IntN(4) {
			case 0: // pending
			case 1:
				p.State, p.Node = PodBound, fmt.Sprintf("n%d", rng.IntN(len(nodes)+3)) // some nodes are not candidates
			case 2:
				p.State, p.Node = PodHeld, fmt.Sprintf("n%d", rng.IntN(len(nodes)))
			case 3:
				plan[p.UID] = fmt.Sprintf("n%d", rng.IntN(len(nodes)))
			}
			pods = append(pods, p)
		}
		job := affinityJob(pods...)
		pod := pods[rng.IntN(len(pods))]
		index := NewNodeIndex(nodes, topology, labelsOf)
		scorer := a.NewScorer(pod, job, plan, labelsOf)
		indexed := a.NewScorer(pod, job, plan, labelsOf)
		if !indexed.On(index) {
			t.Fatalf("round %d: On refused its own topology", round)
		}
		for i := range nodes {
			if want, got := scorer.Score(&nodes[i]), indexed.ScoreAt(i, &nodes[i]); got != want {
				t.Fatalf("round %d, %s, pod %s (%s), node %s: ScoreAt %d, Score %d", round, a.PSAntiAffinity, pod.Name, pod.Role, nodes[i].Name, got, want)
			}
		}
	}
}
