//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The labels the real controllers put on their pods.
const (
	kubeflowJobLabel = "training.kubeflow.org/job-name"
	jobSetNameLabel  = "jobset.sigs.k8s.io/jobset-name"
)

// workloadConfig is the extender config of the workload tests: the shipped gang sources,
// looked up again every 2 s (the CRDs are installed after the extender starts).
const workloadConfig = "gang:\n  discoveryInterval: 2s\n"

// kubeflowJob is a Kubeflow v1 job manifest as its users write one: replica specs and pod
// templates, the scheduler name the only field for cps-extender. replicas maps a replica
// type (PS, Worker, Master) to its count, in the order given by types.
func kubeflowJob(kind, name, priorityClass, cpu string, types []string, replicas map[string]int) string {
	field := map[string]string{"TFJob": "tfReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs"}[kind]
	container := map[string]string{"TFJob": "tensorflow", "PyTorchJob": "pytorch"}[kind]
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kubeflow.org/v1\nkind: %s\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  %s:\n", kind, name, field)
	for _, typ := range types {
		fmt.Fprintf(&b, "    %s:\n      replicas: %d\n      restartPolicy: Never\n      template:\n        spec:\n", typ, replicas[typ])
		fmt.Fprintf(&b, "          schedulerName: %s\n", schedulerName)
		if priorityClass != "" {
			fmt.Fprintf(&b, "          priorityClassName: %s\n", priorityClass)
		}
		fmt.Fprintf(&b, "          containers:\n          - name: %s\n            image: kubeflow/example:latest\n            resources:\n              requests: {cpu: %q}\n", container, cpu)
	}
	return b.String()
}

// groupWatch samples the default namespace's pods every 200 ms, grouped by a label, and
// records every group seen with some but not all of its pods bound (pods being deleted or
// finished do not count) in two samples in a row: a gang's Bindings go out in parallel within
// milliseconds, which one sample can catch; a gang left that way cannot hide from two.
type groupWatch struct {
	mu      sync.Mutex
	partial map[string]string // group -> "2/4 bound in two samples at ..."
	size    map[string]int    // the groups watched
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// watchGroups starts a groupWatch over the groups named in size (label value -> gang size).
func (e *env) watchGroups(label string, size map[string]int) *groupWatch {
	return e.watchGroupsBy(func(p *corev1.Pod) string { return p.Labels[label] }, size)
}

// watchGroupsBy starts a groupWatch over the groups named in size (group -> gang size), a
// pod's group being key(pod).
func (e *env) watchGroupsBy(key func(*corev1.Pod) string, size map[string]int) *groupWatch {
	w := &groupWatch{partial: map[string]string{}, size: size, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		last := map[string]int{}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			list, err := e.cp.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				continue
			}
			bound := map[string]int{}
			for i := range list.Items {
				p := &list.Items[i]
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					bound[key(p)]++
				}
			}
			w.mu.Lock()
			for group, n := range w.size {
				b := bound[group]
				if b > 0 && b < n && last[group] == b {
					w.partial[group] = fmt.Sprintf("%d/%d bound in two samples at %s", b, n, time.Now().Format(time.RFC3339Nano))
				}
				last[group] = b
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// Forget stops watching a group: its workload finishes, and its pods end one by one.
func (w *groupWatch) Forget(group string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.size, group)
}

// Stop stops the sampling (once) and returns the groups seen partly bound.
func (w *groupWatch) Stop() map[string]string {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.partial
}

// podsOf lists the default namespace's pods with label=value, by name.
func (e *env) podsOf(label, value string) map[string]corev1.Pod {
	e.t.Helper()
	list, err := e.cp.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: label + "=" + value})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// boundOf counts the pods with label=value that are bound and still run.
func (e *env) boundOf(label, value string) (bound, all int) {
	for _, p := range e.podsOf(label, value) {
		all++
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			bound++
		}
	}
	return bound, all
}

// waitGroupBound waits until n pods with label=value are bound and running.
func (e *env) waitGroupBound(label, value string, n int, timeout time.Duration) {
	e.t.Helper()
	framework.WaitFor(e.t, timeout, fmt.Sprintf("%d pods of %s bound", n, value), func() (bool, error) {
		b, all := e.boundOf(label, value)
		return b == n, fmt.Errorf("%d of %d pods bound", b, all)
	})
}

// finishPods marks the pods with label=value whose replica type is typ as Succeeded, as a
// kubelet would when their containers exit 0 (kwok completes only Job-owned pods by itself).
func (e *env) finishPods(label, value, typ string) time.Time {
	e.t.Helper()
	for _, p := range e.podsOf(label, value) {
		if p.Labels["training.kubeflow.org/replica-type"] != typ {
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady || p.Status.Conditions[i].Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}}}
		if _, err := e.cp.Client.CoreV1().Pods("default").UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			e.t.Fatalf("finish pod %s: %v", p.Name, err)
		}
	}
	return time.Now()
}

