package priority_test

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cps-extender/cps-extender/priority"
)

func TestRoleString(t *testing.T) {
	tests := []struct {
		name string
		role priority.Role
		want string
	}{
		{"ps", priority.RolePS, "ps"},
		{"chief", priority.RoleChief, "chief"},
		{"worker", priority.RoleWorker, "worker"},
		{"other", priority.RoleOther, "other"},
		{"evaluator", priority.RoleEvaluator, "evaluator"},
		{"out of range", priority.Role(42), "role(42)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.role.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func uids(pods []priority.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.UID
	}
	return out
}

func TestSortPods(t *testing.T) {
	tests := []struct {
		name string
		in   []priority.Pod
		want []string
	}{
		{
			name: "roles in rank order, other with workers",
			in: []priority.Pod{
				mkPod("e", priority.RoleEvaluator, 0).obj(),
				mkPod("w", priority.RoleWorker, 1).obj(),
				mkPod("o", priority.RoleOther, 0).obj(),
				mkPod("c", priority.RoleChief, 0).obj(),
				mkPod("p", priority.RolePS, 0).obj(),
			},
			want: []string{"uid-p", "uid-c", "uid-o", "uid-w", "uid-e"},
		},
		{
			name: "index within role, unknown index last, not first",
			in: []priority.Pod{
				mkPod("w-x", priority.RoleWorker, -1).obj(),
				mkPod("w-10", priority.RoleWorker, 10).obj(),
				mkPod("w-2", priority.RoleWorker, 2).obj(),
				mkPod("w-0", priority.RoleWorker, 0).obj(),
			},
			want: []string{"uid-w-0", "uid-w-2", "uid-w-10", "uid-w-x"},
		},
		{
			name: "name then uid break ties",
			in: []priority.Pod{
				mkPod("b", priority.RoleWorker, -1).obj(),
				mkPod("a", priority.RoleWorker, -1).uid("2").obj(),
				mkPod("a", priority.RoleWorker, -1).uid("1").obj(),
			},
			want: []string{"1", "2", "uid-b"},
		},
		{
			name: "unknown role value ranks with workers",
			in: []priority.Pod{
				mkPod("e", priority.RoleEvaluator, 0).obj(),
				mkPod("z", priority.Role(9), 0).obj(),
				mkPod("w", priority.RoleWorker, 1).obj(),
			},
			want: []string{"uid-z", "uid-w", "uid-e"},
		},
		{name: "empty", in: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := append([]priority.Pod(nil), tt.in...)
			priority.SortPods(pods)
			if diff := cmp.Diff(tt.want, uids(pods)); diff != "" {
				t.Errorf("SortPods order (-want +got):\n%s", diff)
			}
			// Property: any input order gives the same result.
			r := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				shuffled := append([]priority.Pod(nil), tt.in...)
				r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				priority.SortPods(shuffled)
				if diff := cmp.Diff(tt.want, uids(shuffled)); diff != "" {
					t.Fatalf("SortPods of a shuffled input (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestMinMembersAndGangSize(t *testing.T) {
	three := []*podB{mkPod("a", priority.RoleWorker, 0), mkPod("b", priority.RoleWorker, 1), mkPod("c", priority.RoleWorker, 2)}
	tests := []struct {
		name     string
		job      *priority.Job
		wantMin  int
		wantGang int
	}{
		{"min 0 means all pods", ptr(mkJob("ns/a").pods(three...).obj()), 3, 3},
		{"negative min means all pods", ptr(mkJob("ns/a").min(-2).pods(three...).obj()), 3, 3},
		{"min below pods: elastic", ptr(mkJob("ns/a").min(2).pods(three...).obj()), 2, 3},
		{"min above pods: incomplete gang keeps its min", ptr(mkJob("ns/a").min(6).pods(three...).obj()), 6, 6},
		{"no pods", ptr(mkJob("ns/a").obj()), 0, 0},
		{"nil job", nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.job.MinMembers(); got != tt.wantMin {
				t.Errorf("MinMembers() = %d, want %d", got, tt.wantMin)
			}
			if got := tt.job.GangSize(); got != tt.wantGang {
				t.Errorf("GangSize() = %d, want %d", got, tt.wantGang)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
