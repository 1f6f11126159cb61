package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/scheduler"

	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/gate"

	"github.com/cps-extender/cps-extender/extender/server"

	"github.com/cps-extender/cps-extender/extender/config"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// TestConcurrentVerbsDuringChurn runs filter and prioritize in parallel through the HTTP
// handler while other goroutines add and remove nodes and pods through the API (real
// informers over a fake clientset). Under -race: no race; every answer is 200; filter
// passes only requested nodes that existed at some time and answers each at most once;
// prioritize scores every requested node, in order, 0..10. Then a deleted job's pods are no
// longer admitted once the view shows the deletion.
func TestConcurrentVerbsDuringChurn(t *testing.T) {
	spec := loadfixture.Spec{Nodes: 40, Jobs: 10, PodsPerJob: 4}
	nodes, pods := loadfixture.Nodes(spec), loadfixture.Pods(spec)
	client := fake.NewClientset()
	ctx := context.Background()
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.DefaultConfig()
	cfg.Gate.RecomputeInterval = metav1.Duration{Duration: 20 * time.Millisecond}
	log := zap.NewNop()
	gate := gate.New(gate.Options{Log: log, Binder: noopBinder{}, Config: cfg.Gate})
	cluster := view.NewCluster(view.ClusterOptions{Log: log, Client: client, Config: cfg, Holds: gate})
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); cluster.Shutdown() })
	if err := cluster.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	verbs, err := scheduler.New(log, decisionsOf(cluster), gate.For(cluster), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Access: server.OpenAccess, Log: log, MaxRequestBytes: 1 << 20, Ready: cluster, Routes: verbs.Routes("/scheduler")})
	if err != nil {
		t.Fatal(err)
	}

	// Candidate names: the static nodes and the churned ones (some exist at a time, some not).
	existed := map[string]bool{}
	var names []string
	for _, n := range nodes {
		existed[n.Name] = true
		names = append(names, n.Name)
	}
	churnNodes := make([]string, 10)
	for i := range churnNodes {
		churnNodes[i] = fmt.Sprintf("churn-%d", i)
		existed[churnNodes[i]] = true
		names = append(names, churnNodes[i])
	}
	names = append(names, "never-existed")

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	report := func(format string, a ...any) {
		select {
		case errs <- fmt.Errorf(format, a...):
		default:
		}
	}
	// Churn: nodes and a job's pods come and go.
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 100 {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: churnNodes[r.IntN(len(churnNodes))]},
					Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}
				if r.IntN(2) == 0 {
					_, _ = client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
				} else {
					_ = client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
				}
				pod := loadfixture.Pods(loadfixture.Spec{Jobs: 1, PodsPerJob: 3, Namespace: "churn"})[i%3]
				pod.Name, pod.UID = fmt.Sprintf("%s-%d", pod.Name, w), "" // each churner its own pods
				if r.IntN(2) == 0 {
					_, _ = client.CoreV1().Pods("churn").Create(ctx, pod, metav1.CreateOptions{})
				} else {
					_ = client.CoreV1().Pods("churn").Delete(ctx, pod.Name, metav1.DeleteOptions{})
				}
			}
		}()
	}
	// Callers: filter and prioritize for pods of every job, over all candidate names.
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for range 60 {
				pod := pods[r.IntN(len(pods))]
				body, _ := json.Marshal(loadfixture.ExtenderArgs(pod, nil, true))
				var args extenderv1.ExtenderArgs
				_ = json.Unmarshal(body, &args)
				args.NodeNames = &names
				body, _ = json.Marshal(&args)
				for _, verb := range []string{scheduler.VerbFilter, scheduler.VerbPrioritize} {
					rec := httptest.NewRecorder()
					srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/scheduler/"+verb, bytes.NewReader(body)))
					if rec.Code != http.StatusOK {
						report("%s %s: %d %s", verb, pod.Name, rec.Code, rec.Body)
						continue
					}
					checkAnswer(verb, rec.Body.Bytes(), names, existed, report)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// A deleted job: once the view no longer has it, its pods wait (not admitted).
	job := pods[0].Namespace + "/" + pods[0].Labels[loadfixture.JobLabel]
	if adm := cluster.Decisions().Admit(pods[0]); !adm.OK {
		t.Fatalf("job %s not admitted before its deletion: %s", job, adm.Reason)
	}
	for _, p := range pods[:spec.PodsPerJob] {
		if err := client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, inView := cluster.Snapshot().Job(job); !inView {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still in the view 10 s after its pods were deleted", job)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if cluster.Decisions().Admit(pods[0]).OK {
		t.Errorf("a pod of deleted job %s is still admitted", job)
	}
}

// checkAnswer checks one filter or prioritize answer against the request's names.
func checkAnswer(verb string, body []byte, names []string, existed map[string]bool, report func(string, ...any)) {
	switch verb {
	case scheduler.VerbFilter:
		var res extenderv1.ExtenderFilterResult
		if err := json.Unmarshal(body, &res); err == nil && res.Error != "" {
			// A waiting pod asked again on the same view: a retry, with no node passed.
			if res.NodeNames != nil && len(*res.NodeNames) > 0 {
				report("filter: a retry answer passed nodes: %s", body)
			}
			return
		}
		if err := json.Unmarshal(body, &res); err != nil || res.NodeNames == nil {
			report("filter: answer %s: %v", body, err)
			return
		}
		for _, n := range *res.NodeNames {
			if !existed[n] {
				report("filter passed node %q, which never existed", n)
			}
		}
		// Each requested node is passed, failed or unresolvable, once; the nodes a narrowing
		// leaves out (to the plan's node, or around claimed room) are in no list, and a
		// narrowing always passes some node.
		seen := map[string]int{}
		for _, n := range *res.NodeNames {
			seen[n]++
		}
		for _, failed := range []extenderv1.FailedNodesMap{res.FailedNodes, res.FailedAndUnresolvableNodes} {
			for n := range failed {
				seen[n]++
			}
		}
		for n, times := range seen {
			if times > 1 || !slices.Contains(names, n) {
				report("filter: node %q answered %d times (requested: %t)", n, times, slices.Contains(names, n))
			}
		}
		if len(seen) < len(names) && len(*res.NodeNames) == 0 {
			report("filter: %d of %d nodes left out, and none passed: %s", len(names)-len(seen), len(names), body)
		}
	case scheduler.VerbPrioritize:
		var res extenderv1.HostPriorityList
		if err := json.Unmarshal(body, &res); err != nil || len(res) != len(names) {
			report("prioritize: %d scores for %d nodes (%v)", len(res), len(names), err)
			return
		}
		for i, hp := range res {
			if hp.Host != names[i] || hp.Score < 0 || hp.Score > 10 {
				report("prioritize: score %d = %+v, want host %s and 0..10", i, hp, names[i])
			}
		}
	}
}
