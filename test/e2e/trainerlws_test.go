//go:build e2e && field

// The tests of the optional operators, Kubeflow Trainer v2 and LeaderWorkerSet: build tags e2e
// and field, run by `make field` (not by `make test`: docs/testing.md says why).

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The labels LeaderWorkerSet and JobSet put on their pods, beside jobSetNameLabel.
const (
	jobSetReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	lwsNameLabel             = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupIndexLabel       = "leaderworkerset.sigs.k8s.io/group-index"
)

// queueWatch samples the extender's /debug/queue every 200 ms and keeps, per job, the last
// record seen, and every job key ever seen: short-lived stages (an initializer that runs two
// seconds) leave the queue before a test looks.
type queueWatch struct {
	mu   sync.Mutex
	last map[string]queueJob
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func (e *env) watchQueue() *queueWatch {
	w := &queueWatch{last: map[string]queueJob{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if q, err := e.queue(); err == nil {
				w.mu.Lock()
				for k, j := range q {
					w.last[k] = j
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// Seen returns the last record of every job seen so far.
func (w *queueWatch) Seen() map[string]queueJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]queueJob, len(w.last))
	for k, j := range w.last {
		out[k] = j
	}
	return out
}

// Stop stops the sampling (once).
func (w *queueWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

// stagedRuntime is a ClusterTrainingRuntime of Kubeflow Trainer v2.0.0 in the shape of its
// shipped torchtune runtimes (a dataset initializer, then the trainer nodes once it completed)
// and its torch-distributed runtime (torch policy, a node container), with one addition for
// cps-extender: schedulerName in both pod templates, which a TrainJob cannot set (v2.0.0's
// podSpecOverrides offer service account, node selector, tolerations, volumes, containers'
// env and mounts, and scheduling gates, not the scheduler). The kwok annotations stand for the
// time the containers run: the initializer 2 s, the nodes 10 s.
const stagedRuntime = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-distributed-with-dataset
spec:
  mlPolicy:
    numNodes: 1
    torch:
      numProcPerNode: auto
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
            spec:
              template:
                metadata:
                  annotations:
                    pod-complete.stage.kwok.x-k8s.io/delay: 2s
                    pod-complete.stage.kwok.x-k8s.io/jitter-delay: 2s
                spec:
                  schedulerName: cps-scheduler
                  containers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
                      resources:
                        requests: {cpu: "1"}
        - name: node
          dependsOn:
            - name: dataset-initializer
              status: Complete
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                metadata:
                  annotations:
                    pod-complete.stage.kwok.x-k8s.io/delay: 10s
                    pod-complete.stage.kwok.x-k8s.io/jitter-delay: 10s
                spec:
                  schedulerName: cps-scheduler
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
                      command: [torchrun, /workspace/train.py]
`

// trainJobManifest is a TrainJob as the Trainer docs write one: a runtime, a dataset to
// initialize, the number of nodes and their resources.
func trainJobManifest(name, runtime string, numNodes int, cpu string) string {
	return fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: %s
  namespace: default
spec:
  runtimeRef:
    name: %s
  initializer:
    dataset:
      storageUri: hf://tatsu-lab/alpaca
  trainer:
    numNodes: %d
    resourcesPerNode:
      requests:
        cpu: %q
`, name, runtime, numNodes, cpu)
}

// jobSetStage is a JobSet pod's group for the partial-binding watch: its JobSet and replicated
// job, "tj-a/node".
func jobSetStage(p *corev1.Pod) string {
	return p.Labels[jobSetNameLabel] + "/" + p.Labels[jobSetReplicatedJobLabel]
}

// stageBound counts the running bound pods of a JobSet's replicated job.
func (e *env) stageBound(jobSet, replicatedJob string) (bound, all int) {
	for _, p := range e.podsOf(jobSetNameLabel, jobSet) {
		if p.Labels[jobSetReplicatedJobLabel] != replicatedJob {
			continue
		}
		all++
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			bound++
		}
	}
	return bound, all
}

// TestTrainJobAsSubmitted: two TrainJobs of Kubeflow Trainer v2, each a dataset initializer
// and then 3 training nodes x 4 CPU (a runtime whose JobSet starts the node job once the
// initializer's completed), on 2 x 8 CPU where one node stage fits but not two, through the
// real Trainer, JobSet and Job controllers, only schedulerName set (in the runtime). Each
// initializer is a gang of its own (default/<trainjob>, 1 pod) and binds without waiting for
// the node pods that do not exist yet; each node stage is a gang (default/<trainjob>.node, 3
// pods): one binds whole, the other waits whole and binds once the first completed; no stage
// is ever partly bound (200 ms sampling).
func TestTrainJobAsSubmitted(t *testing.T) {
	began := time.Now()
	e := newEnv(t, framework.Nodes("node", 2, "8", "16Gi")...)
	e.startExtender(workloadConfig)
	e.startScheduler(true)
	bin, extra := framework.ControllersBinDir(t), framework.ControllersExtraBinDir(t)
	e.cp.InstallJobSet(t, bin)
	e.cp.InstallTrainer(t, extra)
	e.cp.StartControllerManager(t)
	e.cp.StartJobSet(t, bin)
	e.cp.StartTrainer(t, extra)
	shipped := e.cp.InstallTrainingRuntimes(t, extra)
	e.cp.CreateYAML(t, framework.ClusterTrainingRuntimes, false, stagedRuntime)
	t.Logf("control plane, extender and controllers up in %v; the shipped runtimes %v admitted", time.Since(began).Round(time.Millisecond), shipped)

	watch := e.watchGroupsBy(jobSetStage, map[string]int{"tj-a/node": 3, "tj-b/node": 3})
	defer watch.Stop()
	queue := e.watchQueue()
	defer queue.Stop()
	created := time.Now()
	for _, name := range []string{"tj-a", "tj-b"} {
		e.cp.CreateYAML(t, framework.TrainJobs, true, trainJobManifest(name, "torch-distributed-with-dataset", 3, "4"))
	}

	// The initializers: bound on their own, and done.
	framework.WaitFor(t, 30*time.Second, "both dataset initializers bound and completed", func() (bool, error) {
		var state []string
		done := 0
		for _, name := range []string{"tj-a", "tj-b"} {
			for _, p := range e.podsOf(jobSetNameLabel, name) {
				if p.Labels[jobSetReplicatedJobLabel] != "dataset-initializer" {
					continue
				}
				state = append(state, fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, p.Status.Phase))
				if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodSucceeded {
					done++
				}
			}
		}
		return done == 2, fmt.Errorf("initializer pods: %v", state)
	})
	t.Logf("both initializers bound and completed %v after the TrainJobs were created", time.Since(created).Round(time.Millisecond))

	// The node stages: one whole, the other waiting whole.
	var first, second string
	framework.WaitFor(t, 40*time.Second, "one node stage bound whole, the other waiting whole", func() (bool, error) {
		a, _ := e.stageBound("tj-a", "node")
		b, _ := e.stageBound("tj-b", "node")
		switch {
		case a == 3:
			first, second = "tj-a", "tj-b"
		case b == 3:
			first, second = "tj-b", "tj-a"
		default:
			return false, fmt.Errorf("node stages bound: tj-a %d/3, tj-b %d/3", a, b)
		}
		q, err := e.queue()
		if err != nil {
			return false, err
		}
		d := q["default/"+second+".node"]
		return d.Phase == "Waiting" && d.Pods == 3 && d.MinMember == 3 && d.Bound == 0, fmt.Errorf("%s.node: %+v", second, d)
	})
	watch.Forget(first + "/node") // its pods complete one by one
	if b, _ := e.stageBound(second, "node"); b != 0 {
		t.Errorf("%s's node stage has %d pods bound while %s's runs", second, b, first)
	}
	e.waitStageBound(second, "node", 3, 40*time.Second)
	watch.Forget(second + "/node")
	t.Logf("%s's node stage bound whole first, %s's waited whole and was bound %v after the TrainJobs were created",
		first, second, time.Since(created).Round(time.Millisecond))
	if p := watch.Stop(); len(p) > 0 {
		t.Errorf("stages seen partly bound: %v", p)
	}

	// The queue named the stages as documented, each with its own gang size.
	queue.Stop()
	seen := queue.Seen()
	var keys []string
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for key, min := range map[string]int{"default/tj-a": 1, "default/tj-b": 1, "default/tj-a.node": 3, "default/tj-b.node": 3} {
		d, ok := seen[key]
		if !ok {
			t.Errorf("job %s never in the queue; seen %v", key, keys)
			continue
		}
		if d.MinMember != min {
			t.Errorf("job %s: minimum %d, want %d (%+v)", key, d.MinMember, min, d)
		}
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "default/tj-") {
			t.Errorf("unexpected job %s in the queue: %+v", k, seen[k])
		}
	}
	t.Logf("TestTrainJobAsSubmitted took %v", time.Since(began).Round(time.Millisecond))
}