// psWithWorker reports whether the pod of role server (its replica-type label) among pods
// shares a node with one of the others.
func psWithWorker(pods map[string]corev1.Pod, server string) (bool, string) {
	nodes := map[string][]string{}
	psNode := ""
	for _, p := range pods {
		role := p.Labels["training.kubeflow.org/replica-type"]
		nodes[p.Spec.NodeName] = append(nodes[p.Spec.NodeName], role)
		if role == server {
			psNode = p.Spec.NodeName
		}
	}
	return psNode != "" && len(nodes[psNode]) > 1, fmt.Sprint(nodes)
}

// TestTFJobsAsSubmitted is the scenario with the real training-operator: on 4 x 8
// CPU, two TFJobs of 1 PS + 5 workers x 4 CPU and, once one runs, a high-priority TFJob of 1
// PS + 3 workers, each with only schedulerName set. The extender reads each gang from its
// TFJob (its CRD installed after the extender started, so found by discovery): no job is
// ever partly bound, the high-priority job is bound within 5 s of the running one finishing
// (its workers succeed, its PS runs on), its PS beside a worker, and the finished TFJob
// leaves the queue. Then two PyTorchJobs the same way: one whole, the other waits whole.
func TestTFJobsAsSubmitted(t *testing.T) {
	e := newEnv(t, rackedNodes(4, 2)...)
	createPriorityClasses(t, e, map[string]int32{"ml-high": 1000000})
	e.startExtender(workloadConfig)
	e.startScheduler(true)
	bin := framework.ControllersBinDir(t)
	e.cp.InstallTrainingOperator(t, bin)
	e.cp.StartTrainingOperator(t, bin, "tfjob", "pytorchjob")

	t.Run("TFJob", func(t *testing.T) {
		defer e.use(t)()
		tf := func(name, pc string, workers int) string {
			return kubeflowJob("TFJob", name, pc, "4", []string{"PS", "Worker"}, map[string]int{"PS": 1, "Worker": workers})
		}
		watch := e.watchGroups(kubeflowJobLabel, map[string]int{"tf-a": 6, "tf-b": 6, "tf-hp": 4})
		defer watch.Stop()
		rec := e.recordBindings("default")
		e.cp.CreateYAML(t, framework.TFJobs, true, tf("tf-a", "", 5))
		e.cp.CreateYAML(t, framework.TFJobs, true, tf("tf-b", "", 5))
		var first, second string
		framework.WaitFor(t, 90*time.Second, "one TFJob bound whole", func() (bool, error) {
			a, _ := e.boundOf(kubeflowJobLabel, "tf-a")
			b, _ := e.boundOf(kubeflowJobLabel, "tf-b")
			switch {
			case a == 6:
				first, second = "tf-a", "tf-b"
			case b == 6:
				first, second = "tf-b", "tf-a"
			}
			return first != "", fmt.Errorf("tf-a %d/6, tf-b %d/6 bound", a, b)
		})
		e.cp.CreateYAML(t, framework.TFJobs, true, tf("tf-hp", "ml-high", 3))
		framework.WaitFor(t, 60*time.Second, "tf-hp and "+second+" waiting, whole, for their turn", func() (bool, error) {
			q, err := e.queue()
			if err != nil {
				return false, err
			}
			hp, other := q["default/tf-hp"], q["default/"+second]
			return hp.Phase == "Waiting" && hp.Pods == 4 && hp.MinMember == 4 && other.Phase == "Waiting" && other.MinMember == 6,
				fmt.Errorf("tf-hp %s %d/%d pods, %s %s %d/%d pods", hp.Phase, hp.Pods, hp.MinMember, second, other.Phase, other.Pods, other.MinMember)
		})
		if b, _ := e.boundOf(kubeflowJobLabel, second); b != 0 {
			t.Fatalf("%s has %d pods bound while %s runs", second, b, first)
		}

		watch.Forget(first)
		finished := e.finishPods(kubeflowJobLabel, first, "worker")
		e.waitGroupBound(kubeflowJobLabel, "tf-hp", 4, 60*time.Second)
		var boundAt time.Time
		for name := range e.podsOf(kubeflowJobLabel, "tf-hp") {
			var at time.Time
			framework.WaitFor(t, 10*time.Second, name+" seen bound by the watch", func() (bool, error) {
				var ok bool
				at, ok = rec.BoundAt(name)
				return ok, fmt.Errorf("no bound event yet")
			})
			if at.After(boundAt) {
				boundAt = at
			}
		}
		d := boundAt.Sub(finished)
		if d > 5*time.Second {
			t.Errorf("tf-hp bound %v after %s finished, want within 5 s", d.Round(time.Millisecond), first)
		}
		t.Logf("%s bound whole first, %s waited whole; tf-hp bound %v after %s's workers finished", first, second, d.Round(time.Millisecond), first)
		if ok, nodes := psWithWorker(e.podsOf(kubeflowJobLabel, "tf-hp"), "ps"); !ok {
			t.Errorf("tf-hp's PS shares no node with a worker: %s", nodes)
		}
		framework.WaitFor(t, 30*time.Second, first+" finished and out of the queue", func() (bool, error) {
			q, err := e.queue()
			if err != nil {
				return false, err
			}
			d := q["default/"+first]
			return d.Phase == "Running" && d.Finished != "" && d.Position == 0, fmt.Errorf("%s: %+v", first, d)
		})
		if b, _ := e.boundOf(kubeflowJobLabel, second); b != 0 {
			t.Errorf("%s has %d pods bound beside tf-hp (it does not fit there)", second, b)
		}
		if p := watch.Stop(); len(p) > 0 {
			t.Errorf("TFJobs seen partly bound: %v", p)
		}
		for _, name := range []string{"tf-a", "tf-b", "tf-hp"} {
			e.deleteWorkload(framework.TFJobs, name, kubeflowJobLabel)
		}
	})

	t.Run("PyTorchJob", func(t *testing.T) {
		defer e.use(t)()
		pj := func(name string) string {
			return kubeflowJob("PyTorchJob", name, "", "4", []string{"Master", "Worker"}, map[string]int{"Master": 1, "Worker": 4})
		}
		watch := e.watchGroups(kubeflowJobLabel, map[string]int{"pt-a": 5, "pt-b": 5})
		defer watch.Stop()
		e.cp.CreateYAML(t, framework.PyTorchJobs, true, pj("pt-a"))
		e.cp.CreateYAML(t, framework.PyTorchJobs, true, pj("pt-b"))
		var first, second string
		framework.WaitFor(t, 90*time.Second, "one PyTorchJob bound whole, the other waiting whole", func() (bool, error) {
			a, _ := e.boundOf(kubeflowJobLabel, "pt-a")
			b, _ := e.boundOf(kubeflowJobLabel, "pt-b")
			if a == 5 {
				first, second = "pt-a", "pt-b"
			} else if b == 5 {
				first, second = "pt-b", "pt-a"
			}
			if first == "" {
				return false, fmt.Errorf("pt-a %d/5, pt-b %d/5 bound", a, b)
			}
			q, err := e.queue()
			if err != nil {
				return false, err
			}
			d := q["default/"+second]
			return d.Phase == "Waiting" && d.Pods == 5 && d.MinMember == 5, fmt.Errorf("%s: %+v", second, d)
		})
		if ok, nodes := psWithWorker(e.podsOf(kubeflowJobLabel, first), "master"); !ok {
			t.Errorf("%s's master (its server) shares no node with a worker: %s", first, nodes)
		}
		watch.Forget(first)
		e.deleteWorkload(framework.PyTorchJobs, first, kubeflowJobLabel)
		e.waitGroupBound(kubeflowJobLabel, second, 5, 60*time.Second)
		if p := watch.Stop(); len(p) > 0 {
			t.Errorf("PyTorchJobs seen partly bound: %v", p)
		}
		e.deleteWorkload(framework.PyTorchJobs, second, kubeflowJobLabel)
	})
}

