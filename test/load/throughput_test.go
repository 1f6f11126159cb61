//go:build load

package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/load/fixture"
)

// The scheduler's API client limits in both runs, well above the binding rates reached.
const (
	schedulerQPS   = 500
	schedulerBurst = 1000
)

// TestThroughput measures kube-scheduler binding a backlog of PS/worker jobs (1+3, 2+8 and
// 4+16 pods) on THROUGHPUT_NODES kwok nodes (1000), once through cps-extender and once
// through a no-op extender that has the same four verbs (filter passes every node,
// prioritize scores 0, bind posts the Binding, preempt keeps every candidate), with the
// same scheduler config, in the same control plane. Each run starts on an empty cluster
// (the previous run's pods are deleted first) with the scheduler running; the backlog is
// then created, 4 pods at a time. It reports pods/s of each, first to last binding, and the
// ratio.
func TestThroughput(t *testing.T) {
	nodeCount := envInt(t, "THROUGHPUT_NODES", 1000)
	scale := envInt(t, "THROUGHPUT_JOBS_PER_SIZE", 60)
	cp := framework.Start(t, framework.Options{})
	createNodes(t, cp.Client, fixture.Nodes(fixture.Spec{Nodes: nodeCount, KwokNodes: true}))

	addr := framework.FreeAddr(t)
	startExtender(t, cp, addr, "")
	noop := httptest.NewServer(noopExtender(cp.Client))
	t.Cleanup(noop.Close)

	runs := []struct{ name, namespace, url string }{
		{"no-op extender", "noop", noop.URL + "/scheduler"},
		{"cps-extender", "cps", "http://" + addr + "/scheduler"},
	}
	rates := map[string]float64{}
	for _, run := range runs {
		var pods []*corev1.Pod
		for _, size := range []struct{ ps, pods int }{{1, 4}, {2, 10}, {4, 20}} {
			pods = append(pods, fixture.Pods(fixture.Spec{
				Jobs: scale, PodsPerJob: size.pods, PS: size.ps, Namespace: run.namespace,
				JobPrefix: fmt.Sprintf("j%d", size.pods), SchedulerName: "cps-scheduler",
			})...)
		}
		if _, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: run.namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binds := watchBindings(t, cp.Client, run.namespace)
		sched := cp.StartScheduler(t, schedulerConfig(t, cp, run.url))
		// The backlog arrives while the scheduler runs, a few jobs at a time, faster than
		// it is bound; see the README's known limits for a backlog already there when
		// kube-scheduler starts.
		createAll(t, "pods", pods, 4, func(ctx context.Context, p *corev1.Pod) error {
			_, err := cp.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
		first, last := binds.waitAll(t, len(pods), 10*time.Minute)
		if err := sched.Stop(); err != nil {
			t.Logf("stopping kube-scheduler: %v", err)
		}
		rate := float64(len(pods)-1) / last.Sub(first).Seconds()
		rates[run.name] = rate
		t.Logf("%s: %d pods of %d jobs bound in %v (first to last binding): %.1f pods/s",
			run.name, len(pods), 3*scale, last.Sub(first).Round(time.Millisecond), rate)
		deleteAll(t, cp.Client, run.namespace)
	}
	ratio := rates["cps-extender"] / rates["no-op extender"]
	t.Logf("throughput on %d nodes: cps-extender %.1f pods/s, no-op extender %.1f pods/s, ratio %.2f",
		nodeCount, rates["cps-extender"], rates["no-op extender"], ratio)
}

// schedulerConfig is scheduler-config/kube-scheduler.yaml as shipped with the kubeconfig,
// the API client limits, leader election and the extender URL set for this run.
func schedulerConfig(t *testing.T, cp *framework.ControlPlane, extenderURL string) []byte {
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
		{"kubeconfig: /etc/kubernetes/scheduler.conf", fmt.Sprintf("kubeconfig: %s\n  qps: %d\n  burst: %d", cp.Kubeconfig, schedulerQPS, schedulerBurst)},
		{"leaderElect: true", "leaderElect: false"},
		{"urlPrefix: http://127.0.0.1:8888/scheduler", "urlPrefix: " + extenderURL},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("scheduler-config/kube-scheduler.yaml no longer contains %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	return []byte(cfg)
}

// noopExtender answers the four kube-scheduler verbs without any logic.
func noopExtender(c kubernetes.Interface) http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /scheduler/filter", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer(w, &extenderv1.ExtenderFilterResult{NodeNames: args.NodeNames, Nodes: args.Nodes, FailedNodes: extenderv1.FailedNodesMap{}})
	})
	mux.HandleFunc("POST /scheduler/prioritize", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.NodeNames == nil {
			http.Error(w, fmt.Sprintf("want node names: %v", err), http.StatusBadRequest)
			return
		}
		scores := make(extenderv1.HostPriorityList, len(*args.NodeNames))
		for i, n := range *args.NodeNames {
			scores[i].Host = n
		}
		answer(w, scores)
	})
	mux.HandleFunc("POST /scheduler/bind", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderBindingArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: args.PodName, Namespace: args.PodNamespace, UID: args.PodUID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: args.Node},
		}
		result := &extenderv1.ExtenderBindingResult{}
		if err := c.CoreV1().Pods(args.PodNamespace).Bind(r.Context(), b, metav1.CreateOptions{}); err != nil {
			result.Error = err.Error()
		}
		answer(w, result)
	})
	mux.HandleFunc("POST /scheduler/preempt", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderPreemptionArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer(w, &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: args.NodeNameToMetaVictims})
	})
	return mux
}

// bindings records when each pod of a namespace was first seen bound.
type bindings struct {
	mu    sync.Mutex
	at    map[string]time.Time
	first time.Time
	last  time.Time
}

// watchBindings starts an informer on the namespace's pods and records bindings.
func watchBindings(t *testing.T, c kubernetes.Interface, namespace string) *bindings {
	t.Helper()
	b := &bindings{at: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	seen := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, done := b.at[pod.Name]; done {
			return
		}
		b.at[pod.Name] = now
		if b.first.IsZero() {
			b.first = now
		}
		b.last = now
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return b
}

// waitAll waits until n pods are bound and returns the first and last binding times.
func (b *bindings) waitAll(t *testing.T, n int, timeout time.Duration) (time.Time, time.Time) {
	t.Helper()
	framework.WaitFor(t, timeout, fmt.Sprintf("%d pods bound", n), func() (bool, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.at) < n {
			return false, fmt.Errorf("%d of %d bound", len(b.at), n)
		}
		return true, nil
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.first, b.last
}

// deleteAll deletes the namespace's pods at once and waits until they are gone, so the
// next run starts on an empty cluster.
func deleteAll(t *testing.T, c kubernetes.Interface, namespace string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	if err := c.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, 5*time.Minute, "pods of "+namespace+" deleted", func() (bool, error) {
		list, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 0, fmt.Errorf("%d pods left", len(list.Items))
	})
}