// waitStageBound waits until n pods of a JobSet's replicated job are bound and running.
func (e *env) waitStageBound(jobSet, replicatedJob string, n int, timeout time.Duration) {
	e.t.Helper()
	framework.WaitFor(e.t, timeout, fmt.Sprintf("%d pods of %s/%s bound", n, jobSet, replicatedJob), func() (bool, error) {
		b, all := e.stageBound(jobSet, replicatedJob)
		return b == n, fmt.Errorf("%d of %d pods bound", b, all)
	})
}

// lwsManifest is a LeaderWorkerSet as the LWS docs write one (a leader template and a worker
// template), replicas groups of size pods each asking cpu, only schedulerName set.
func lwsManifest(name string, replicas, size int, cpu string) string {
	return fmt.Sprintf(`apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: %s
  namespace: default
spec:
  replicas: %d
  leaderWorkerTemplate:
    size: %d
    leaderTemplate:
      spec:
        schedulerName: %s
        containers:
        - name: vllm-leader
          image: vllm/vllm-openai:latest
          command: [sh, -c, "ray start --head && vllm serve --tensor-parallel-size 4"]
          resources:
            requests: {cpu: %q}
    workerTemplate:
      spec:
        schedulerName: %s
        containers:
        - name: vllm-worker
          image: vllm/vllm-openai:latest
          command: [sh, -c, "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]
          resources:
            requests: {cpu: %q}
`, name, replicas, size, schedulerName, cpu, schedulerName, cpu)
}