// deleteWorkload deletes a workload and its pods (the control plane runs no garbage
// collector in this test) and waits until they are gone.
func (e *env) deleteWorkload(gvr schema.GroupVersionResource, name, label string) {
	e.t.Helper()
	if err := e.cp.Dynamic(e.t).Resource(gvr).Namespace("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("delete %s %s: %v", gvr.Resource, name, err)
	}
	var names []string
	for n := range e.podsOf(label, name) {
		names = append(names, n)
	}
	e.deletePods("default", names...)
}

// jobSetManifestOf is a JobSet of a leader Job and a Job of workers parallel pods, each
// asking cpu, as the JobSet docs write one; its pods complete after runFor (kwok).
func jobSetManifestOf(name, priorityClass, cpu string, workers int, runFor string) string {
	pc := ""
	if priorityClass != "" {
		pc = "            priorityClassName: " + priorityClass + "\n"
	}
	job := func(rj string, n int) string {
		return fmt.Sprintf(`  - name: %s
    replicas: 1
    template:
      spec:
        parallelism: %d
        completions: %d
        backoffLimit: 0
        template:
          metadata:
            annotations:
              pod-complete.stage.kwok.x-k8s.io/delay: %s
              pod-complete.stage.kwok.x-k8s.io/jitter-delay: %s
          spec:
            schedulerName: %s
%s            containers:
            - name: %s
              image: example/trainer:latest
              resources:
                requests: {cpu: %q}
`, rj, n, n, runFor, runFor, schedulerName, pc, rj, cpu)
	}
	return fmt.Sprintf("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  replicatedJobs:\n%s%s",
		name, job("leader", 1), job("workers", workers))
}

