package priority_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

func TestFit(t *testing.T) {
	ps := func(i int, r priority.Resources) priority.Pod {
		return mkPod("a-ps-"+strconv.Itoa(i), priority.RolePS, i).req(r).obj()
	}
	w := func(i int, r priority.Resources) priority.Pod {
		return mkPod("a-w-"+strconv.Itoa(i), priority.RoleWorker, i).req(r).obj()
	}
	tests := []struct {
		name  string
		nodes []priority.Node
		pods  []priority.Pod
		want  priority.FitResult
	}{
		{
			name:  "first fit in node name order, not input order",
			nodes: []priority.Node{node("n2", res(4000, 0)), node("n1", res(4000, 0))},
			pods:  []priority.Pod{w(0, res(1000, 0))},
			want:  priority.FitResult{OK: true, Placement: map[string]string{"uid-a-w-0": "n1"}},
		},
		{
			name:  "every resource on the same node: cpu here, memory there is no fit",
			nodes: []priority.Node{node("n1", res(8000, 1*gi)), node("n2", res(2000, 16*gi))},
			pods:  []priority.Pod{w(0, res(4000, 4*gi))},
			want: priority.FitResult{Placement: map[string]string{},
				Blocker: "worker a-w-0 needs cpu 4000m, memory 4Gi on one node; no node has all of it free"},
		},
		{
			name:  "multi-resource fit picks the node that has both",
			nodes: []priority.Node{node("n1", res(8000, 1*gi)), node("n2", res(2000, 16*gi)), node("n3", res(4000, 4*gi))},
			pods:  []priority.Pod{w(0, res(4000, 4*gi))},
			want:  priority.FitResult{OK: true, Placement: map[string]string{"uid-a-w-0": "n3"}},
		},
		{
			name:  "fits in total but not node by node",
			nodes: []priority.Node{node("n1", res(4000, 0)), node("n2", res(4000, 0)), node("n3", res(4000, 0))},
			pods:  []priority.Pod{w(0, res(6000, 0)), w(1, res(6000, 0))},
			want: priority.FitResult{Placement: map[string]string{},
				Blocker: "worker a-w-0 needs cpu 6000m on a node; the most free on any node is 4000m"},
		},
		{
			name:  "gang runs out node by node; the pods that fit are reported",
			nodes: []priority.Node{node("n1", res(5000, 0)), node("n2", res(5000, 0))},
			pods:  []priority.Pod{w(0, res(3000, 0)), w(1, res(3000, 0)), w(2, res(3000, 0))},
			want: priority.FitResult{Placement: map[string]string{"uid-a-w-0": "n1", "uid-a-w-1": "n2"},
				Blocker: "worker a-w-2 needs cpu 3000m on a node; the most free on any node is 2000m"},
		},
		{
			name: "extended resource: a node without it has none",
			nodes: []priority.Node{
				node("n1", res(8000, 8*gi)),
				node("n2", res(8000, 8*gi, "nvidia.com/gpu", 2)),
			},
			pods: []priority.Pod{w(0, res(1000, gi, "nvidia.com/gpu", 1)), w(1, res(1000, gi, "nvidia.com/gpu", 1))},
			want: priority.FitResult{OK: true, Placement: map[string]string{"uid-a-w-0": "n2", "uid-a-w-1": "n2"}},
		},
		{
			name:  "extended resource short",
			nodes: []priority.Node{node("n1", res(8000, 0, "nvidia.com/gpu", 2)), node("n2", res(8000, 0, "nvidia.com/gpu", 1))},
			pods:  []priority.Pod{w(0, res(1000, 0, "nvidia.com/gpu", 4))},
			want: priority.FitResult{Placement: map[string]string{},
				Blocker: "worker a-w-0 needs nvidia.com/gpu 4 on a node; the most free on any node is 2"},
		},
		{
			name:  "each pod takes a pod slot where nodes count them",
			nodes: []priority.Node{node("n1", res(8000, 0, "pods", 1)), node("n2", res(8000, 0, "pods", 3))},
			pods:  []priority.Pod{w(0, res(1000, 0)), w(1, res(1000, 0))},
			want:  priority.FitResult{OK: true, Placement: map[string]string{"uid-a-w-0": "n1", "uid-a-w-1": "n2"}},
		},
		{
			name:  "no pod slots left",
			nodes: []priority.Node{node("n1", res(8000, 0, "pods", 0))},
			pods:  []priority.Pod{w(0, res(1000, 0))},
			want: priority.FitResult{Placement: map[string]string{},
				Blocker: "worker a-w-0 needs pods 1 on a node; the most free on any node is 0"},
		},
		{
			name:  "a pods entry in a request is ignored: a pod is one pod",
			nodes: []priority.Node{node("n1", res(0, 0, "pods", 1))},
			pods:  []priority.Pod{w(0, res(0, 0, "pods", 5))},
			want:  priority.FitResult{OK: true, Placement: map[string]string{"uid-a-w-0": "n1"}},
		},
		{
			name:  "empty request fits a node with nothing listed, even an overcommitted resource",
			nodes: []priority.Node{node("n1", res(-500, 0))},
			pods:  []priority.Pod{w(0, nil)},
			want:  priority.FitResult{OK: true, Placement: map[string]string{"uid-a-w-0": "n1"}},
		},
		{
			name:  "PS spread over nodes; workers go to PS nodes before earlier nodes",
			nodes: []priority.Node{node("a", res(1000, 0)), node("b", res(8000, 0)), node("c", res(8000, 0))},
			pods:  []priority.Pod{w(0, res(500, 0)), w(1, res(500, 0)), ps(1, res(2000, 0)), ps(0, res(2000, 0))},
			want: priority.FitResult{OK: true, Placement: map[string]string{
				"uid-a-ps-0": "b", "uid-a-ps-1": "c", "uid-a-w-0": "b", "uid-a-w-1": "b",
			}},
		},
		{
			name:  "worker takes the next PS node when the first is full",
			nodes: []priority.Node{node("a", res(8000, 0)), node("b", res(2500, 0)), node("c", res(8000, 0))},
			pods: []priority.Pod{
				ps(0, res(2000, 0)), ps(1, res(2000, 0)), ps(2, res(2000, 0)),
				w(0, res(1000, 0)), w(1, res(6000, 0)), w(2, res(1000, 0)),
			},
			// ps: a, b, c; w-0 to a (first PS node); w-1 to a (5000 left? no: 6000 > 5000) -> c;
			// w-2 to a.
			want: priority.FitResult{OK: true, Placement: map[string]string{
				"uid-a-ps-0": "a", "uid-a-ps-1": "b", "uid-a-ps-2": "c",
				"uid-a-w-0": "a", "uid-a-w-1": "c", "uid-a-w-2": "a",
			}},
		},
		{
			name:  "PS shares a node only when no other node fits",
			nodes: []priority.Node{node("a", res(8000, 0)), node("b", res(1000, 0))},
			pods:  []priority.Pod{ps(0, res(2000, 0)), ps(1, res(2000, 0))},
			want:  priority.FitResult{OK: true, Placement: map[string]string{"uid-a-ps-0": "a", "uid-a-ps-1": "a"}},
		},
		{
			name:  "chief and evaluator take the first fit",
			nodes: []priority.Node{node("a", res(1000, 0)), node("b", res(8000, 0))},
			pods: []priority.Pod{
				mkPod("a-eval", priority.RoleEvaluator, 0).req(res(500, 0)).obj(),
				mkPod("a-chief", priority.RoleChief, 0).req(res(800, 0)).obj(),
			},
			// The chief is placed first and takes a; the evaluator no longer fits there.
			want: priority.FitResult{OK: true, Placement: map[string]string{"uid-a-chief": "a", "uid-a-eval": "b"}},
		},
		{
			name:  "no nodes",
			nodes: nil,
			pods:  []priority.Pod{ps(0, res(1000, 0))},
			want:  priority.FitResult{Placement: map[string]string{}, Blocker: "ps a-ps-0 cannot be placed: there are no nodes"},
		},
		{
			name:  "no pods fit trivially",
			nodes: []priority.Node{node("a", res(1000, 0))},
			pods:  nil,
			want:  priority.FitResult{OK: true, Placement: map[string]string{}},
		},
		{
			name:  "memory shown with a binary suffix, first short resource named",
			nodes: []priority.Node{node("a", res(1000, 512*mi))},
			pods:  []priority.Pod{mkPod("x", priority.RoleOther, -1).req(res(2000, 3*gi/2)).obj()},
			want: priority.FitResult{Placement: map[string]string{},
				Blocker: "pod x needs cpu 2000m on a node; the most free on any node is 1000m"},
		},
		{
			name:  "memory short",
			nodes: []priority.Node{node("a", res(4000, 512*mi))},
			pods:  []priority.Pod{mkPod("x", priority.RoleOther, -1).req(res(2000, 3*gi/2)).obj()},
			want: priority.FitResult{Placement: map[string]string{},
				Blocker: "pod x needs memory 1536Mi on a node; the most free on any node is 512Mi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := priority.Fit(tt.nodes, tt.pods)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Fit() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitDoesNotMutateInputs(t *testing.T) {
	nodes := []priority.Node{node("b", res(4000, 4*gi, "pods", 3)), node("a", res(2000, 8*gi))}
	pods := []priority.Pod{
		mkPod("w-1", priority.RoleWorker, 1).req(res(1000, gi)).obj(),
		mkPod("ps-0", priority.RolePS, 0).req(res(1000, gi)).obj(),
		mkPod("w-0", priority.RoleWorker, 0).req(res(1000, gi)).obj(),
	}
	wantNodes := []priority.Node{node("b", res(4000, 4*gi, "pods", 3)), node("a", res(2000, 8*gi))}
	wantPods := slices.Clone(pods)
	for i := range wantPods {
		wantPods[i].Request = res(1000, gi)
	}
	res := priority.Fit(nodes, pods)
	if !res.OK {
		t.Fatalf("Fit() = %+v, want OK", res)
	}
	if diff := cmp.Diff(wantNodes, nodes); diff != "" {
		t.Errorf("Fit changed its nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantPods, pods); diff != "" {
		t.Errorf("Fit changed its pods (-want +got):\n%s", diff)
	}
}

// refFit is a deliberately plain restatement of Fit's rules: linear scans over maps.
func refFit(nodes []priority.Node, pods []priority.Pod) priority.FitResult {
	ns := slices.Clone(nodes)
	slices.SortStableFunc(ns, func(a, b priority.Node) int { return cmpStrings(a.Name, b.Name) })
	free := make([]priority.Resources, len(ns))
	for i, n := range ns {
		free[i] = priority.Resources{}
		for k, v := range n.Free {
			free[i][k] = v
		}
	}
	ps := slices.Clone(pods)
	priority.SortPods(ps)
	fits := func(i int, p priority.Pod) bool {
		for k, v := range p.Request {
			if k != "pods" && v > 0 && free[i][k] < v {
				return false
			}
		}
		if slots, ok := free[i]["pods"]; ok && slots < 1 {
			return false
		}
		return true
	}
	out := priority.FitResult{OK: true, Placement: map[string]string{}}
	psNode := map[int]bool{}
	for _, p := range ps {
		at := -1
		switch p.Role {
		case priority.RolePS:
			for i := range ns {
				if !psNode[i] && fits(i, p) {
					at = i
					break
				}
			}
		case priority.RoleWorker:
			for i := range ns {
				if psNode[i] && fits(i, p) {
					at = i
					break
				}
			}
		}
		if at < 0 {
			for i := range ns {
				if fits(i, p) {
					at = i
					break
				}
			}
		}
		if at < 0 {
			out.OK = false
			continue
		}
		for k, v := range p.Request {
			if k != "pods" && v > 0 {
				free[at][k] -= v
			}
		}
		if _, ok := free[at]["pods"]; ok {
			free[at]["pods"]--
		}
		if p.Role == priority.RolePS {
			psNode[at] = true
		}
		out.Placement[p.UID] = ns[at].Name
	}
	return out
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// randomCluster makes nodes and one job's pods with a mix of resources and roles, sized so
// that some placements fail.
func randomCluster(r *rand.Rand, maxNodes, maxPods int) ([]priority.Node, []priority.Pod) {
	nodes := make([]priority.Node, 1+r.IntN(maxNodes))
	for i := range nodes {
		free := res(int64(r.IntN(17))*500, int64(r.IntN(9))*gi)
		if r.IntN(3) == 0 {
			free["nvidia.com/gpu"] = int64(r.IntN(4))
		}
		if r.IntN(2) == 0 {
			free["pods"] = int64(r.IntN(4))
		}
		nodes[i] = node("n"+strconv.Itoa(i), free)
	}
	roles := []priority.Role{priority.RolePS, priority.RoleChief, priority.RoleWorker, priority.RoleWorker, priority.RoleOther, priority.RoleEvaluator}
	pods := make([]priority.Pod, 1+r.IntN(maxPods))
	for i := range pods {
		req := res(int64(r.IntN(9))*500, int64(r.IntN(5))*gi)
		if r.IntN(4) == 0 {
			req["nvidia.com/gpu"] = int64(r.IntN(3))
		}
		pods[i] = mkPod("p"+strconv.Itoa(i), roles[r.IntN(len(roles))], r.IntN(4)-1).req(req).obj()
	}
	return nodes, pods
}

func TestFitMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	failed := 0
	for i := range 2000 {
		nodes, pods := randomCluster(r, 40, 25)
		want := refFit(nodes, pods)
		got := priority.Fit(nodes, pods)
		if !want.OK {
			failed++
			if got.Blocker == "" {
				t.Fatalf("case %d: Fit failed without a blocker", i)
			}
		}
		got.Blocker = ""
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("case %d: Fit differs from the reference (-want +got):\n%s\nnodes %v\npods %v", i, diff, nodes, pods)
		}
	}
	// The generator must exercise both outcomes, or the comparison proves little.
	if failed < 200 || failed > 1800 {
		t.Errorf("%d of 2000 random cases did not fit; the generator is unbalanced", failed)
	}
}

func TestFitOrderIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for i := range 300 {
		nodes, pods := randomCluster(r, 30, 20)
		want := priority.Fit(nodes, pods)
		for range 5 {
			n2, p2 := slices.Clone(nodes), slices.Clone(pods)
			r.Shuffle(len(n2), func(a, b int) { n2[a], n2[b] = n2[b], n2[a] })
			r.Shuffle(len(p2), func(a, b int) { p2[a], p2[b] = p2[b], p2[a] })
			if diff := cmp.Diff(want, priority.Fit(n2, p2)); diff != "" {
				t.Fatalf("case %d: Fit depends on input order (-first +shuffled):\n%s", i, diff)
			}
		}
	}
}
