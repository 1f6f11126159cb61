//go:build load

package load

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/load/fixture"
)

// TestBacklogAtStart: BACKLOG_JOBS gangs of BACKLOG_PODS_PER_JOB pods (1 PS, the rest
// workers; 120 x 24 = 2880 pods by default) are pending before kube-scheduler starts, on
// BACKLOG_NODES kwok nodes of 32 CPU (100), where they all fit at once. kube-scheduler reads
// them in its informer's order, so every gang's pods are spread over the whole backlog.
// The same backlog is scheduled by plain kube-scheduler (the shipped config without the
// extenders block) and through cps-extender, each on an empty cluster; the time counts from
// the scheduler's start (it is ready) to the last binding. Through cps-extender every gang
// must be bound whole, with no hold timeout, in at most 1.2 times the plain time. The nodes
// carry rack and zone labels (4 zones of 25).
func TestBacklogAtStart(t *testing.T) {
	backlogAtStart(t, false)
}

// TestBacklogAtStartUnlabelled is TestBacklogAtStart on nodes without rack or zone labels,
// with the shipped affinity.topology (the zone level): 100 gangs fit a node each, the other
// 20 only spread over what those leave (7 CPU a node). Before, every unlabelled node counted
// as a zone, and those 20 waited model.spreadAfter (5 min) for a node to empty: 5 min 4 s
// against plain kube-scheduler's 56 s, twice in two runs.
func TestBacklogAtStartUnlabelled(t *testing.T) {
	backlogAtStart(t, true)
}

func backlogAtStart(t *testing.T, unlabelled bool) {
	spec := fixture.Spec{
		Nodes: envInt(t, "BACKLOG_NODES", 100), Jobs: envInt(t, "BACKLOG_JOBS", 120),
		PodsPerJob: envInt(t, "BACKLOG_PODS_PER_JOB", 24), KwokNodes: true, SchedulerName: "cps-scheduler",
		NoTopology: unlabelled,
	}
	cp := framework.Start(t, framework.Options{})
	createNodes(t, cp.Client, fixture.Nodes(spec))
	addr := framework.FreeAddr(t)
	ext := startExtender(t, cp, addr, "")

	took := map[string]time.Duration{}
	for _, run := range []struct {
		name, namespace string
		extender        bool
	}{
		{"plain kube-scheduler", "plain", false},
		{"cps-extender", "cps", true},
	} {
		spec := spec
		spec.Namespace = run.namespace
		pods := fixture.Pods(spec)
		if _, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: run.namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createPods(t, cp.Client, pods)
		binds := watchBindings(t, cp.Client, run.namespace)
		before, failedBefore := extenderHoldTimeouts(t, ext), extenderLogCount(t, ext, `"msg":"bind failed"`)
		sched := cp.StartScheduler(t, shippedSchedulerConfig(t, cp, "http://"+addr+"/scheduler", run.extender))
		start := time.Now()
		first, last := binds.waitAll(t, len(pods), 10*time.Minute)
		if err := sched.Stop(); err != nil {
			t.Logf("stopping kube-scheduler: %v", err)
		}
		took[run.name] = last.Sub(start)
		t.Logf("%s: %d pods of %d gangs bound %v after the scheduler started (first to last binding %v)",
			run.name, len(pods), spec.Jobs, last.Sub(start).Round(time.Millisecond), last.Sub(first).Round(time.Millisecond))
		if run.extender {
			if n := extenderHoldTimeouts(t, ext) - before; n != 0 {
				t.Errorf("%d hold timeouts", n)
			}
			t.Logf("binds answered with an error (held past gate.maxHold, or refused): %d", extenderLogCount(t, ext, `"msg":"bind failed"`)-failedBefore)
			worst, partial := binds.partialGangs(spec)
			t.Logf("the longest time a gang was partly bound: %v", worst.Round(time.Millisecond))
			if partial > 0 {
				t.Errorf("%d gangs were partly bound for more than 5s", partial)
			}
		}
		deleteAll(t, cp.Client, run.namespace)
	}
	ratio := took["cps-extender"].Seconds() / took["plain kube-scheduler"].Seconds()
	t.Logf("backlog of %d x %d pods on %d nodes: cps-extender %v, plain kube-scheduler %v: %.2fx",
		spec.Jobs, spec.PodsPerJob, spec.Nodes, took["cps-extender"].Round(time.Millisecond), took["plain kube-scheduler"].Round(time.Millisecond), ratio)
	if ratio > 1.2 {
		t.Errorf("cps-extender took %.2fx the time of plain kube-scheduler; want at most 1.2x", ratio)
	}
}

// partialGangs returns the longest time between the first and the last binding of one
// gang, and how many gangs took longer than 5 s: the time a gang's Bindings take to post.
func (b *bindings) partialGangs(spec fixture.Spec) (time.Duration, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	byJob := map[string][2]time.Time{}
	for name, at := range b.at {
		job := name[:strings.LastIndex(name[:strings.LastIndex(name, "-")], "-")] // <job>-<role>-<i>
		span, ok := byJob[job]
		if !ok || at.Before(span[0]) {
			span[0] = at
		}
		if !ok || at.After(span[1]) {
			span[1] = at
		}
		byJob[job] = span
	}
	var worst time.Duration
	partial := 0
	for _, span := range byJob {
		d := span[1].Sub(span[0])
		worst = max(worst, d)
		if d > 5*time.Second {
			partial++
		}
	}
	return worst, partial
}

// extenderHoldTimeouts counts the gate's hold timeouts in the extender's log so far.
func extenderHoldTimeouts(t *testing.T, ext *framework.Process) int {
	t.Helper()
	return extenderLogCount(t, ext, `"msg":"hold timeout"`)
}

// extenderLogCount counts the extender's log lines so far that contain substr.
func extenderLogCount(t *testing.T, ext *framework.Process, substr string) int {
	t.Helper()
	out, err := ext.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(out), substr)
}

// shippedSchedulerConfig is scheduler-config/kube-scheduler.yaml as shipped, its client
// limits included, with only the kubeconfig, leader election and the extender URL set; with
// extender false, without its extenders block.
func shippedSchedulerConfig(t *testing.T, cp *framework.ControlPlane, extenderURL string, extender bool) []byte {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "scheduler-config", "kube-scheduler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(raw)
	for _, r := range [][2]string{
		{"kubeconfig: /etc/kubernetes/scheduler.conf", "kubeconfig: " + cp.Kubeconfig},
		{"leaderElect: true", "leaderElect: false"},
		{"urlPrefix: http://127.0.0.1:8888/scheduler", "urlPrefix: " + extenderURL},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("scheduler-config/kube-scheduler.yaml no longer contains %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	if !extender {
		cfg = cfg[:strings.Index(cfg, "\nextenders:")] + "\n"
	}
	return []byte(cfg)
}