// TestJobSetsAsSubmitted: two JobSets of a leader and 4 workers x 4 CPU on 32 CPU, created
// together while the cluster is full, the second of a higher PriorityClass, with only
// schedulerName set, through the real JobSet controller and kube-controller-manager's Job
// controller: once room frees the higher one is bound whole first, the other waits with
// nothing bound and is bound whole once the first completes; neither is ever partly bound.
func TestJobSetsAsSubmitted(t *testing.T) {
	e := newEnv(t, rackedNodes(4, 2)...)
	createPriorityClasses(t, e, map[string]int32{"ml-high": 1000000})
	e.startExtender(workloadConfig)
	e.startScheduler(true)
	bin := framework.ControllersBinDir(t)
	e.cp.InstallJobSet(t, bin)
	e.cp.StartControllerManager(t)
	e.cp.StartJobSet(t, bin)

	// The cluster is full while both JobSets come, so that both are whole in the queue when
	// room frees: which goes first is then the combined priority's choice, not which
	// JobSet's pods the Job controller created first.
	blocker := jobSpec{name: "blocker", workers: 4, cpu: "8"}
	e.createJobs(blocker)
	e.waitJobBound(blocker, 60*time.Second)
	watch := e.watchGroups(jobSetNameLabel, map[string]int{"js-low": 5, "js-high": 5})
	defer watch.Stop()
	e.cp.CreateYAML(t, framework.JobSets, true, jobSetManifestOf("js-low", "", "4", 4, "20s"))
	e.cp.CreateYAML(t, framework.JobSets, true, jobSetManifestOf("js-high", "ml-high", "4", 4, "20s"))
	framework.WaitFor(t, 90*time.Second, "both JobSets waiting whole", func() (bool, error) {
		q, err := e.queue()
		if err != nil {
			return false, err
		}
		low, high := q["default/js-low"], q["default/js-high"]
		return low.Phase == "Waiting" && low.Pods == 5 && low.MinMember == 5 && high.Phase == "Waiting" && high.Pods == 5 && high.MinMember == 5,
			fmt.Errorf("js-low %+v, js-high %+v", low, high)
	})
	e.deleteJob(blocker)
	e.waitGroupBound(jobSetNameLabel, "js-high", 5, 90*time.Second)
	q, err := e.queue()
	if err != nil {
		t.Fatal(err)
	}
	if d := q["default/js-low"]; d.Phase != "Waiting" || d.MinMember != 5 || d.Bound != 0 {
		t.Errorf("js-low while js-high runs: %+v, want Waiting with a minimum of 5 and nothing bound", d)
	}
	e.waitGroupBound(jobSetNameLabel, "js-low", 5, 90*time.Second)
	if p := watch.Stop(); len(p) > 0 {
		t.Errorf("JobSets seen partly bound: %v", p)
	}
}

// TestKueuePodGroup: plain pods labelled as a Kueue pod group of 4 (its total count an
// annotation), created one by one: none is bound before the last exists, then all together.
func TestKueuePodGroup(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "8", "16Gi")...)
	e.startExtender("")
	e.startScheduler(true)
	rec := e.recordBindings("default")
	for i := range 4 {
		if i > 0 {
			time.Sleep(time.Second)
			if b, _ := e.boundOf("kueue.x-k8s.io/pod-group-name", "kg"); b != 0 {
				t.Fatalf("%d pods of the group bound with %d of 4 created", b, i)
			}
		}
		e.createPods(podSpec{name: "kg-" + strconv.Itoa(i), cpu: "2",
			labels: map[string]string{"kueue.x-k8s.io/pod-group-name": "kg"},
			annots: map[string]string{"kueue.x-k8s.io/pod-group-total-count": "4"}})
	}
	e.waitGroupBound("kueue.x-k8s.io/pod-group-name", "kg", 4, 60*time.Second)
	var first, last time.Time
	for i := range 4 {
		at, _ := rec.BoundAt("kg-" + strconv.Itoa(i))
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	if spread := last.Sub(first); spread > 5*time.Second {
		t.Errorf("the pod group's pods were bound over %v", spread)
	}
}