// lwsGroup is a LeaderWorkerSet pod's group, as the extender names its job: "vllm-0".
func lwsGroup(p *corev1.Pod) string {
	return p.Labels[lwsNameLabel] + "-" + p.Labels[lwsGroupIndexLabel]
}

// lwsStage is a LeaderWorkerSet pod's group, its workers apart: "ready-0" for the leader,
// "ready-0.workers" for the others.
func lwsStage(p *corev1.Pod) string {
	if p.Labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0" {
		return lwsGroup(p)
	}
	return lwsGroup(p) + ".workers"
}

// groupBound counts the bound, running pods of each LeaderWorkerSet group.
func (e *env) groupBound(name string) map[string]int {
	out := map[string]int{}
	for _, p := range e.podsOf(lwsNameLabel, name) {
		g := lwsGroup(&p)
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[g]++
		} else if _, ok := out[g]; !ok {
			out[g] = 0 // listed, with nothing bound
		}
	}
	return out
}

// TestLeaderWorkerSetAsSubmitted: a LeaderWorkerSet of 2 groups of a leader and 3 workers x 4
// CPU on 2 x 8 CPU, where one group fits, through the real LWS controller and
// kube-controller-manager's StatefulSet controller, only schedulerName set. Each group is a
// gang (default/vllm-<index>, 4 pods): one binds whole, the other waits with nothing bound;
// a node where only 2 of its pods fit changes nothing; a second one and it binds whole. No
// group is ever partly bound (200 ms sampling). Then, the first one deleted, one with
// startupPolicy LeaderReady, whose workers LWS creates only once the leader is Ready: its
// leader binds alone (default/ready-0, 1 pod), then its 3 workers whole
// (default/ready-0.workers).
func TestLeaderWorkerSetAsSubmitted(t *testing.T) {
	began := time.Now()
	e := newEnv(t, framework.Nodes("node", 2, "8", "16Gi")...)
	e.startExtender(workloadConfig)
	e.startScheduler(true)
	extra := framework.ControllersExtraBinDir(t)
	e.cp.InstallLWS(t, extra)
	e.cp.StartControllerManager(t, framework.LWSKubeControllers...)
	e.cp.StartLWS(t, extra)
	t.Logf("control plane, extender and controllers up in %v", time.Since(began).Round(time.Millisecond))

	watch := e.watchGroupsBy(lwsGroup, map[string]int{"vllm-0": 4, "vllm-1": 4})
	defer watch.Stop()
	created := time.Now()
	e.cp.CreateYAML(t, framework.LeaderWorkerSets, true, lwsManifest("vllm", 2, 4, "4"))

	var first, second string
	framework.WaitFor(t, 40*time.Second, "one group bound whole, the other waiting whole", func() (bool, error) {
		g := e.groupBound("vllm")
		switch {
		case g["vllm-0"] == 4:
			first, second = "vllm-0", "vllm-1"
		case g["vllm-1"] == 4:
			first, second = "vllm-1", "vllm-0"
		default:
			return false, fmt.Errorf("groups bound: %v", g)
		}
		q, err := e.queue()
		if err != nil {
			return false, err
		}
		d := q["default/"+second]
		return d.Phase == "Waiting" && d.Pods == 4 && d.MinMember == 4 && d.Bound == 0, fmt.Errorf("%s: %+v", second, d)
	})
	t.Logf("%s bound whole %v after the LeaderWorkerSet was created, %s waits whole", first, time.Since(created).Round(time.Millisecond), second)
	if q, err := e.queue(); err != nil {
		t.Fatal(err)
	} else if d := q["default/"+first]; d.MinMember != 4 || d.Pods != 4 {
		t.Errorf("%s in the queue: %+v, want a gang of 4", first, d)
	}

	// Room for 2 of its 4 pods: nothing of it binds.
	e.cp.AddNodes(t, framework.Nodes("late-a", 1, "8", "16Gi")...)
	framework.WaitFor(t, 10*time.Second, second+" waiting, with what fits of it set aside on late-a-0", func() (bool, error) {
		q, err := e.queue()
		if err != nil {
			return false, err
		}
		d := q["default/"+second]
		return d.Phase == "Waiting" && strings.Contains(fmt.Sprint(d.Placement), "late-a-0"), fmt.Errorf("%s: %+v", second, d)
	})
	time.Sleep(2 * time.Second) // kube-scheduler retries the group's pods on the new node meanwhile
	if b := e.groupBound("vllm")[second]; b != 0 {
		t.Fatalf("%s has %d pods bound with room for 2 of its 4", second, b)
	}

	added := time.Now()
	e.cp.AddNodes(t, framework.Nodes("late-b", 1, "8", "16Gi")...)
	framework.WaitFor(t, 30*time.Second, second+" bound whole", func() (bool, error) {
		g := e.groupBound("vllm")
		return g[second] == 4, fmt.Errorf("groups bound: %v", g)
	})
	t.Logf("%s bound whole %v after the second node was added", second, time.Since(added).Round(time.Millisecond))
	if p := watch.Stop(); len(p) > 0 {
		t.Errorf("groups seen partly bound: %v", p)
	}

	// LeaderReady: a gang of the whole group would wait for workers that come only after
	// its leader runs.
	deleteAndWaitGone(t, e.cp, framework.LeaderWorkerSets, "vllm", lwsNameLabel+"=vllm")
	workers := e.watchGroupsBy(lwsStage, map[string]int{"ready-0.workers": 3})
	defer workers.Stop()
	queue := e.watchQueue()
	defer queue.Stop()
	created = time.Now()
	e.cp.CreateYAML(t, framework.LeaderWorkerSets, true,
		strings.Replace(lwsManifest("ready", 1, 4, "4"), "spec:\n  replicas:", "spec:\n  startupPolicy: LeaderReady\n  replicas:", 1))
	framework.WaitFor(t, 30*time.Second, "the LeaderReady group's leader, then its workers, bound", func() (bool, error) {
		g := e.groupBound("ready")
		return g["ready-0"] == 4, fmt.Errorf("groups bound: %v", g)
	})
	t.Logf("the LeaderReady group bound %v after its LeaderWorkerSet was created", time.Since(created).Round(time.Millisecond))
	if p := workers.Stop(); len(p) > 0 {
		t.Errorf("the LeaderReady group's workers seen partly bound: %v", p)
	}
	queue.Stop()
	seen := queue.Seen()
	for key, min := range map[string]int{"default/ready-0": 1, "default/ready-0.workers": 3} {
		if d, ok := seen[key]; !ok || d.MinMember != min {
			t.Errorf("job %s in the queue: %+v (seen: %v), want a minimum of %d", key, d, ok, min)
		}
	}
	t.Logf("TestLeaderWorkerSetAsSubmitted took %v", time.Since(began).Round(time.Millisecond))
}
