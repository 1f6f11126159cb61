package view

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cps-extender/cps-extender/extender/config"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// TestIndexJobGroupsFollowEvents applies random pod events (adds, binds, job changes,
// deletions in progress, completions, exempt namespaces, removals) and checks after each
// that the index's per-job groups hold exactly the counted pods, each at its slot.
func TestIndexJobGroupsFollowEvents(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cfg := &viewConfig{gang: config.DefaultConfig().Gang}
	x := newViewIndex()
	x.cfg = cfg
	pods := loadfixture.Pods(loadfixture.Spec{Jobs: 6, PodsPerJob: 4})
	live := map[string]*corev1.Pod{}
	for step := range 3000 {
		p := pods[r.IntN(len(pods))].DeepCopy()
		if cur, ok := live[p.Name]; ok {
			p = cur.DeepCopy()
		}
		switch r.IntN(7) {
		case 0:
			x.deletePod(p)
			delete(live, p.Name)
			check(t, x, step)
			continue
		case 1:
			p.Spec.NodeName = "node-" + string(rune('a'+r.IntN(3)))
		case 2:
			p.Labels[loadfixture.JobLabel] = "job-" + string(rune('a'+r.IntN(3)))
		case 3:
			now := metav1.Now()
			p.DeletionTimestamp = &now
		case 4:
			p.Status.Phase = corev1.PodSucceeded
		case 5:
			if r.IntN(2) == 0 {
				p.Namespace = "kube-system"
			}
		}
		x.setPod(p, cfg)
		live[p.Name] = p
		check(t, x, step)
	}
}

// check compares the index's groups with the groups worked out from its records afresh.
func check(t *testing.T, x *viewIndex, step int) {
	t.Helper()
	want := map[string][]*podRecord{}
	for _, r := range x.pods {
		if r.counted {
			want[r.jobKey()] = append(want[r.jobKey()], r)
		}
	}
	total := 0
	for key, g := range x.jobs {
		if g.key != key {
			t.Fatalf("step %d: group %q filed under %q", step, g.key, key)
		}
		for i, r := range g.pods {
			if r.group != g || r.slot != i {
				t.Fatalf("step %d: pod %s at slot %d of %s records group %p slot %d", step, r.nsName, i, key, r.group, r.slot)
			}
		}
		got, exp := slices.Clone(g.pods), want[key]
		byName := func(a, b *podRecord) int { return strings.Compare(a.nsName, b.nsName) }
		slices.SortFunc(got, byName)
		slices.SortFunc(exp, byName)
		if !slices.Equal(got, exp) {
			t.Fatalf("step %d: job %s holds %d pods, want %d", step, key, len(got), len(exp))
		}
		total += len(g.pods)
	}
	if len(want) != len(x.jobs) || total != x.grouped {
		t.Fatalf("step %d: %d groups holding %d (counted %d), want %d groups", step, len(x.jobs), total, x.grouped, len(want))
	}
	idx, err := x.records(x.cfg, nil, recordsFor{all: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range idx.jobs {
		n += len(g.pods)
	}
	if n != total || len(idx.jobs) != len(x.jobs) {
		t.Fatalf("step %d: records copied %d pods in %d jobs, want %d in %d", step, n, len(idx.jobs), total, len(x.jobs))
	}
}
