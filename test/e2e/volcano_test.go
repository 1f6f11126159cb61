//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The Volcano end-to-end tests run a real vc-scheduler (and vc-controller-manager, for queues
// and Volcano Jobs), built by test/tools/build-volcano.sh, against the local control plane,
// with scheduler-config/volcano-scheduler.conf as shipped (only the extender's URL replaced)
// driving cps-extender's /volcano verbs. They share one control plane, 8 nodes of 8 CPU in 2
// racks, and run one after another; each leaves the cluster empty.

// volcanoExtenderConfig is the extender config of the Volcano tests: users in three tiers,
// workers near their PS by rack, hard PS anti-affinity.
const volcanoExtenderConfig = "model:\n  userTiers: {alice: gold, bob: silver, carol: bronze}\n" +
	"affinity:\n  topology: [" + rackLabel + "]\n  psAntiAffinity: hard\n"

// volcanoConfURL is the extender URL written in the shipped Volcano conf.
const volcanoConfURL = "extender.urlPrefix: http://127.0.0.1:8888/volcano"

// volcanoQueue is the Volcano queue every test job goes to (vc-scheduler creates it).
const volcanoQueue = "default"

// vcEnv is the shared control plane with Volcano installed, vc-controller-manager,
// cps-extender and vc-scheduler on it.
type vcEnv struct {
	*env
	owner   *testing.T // the test that owns the env; its subtests come and go
	dyn     dynamic.Interface
	vcBin   string
	vcSched *framework.Process
	rackOf  map[string]string
}

// newVolcanoEnv starts the control plane, installs Volcano's CRDs, runs vc-controller-manager
// (queues, PodGroups, Volcano Jobs), cps-extender and vc-scheduler with the shipped conf.
func newVolcanoEnv(t *testing.T) *vcEnv {
	t.Helper()
	vcBin := framework.VolcanoBinDir(t)
	nodes := rackedNodes(8, 2)
	e := newEnv(t, nodes...)
	v := &vcEnv{env: e, owner: t, dyn: e.cp.Dynamic(t), vcBin: vcBin, rackOf: map[string]string{}}
	for _, n := range nodes {
		v.rackOf[n.Name] = n.Labels[rackLabel]
	}
	e.cp.InstallVolcano(t, vcBin)
	e.cp.StartVolcanoControllerManager(t, vcBin, "queue-controller", "pg-controller", "job-controller")
	e.startExtender(volcanoExtenderConfig)
	v.startVolcano(true)
	e.cp.WaitVolcanoQueueOpen(t, volcanoQueue)
	return v
}

// volcanoConf is scheduler-config/volcano-scheduler.conf as shipped with the extender's URL
// replaced; withExtender false drops the extender plugin (and the comment above it): the same
// Volcano without cps-extender, for baselines.
func (v *vcEnv) volcanoConf(withExtender bool) []byte {
	v.t.Helper()
	raw, err := os.ReadFile(filepath.Join(v.repoRoot, "scheduler-config", "volcano-scheduler.conf"))
	if err != nil {
		v.t.Fatal(err)
	}
	conf := string(raw)
	if !strings.Contains(conf, volcanoConfURL) {
		v.t.Fatalf("scheduler-config/volcano-scheduler.conf no longer contains %q", volcanoConfURL)
	}
	if withExtender {
		return []byte(strings.Replace(conf, volcanoConfURL, "extender.urlPrefix: http://"+v.extAddr+"/volcano", 1))
	}
	out, err := framework.WithoutVolcanoPlugin(conf, "extender")
	if err != nil {
		v.t.Fatalf("scheduler-config/volcano-scheduler.conf: %v", err)
	}
	return []byte(out)
}

// outliving is the running (sub)test for failures and the env's owner for cleanups: a
// process started through it outlives the subtest that started it, and is stopped with the
// env.
type outliving struct {
	testing.TB
	owner testing.TB
}

// Cleanup registers f with the env's owner.
func (o outliving) Cleanup(f func()) { o.owner.Cleanup(f) }

// outlive returns the running test, with cleanups going to the env's owner.
func (v *vcEnv) outlive() testing.TB { return outliving{TB: v.t, owner: v.owner} }

// startVolcano runs vc-scheduler with the shipped conf, with or without the extender, for
// the rest of the env's life (or until restartVolcano).
func (v *vcEnv) startVolcano(withExtender bool) {
	v.t.Helper()
	v.vcSched = v.cp.StartVolcanoScheduler(v.outlive(), v.vcBin, v.volcanoConf(withExtender))
}

// restartVolcano replaces the running vc-scheduler by one with or without the extender.
func (v *vcEnv) restartVolcano(withExtender bool) {
	v.t.Helper()
	if err := v.vcSched.Stop(); err != nil {
		v.t.Logf("stopping vc-scheduler: %v", err)
	}
	v.startVolcano(withExtender)
}

// vcJob is a PS/worker job for Volcano: a PodGroup (scheduling.volcano.sh/v1beta1) named after
// the job, with minMember, minTaskMember per role, the queue, the PriorityClass, the user as a
// label and, unless noMinResources, spec.minResources (the sum of its pods' requests; Volcano
// asks jobEnqueueable only of PodGroups that have it), and one pod per member, named as
// jobSpec names them, annotated with the group and its task (volcano.sh/task-spec).
type vcJob struct {
	jobSpec
	noMinResources bool
	// psSelector is the PS pods' node selector.
	psSelector map[string]string
}

func (j vcJob) namespace() string {
	if j.jobSpec.namespace == "" {
		return "default"
	}
	return j.jobSpec.namespace
}

// pods are the job's pods, PS first, for vc-scheduler.
func (j vcJob) pods() []podSpec {
	var out []podSpec
	for _, p := range j.jobSpec.pods() {
		role, index := p.labels["cps-extender.io/role"], p.labels["cps-extender.io/index"]
		pod := podSpec{
			name: p.name, namespace: j.namespace(), cpu: p.cpu, priority: j.priority,
			scheduler: framework.VolcanoSchedulerName,
			labels:    map[string]string{"volcano.sh/task-spec": role, "volcano.sh/task-index": index},
			annots:    map[string]string{"scheduling.k8s.io/group-name": j.name, "volcano.sh/task-spec": role},
		}
		if role == "ps" {
			pod.selector = j.psSelector
		}
		out = append(out, pod)
	}
	return out
}

// podGroup is the job's PodGroup.
func (j vcJob) podGroup() *unstructured.Unstructured {
	cpu := j.cpu
	if cpu == "" {
		cpu = "1"
	}
	perPod := resource.MustParse(cpu)
	total := resource.NewMilliQuantity(perPod.MilliValue()*int64(j.ps+j.workers), resource.DecimalSI)
	minTask := map[string]any{}
	if j.ps > 0 {
		minTask["ps"] = int64(j.ps)
	}
	if j.workers > 0 {
		minTask["worker"] = int64(j.workers)
	}
	spec := map[string]any{
		"minMember":     int64(j.ps + j.workers),
		"minTaskMember": minTask,
		"queue":         volcanoQueue,
	}
	if j.priority != "" {
		spec["priorityClassName"] = j.priority
	}
	if !j.noMinResources {
		spec["minResources"] = map[string]any{string(corev1.ResourceCPU): total.String()}
	}
	meta := map[string]any{"name": j.name, "namespace": j.namespace()}
	if j.user != "" {
		meta["labels"] = map[string]any{"cps-extender.io/user": j.user}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": framework.VolcanoPodGroups.GroupVersion().String(),
		"kind":       "PodGroup",
		"metadata":   meta,
		"spec":       spec,
	}}
}

// createVolcanoJobs creates each job's PodGroup, then its pods.
func (v *vcEnv) createVolcanoJobs(jobs ...vcJob) {
	v.t.Helper()
	for _, j := range jobs {
		if _, err := v.dyn.Resource(framework.VolcanoPodGroups).Namespace(j.namespace()).Create(context.Background(), j.podGroup(), metav1.CreateOptions{}); err != nil {
			v.t.Fatalf("create PodGroup %s: %v", j.name, err)
		}
		v.createPods(j.pods()...)
	}
}

// deleteVolcanoJob deletes a job's pods and its PodGroup (nothing garbage-collects here) and
// waits until the pods are gone.
func (v *vcEnv) deleteVolcanoJob(j vcJob) {
	v.t.Helper()
	v.deleteJob(j.jobSpec)
	v.deleteAll(framework.VolcanoPodGroups, metav1.ListOptions{FieldSelector: "metadata.name=" + j.name})
}

// deleteAll deletes the namespace default's objects of a resource that opts selects (one
// already gone is no error).
func (v *vcEnv) deleteAll(gvr schema.GroupVersionResource, opts metav1.ListOptions) {
	v.t.Helper()
	ctx := context.Background()
	list, err := v.dyn.Resource(gvr).Namespace("default").List(ctx, opts)
	if err != nil {
		v.t.Fatalf("list %s: %v", gvr.Resource, err)
	}
	for _, obj := range list.Items {
		if err := v.dyn.Resource(gvr).Namespace("default").Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			v.t.Fatalf("delete %s %s: %v", gvr.Resource, obj.GetName(), err)
		}
	}
}

// reset empties the cluster for the next test: every Volcano Job, PodGroup and pod in the
// namespace default goes, and reset waits until none is left. Jobs go first, so that
// vc-controller-manager does not make their pods again; pods and PodGroups are deleted again
// while any is left, in case it did before it saw its Job go.
func (v *vcEnv) reset() {
	v.t.Helper()
	v.deleteAll(framework.VolcanoJobs, metav1.ListOptions{})
	zero := int64(0)
	ctx := context.Background()
	framework.WaitFor(v.t, 60*time.Second, "no pod or PodGroup left", func() (bool, error) {
		v.deleteAll(framework.VolcanoPodGroups, metav1.ListOptions{})
		if err := v.cp.Client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			return false, err
		}
		pods, err := v.cp.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pgs, err := v.dyn.Resource(framework.VolcanoPodGroups).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(pods.Items)+len(pgs.Items) == 0, fmt.Errorf("%d pods and %d PodGroups left", len(pods.Items), len(pgs.Items))
	})
}

// podGroupPhase reads a PodGroup's status.phase ("" when it has none yet or is gone).
func (v *vcEnv) podGroupPhase(name string) string {
	pg, err := v.dyn.Resource(framework.VolcanoPodGroups).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	phase, _, _ := unstructured.NestedString(pg.Object, "status", "phase")
	return phase
}

// waitPending waits until vc-scheduler has taken up every job and not placed it: its
// PodGroup's status.phase, which vc-scheduler writes, is Pending, or Inqueue for a job without
// minResources (Volcano enqueues those unasked).
func (v *vcEnv) waitPending(jobs ...vcJob) {
	v.t.Helper()
	framework.WaitFor(v.t, 60*time.Second, "jobs taken up by vc-scheduler", func() (bool, error) {
		for _, j := range jobs {
			want := "Pending"
			if j.noMinResources {
				want = "Inqueue"
			}
			if phase := v.podGroupPhase(j.name); phase != want {
				return false, fmt.Errorf("PodGroup %s: phase %q, want %q", j.name, phase, want)
			}
		}
		return true, nil
	})
}

// boundCount is how many of a job's pods are bound.
func (v *vcEnv) boundCount(j vcJob) int { return v.countBound(j.jobSpec) }

func (v *vcEnv) waitVolcanoJobBound(j vcJob, timeout time.Duration) {
	v.t.Helper()
	v.waitJobBound(j.jobSpec, timeout)
}

// runVolcanoOneAtATime queues jobs that each need all the room a filler leaves behind a
// blocker, frees the room, and lets each job that becomes fully bound run alone before it is
// deleted for the next; it returns the order they ran in. It fails if a second job has a pod
// bound while one runs. The filler (6 x 8 CPU) and the blocker (2 x 8 CPU) have the highest
// PriorityClass and take the whole cluster first.
func (v *vcEnv) runVolcanoOneAtATime(run string, jobs []vcJob) []string {
	v.t.Helper()
	filler := vcJob{jobSpec: jobSpec{name: "filler-" + run, workers: 6, cpu: "8", priority: "vc-top"}}
	blocker := vcJob{jobSpec: jobSpec{name: "blocker-" + run, workers: 2, cpu: "8", priority: "vc-top"}}
	v.createVolcanoJobs(filler)
	v.waitVolcanoJobBound(filler, 90*time.Second)
	v.createVolcanoJobs(blocker)
	v.waitVolcanoJobBound(blocker, 90*time.Second)
	v.createVolcanoJobs(jobs...)
	v.waitPending(jobs...)
	v.deleteVolcanoJob(blocker)
	freed := time.Now()
	specs := make([]jobSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = j.jobSpec
	}
	order := v.takeTurns(specs, 120*time.Second, func(j jobSpec) {
		v.t.Logf("%s fully bound %v after the room was freed", j.name, time.Since(freed).Round(100*time.Millisecond))
		v.deleteVolcanoJob(vcJob{jobSpec: j})
		freed = time.Now()
	})
	v.deleteVolcanoJob(filler)
	return order
}

// TestVolcano drives a real vc-scheduler with the shipped conf through cps-extender's
// /volcano verbs, on one shared control plane.
func TestVolcano(t *testing.T) {
	v := newVolcanoEnv(t)
	createPriorityClasses(t, v.env, map[string]int32{"vc-top": 1000000000, "vc-300": 300, "vc-200": 200, "vc-100": 100})

	t.Run("sanity: a PS/worker PodGroup binds whole through the extender", func(t *testing.T) {
		defer v.use(t)()
		defer v.reset()
		j := vcJob{jobSpec: jobSpec{name: "sanity", ps: 1, workers: 3, cpu: "2", user: "alice"}}
		v.createVolcanoJobs(j)
		v.waitVolcanoJobBound(j, 90*time.Second)
		framework.WaitFor(t, 30*time.Second, "PodGroup sanity Running", func() (bool, error) {
			phase := v.podGroupPhase(j.name)
			return phase == "Running", fmt.Errorf("phase %q", phase)
		})
		// vc-scheduler asked the extender: every verb the plan needs reached it.
		got := v.extenderRequests()
		for _, verb := range []string{"onSessionOpen", "jobEnqueueable", "predicate", "prioritize", "jobReady", "onSessionClose"} {
			if got["/volcano/"+verb] == 0 {
				t.Errorf("the extender logged no %s request; requests by path: %v", verb, got)
			}
		}
	})

	t.Run("enqueue order follows the combined priority, not the PriorityClasses", func(t *testing.T) {
		defer v.use(t)()
		defer v.reset()
		// Gold, silver and bronze users; PriorityClasses the other way round, and the bronze
		// job created first: Volcano's own order (priority, then age) is bronze, silver, gold.
		jobs := func(run string, noMinResources bool) []vcJob {
			return []vcJob{
				{jobSpec: jobSpec{name: "bronze-" + run, user: "carol", priority: "vc-300", ps: 1, workers: 1, cpu: "8"}, noMinResources: noMinResources},
				{jobSpec: jobSpec{name: "silver-" + run, user: "bob", priority: "vc-200", ps: 1, workers: 1, cpu: "8"}, noMinResources: noMinResources},
				{jobSpec: jobSpec{name: "gold-" + run, user: "alice", priority: "vc-100", ps: 1, workers: 1, cpu: "8"}, noMinResources: noMinResources},
			}
		}
		tiers := func(order []string) []string {
			out := make([]string, len(order))
			for i, name := range order {
				out[i] = name[:strings.Index(name, "-")]
			}
			return out
		}
		v.restartVolcano(false)
		base := tiers(v.runVolcanoOneAtATime("base", jobs("base", false)))
		t.Logf("without cps-extender: jobs ran in order %v", base)
		v.restartVolcano(true)
		got := tiers(v.runVolcanoOneAtATime("ext", jobs("ext", false)))
		t.Logf("with cps-extender:    jobs ran in order %v", got)
		// Without spec.minResources Volcano never asks jobEnqueueable: the extender has no
		// say, and Volcano's own order stands (docs/volcano.md).
		unasked := tiers(v.runVolcanoOneAtATime("nomin", jobs("nomin", true)))
		t.Logf("with cps-extender, PodGroups without minResources: jobs ran in order %v", unasked)
		volcanoOrder := []string{"bronze", "silver", "gold"}
		if want := []string{"gold", "silver", "bronze"}; !slices.Equal(got, want) {
			t.Errorf("with the extender jobs ran in order %v, want %v", got, want)
		}
		if !slices.Equal(base, volcanoOrder) {
			t.Errorf("without the extender jobs ran in order %v, want Volcano's own %v (else this test does not measure the extender)", base, volcanoOrder)
		}
		if !slices.Equal(unasked, volcanoOrder) {
			t.Errorf("without minResources jobs ran in order %v, want Volcano's own %v", unasked, volcanoOrder)
		}
	})

	t.Run("a Volcano Job runs through vc-controller-manager", func(t *testing.T) {
		defer v.use(t)()
		defer v.reset()
		v.runVolcanoJob()
	})

	t.Run("a job larger than the cluster does not block a smaller one", func(t *testing.T) {
		defer v.use(t)()
		defer v.reset()
		// The gold job is first in the combined order but needs 80 CPU of 64: it may never
		// enqueue, and the bronze job behind it must not wait for it.
		huge := vcJob{jobSpec: jobSpec{name: "huge", user: "alice", ps: 2, workers: 8, cpu: "8"}}
		small := vcJob{jobSpec: jobSpec{name: "small", user: "carol", ps: 1, workers: 2, cpu: "2"}}
		v.createVolcanoJobs(huge)
		v.waitPending(huge)
		v.createVolcanoJobs(small)
		v.waitVolcanoJobBound(small, 90*time.Second)
		if n := v.boundCount(huge); n != 0 {
			t.Errorf("the job larger than the cluster has %d pods bound", n)
		}
		if phase := v.podGroupPhase(huge.name); phase != "Pending" {
			t.Errorf("PodGroup huge is %q, want Pending", phase)
		}
	})

	t.Run("PS-worker locality against Volcano alone", func(t *testing.T) {
		defer v.use(t)()
		v.runLocality()
	})

	t.Run("hard PS anti-affinity vetoes two PS on one node", func(t *testing.T) {
		defer v.use(t)()
		v.runPSVeto()
	})

	t.Run("extender killed and restarted: nothing partly bound", func(t *testing.T) {
		defer v.use(t)()
		defer v.reset()
		v.runExtenderRestart()
	})
}

// runLocality places two 2 PS + 6 worker jobs (1 CPU a pod) on the 8 nodes, first with
// Volcano alone, then through the extender, and compares where the workers went.
func (v *vcEnv) runLocality() {
	t := v.t
	place := func(run string, withExtender bool) (locality, onNode, spread float64) {
		defer v.reset()
		v.restartVolcano(withExtender)
		jobs := []vcJob{
			{jobSpec: jobSpec{name: "train-a-" + run, user: "alice", ps: 2, workers: 6, cpu: "1"}},
			{jobSpec: jobSpec{name: "train-b-" + run, user: "bob", ps: 2, workers: 6, cpu: "1"}},
		}
		v.createVolcanoJobs(jobs...)
		specs := make([]jobSpec, len(jobs))
		for i, j := range jobs {
			v.waitVolcanoJobBound(j, 90*time.Second)
			specs[i] = j.jobSpec
		}
		return placementFigures(specs, v.bound("default"), v.rackOf)
	}
	baseLocality, baseNode, baseSpread := place("base", false)
	t.Logf("without cps-extender: worker locality (node or rack) %.2f, on a PS node %.2f, PS spread %.2f", baseLocality, baseNode, baseSpread)
	locality, onNode, spread := place("ext", true)
	t.Logf("with cps-extender:    worker locality (node or rack) %.2f, on a PS node %.2f, PS spread %.2f", locality, onNode, spread)
	// Hard PS anti-affinity is a predicate: no two PS of a job may ever share a node.
	if spread != 1 {
		t.Errorf("PS spread %.2f with hard PS anti-affinity, want 1", spread)
	}
	if locality < 0.75 {
		t.Errorf("worker locality %.2f, want >= 0.75", locality)
	}
	if onNode <= baseNode {
		t.Errorf("workers on a PS node %.2f do not beat Volcano alone's %.2f", onNode, baseNode)
	}
}

// runPSVeto pins a job's two PS to one node (a node selector; the node has room for both)
// and lets its workers go anywhere. Volcano alone puts both PS on that node; through the
// extender (affinity.psAntiAffinity: hard) the second PS fails the extender's predicate on
// it, so the gang cannot be placed and nothing of it is bound.
func (v *vcEnv) runPSVeto() {
	t := v.t
	pinned := func(run string) vcJob {
		return vcJob{jobSpec: jobSpec{name: "pinned-" + run, user: "alice", ps: 2, workers: 2, cpu: "2"},
			psSelector: map[string]string{"kubernetes.io/hostname": "node-0"}}
	}
	func() {
		defer v.reset()
		v.restartVolcano(false)
		j := pinned("base")
		v.createVolcanoJobs(j)
		v.waitVolcanoJobBound(j, 90*time.Second)
		bound := v.bound("default")
		t.Logf("without cps-extender: PS on %s and %s", bound[j.name+"-ps-0"], bound[j.name+"-ps-1"])
		if bound[j.name+"-ps-0"] != "node-0" || bound[j.name+"-ps-1"] != "node-0" {
			t.Errorf("Volcano alone did not put both pinned PS on node-0 (%s, %s): this test would not measure the veto",
				bound[j.name+"-ps-0"], bound[j.name+"-ps-1"])
		}
	}()
	defer v.reset()
	v.restartVolcano(true)
	j := pinned("ext")
	v.createVolcanoJobs(j)
	// vc-scheduler tried the gang and gave up: the PodGroup says why, naming the extender's
	// reason for node-0.
	framework.WaitFor(t, 60*time.Second, "the pinned job Unschedulable for the extender's reason", func() (bool, error) {
		pg, err := v.dyn.Resource(framework.VolcanoPodGroups).Namespace("default").Get(context.Background(), j.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
		var msgs []string
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Unschedulable" {
				msg, _ := m["message"].(string)
				if strings.Contains(msg, "hard PS anti-affinity") {
					t.Logf("with cps-extender: PodGroup %s Unschedulable: %s", j.name, msg)
					return true, nil
				}
				msgs = append(msgs, msg)
			}
		}
		return false, fmt.Errorf("Unschedulable conditions: %q", msgs)
	})
	if n := v.boundCount(j); n != 0 {
		t.Errorf("%d pods of the pinned job bound through the extender, want 0", n)
	}
}

// runVolcanoJob submits a batch.volcano.sh Job with a PS task and a worker task. Its PodGroup
// (with minResources) is made by vc-controller-manager, which creates the pods only once
// vc-scheduler has enqueued the PodGroup (through the extender's jobEnqueueable); the pods
// are bound whole, the PS on distinct nodes, and the Job runs (kwok then completes its pods).
func (v *vcEnv) runVolcanoJob() {
	t := v.t
	ctx := context.Background()
	template := func(role string) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"cps-extender.io/user": "alice"}},
			"spec": map[string]any{
				"restartPolicy": "Never",
				"containers": []any{map[string]any{
					"name": "main", "image": "fake",
					"resources": map[string]any{"requests": map[string]any{"cpu": "2"}},
				}},
			},
		}
	}
	task := func(name string, replicas int64) map[string]any {
		return map[string]any{"name": name, "replicas": replicas, "minAvailable": replicas, "template": template(name)}
	}
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": framework.VolcanoJobs.GroupVersion().String(),
		"kind":       "Job",
		// The user label goes on the Job: vc-controller-manager copies the Job's labels to
		// its PodGroup, which is all jobEnqueueable sees (the pods do not exist yet).
		"metadata": map[string]any{"name": "tf", "namespace": "default", "labels": map[string]any{"cps-extender.io/user": "alice"}},
		"spec": map[string]any{
			"schedulerName": framework.VolcanoSchedulerName,
			"queue":         volcanoQueue,
			"minAvailable":  int64(5),
			"maxRetry":      int64(3),
			"tasks":         []any{task("ps", 2), task("worker", 3)},
		},
	}}
	if _, err := v.dyn.Resource(framework.VolcanoJobs).Namespace("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Volcano Job: %v", err)
	}
	// Its PodGroup, made by the controller, carries minResources: so vc-scheduler asks the
	// extender's jobEnqueueable before the pods exist.
	var pgName string
	framework.WaitFor(t, 60*time.Second, "the Job's PodGroup", func() (bool, error) {
		list, err := v.dyn.Resource(framework.VolcanoPodGroups).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Errorf("%d PodGroups (%v)", len(list.Items), err)
		}
		pg := list.Items[0]
		cpu, _, _ := unstructured.NestedString(pg.Object, "spec", "minResources", "cpu")
		if cpu == "" {
			return false, fmt.Errorf("PodGroup %s has no minResources cpu yet", pg.GetName())
		}
		if q := resource.MustParse(cpu); q.Cmp(resource.MustParse("10")) != 0 {
			return false, framework.StopPolling(fmt.Errorf("PodGroup %s minResources cpu %s, want 10", pg.GetName(), cpu))
		}
		pgName = pg.GetName()
		return true, nil
	})
	// The extender permitted it, knowing its user from the PodGroup's label (gold: 1.00).
	framework.WaitFor(t, 30*time.Second, "the extender's jobEnqueueable permit for "+pgName, func() (bool, error) {
		return v.extenderLogged(`"path":"/volcano/jobEnqueueable"`, `"pod":"default/`+pgName+`"`, `"decision":"permit`, "user 1.00"), nil
	})
	names := []string{"tf-ps-0", "tf-ps-1", "tf-worker-0", "tf-worker-1", "tf-worker-2"}
	framework.WaitFor(t, 120*time.Second, "the Job's 5 pods bound", func() (bool, error) {
		bound := v.bound("default")
		n := 0
		for _, name := range names {
			if bound[name] != "" {
				n++
			}
		}
		return n == len(names), fmt.Errorf("%d of %d bound (PodGroup %s %q)", n, len(names), pgName, v.podGroupPhase(pgName))
	})
	bound := v.bound("default")
	if bound["tf-ps-0"] == bound["tf-ps-1"] {
		t.Errorf("both PS of the Volcano Job on %s despite hard PS anti-affinity", bound["tf-ps-0"])
	}
	// The controller sees its pods run (and, once kwok completes them, finish).
	framework.WaitFor(t, 120*time.Second, "the Volcano Job Running or Completed", func() (bool, error) {
		j, err := v.dyn.Resource(framework.VolcanoJobs).Namespace("default").Get(ctx, "tf", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(j.Object, "status", "state", "phase")
		return phase == "Running" || phase == "Completed", fmt.Errorf("phase %q", phase)
	})
}

// extenderLogged reports whether a line of the extender's log (this run's) holds every one
// of parts.
func (v *vcEnv) extenderLogged(parts ...string) bool {
	out, err := v.ext.Output()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(out), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// runExtenderRestart kills the extender right after a job is created, checks what Volcano
// does without it, restarts it and checks that Volcano uses it again; no job is ever left
// partly bound: every job's pods are bound in one go.
func (v *vcEnv) runExtenderRestart() {
	t := v.t
	rec := v.recordBindings("default")
	racing := vcJob{jobSpec: jobSpec{name: "racing", user: "bob", ps: 2, workers: 4, cpu: "2"}}
	during := vcJob{jobSpec: jobSpec{name: "during", user: "bob", ps: 2, workers: 4, cpu: "2"}}
	after := vcJob{jobSpec: jobSpec{name: "after", user: "bob", ps: 2, workers: 4, cpu: "2"}}

	// racing is created right before the kill, so the extender may die in the middle of
	// vc-scheduler's session for it (a predicate or prioritize call then fails, and Volcano's
	// gang plugin discards the session's partial placement).
	v.createVolcanoJobs(racing)
	v.ext.Kill()
	v.createVolcanoJobs(during)
	// Without the extender, onSessionOpen fails and vc-scheduler runs each session as if the
	// plugin were not configured: the jobs are still bound, each whole (Volcano's gang plugin).
	v.waitVolcanoJobBound(racing, 90*time.Second)
	v.waitVolcanoJobBound(during, 90*time.Second)
	v.vcSched.WaitForLog(t, "connection refused", 30*time.Second)

	// The same config file and address; the process outlives this subtest like the first.
	v.ext = v.cp.StartProcess(v.outlive(), "cps-extender", extenderBinary(t), []string{"--config=" + v.extCfg}, nil)
	framework.WaitExtenderReady(t, v.ext, 60*time.Second, func() (*http.Response, error) { return v.extenderGet("/readyz") })
	v.ext.WaitForLog(t, `"path":"/volcano/onSessionOpen"`, 30*time.Second)
	v.createVolcanoJobs(after)
	v.waitVolcanoJobBound(after, 90*time.Second)
	bound := v.bound("default")
	if bound["after-ps-0"] == bound["after-ps-1"] {
		t.Errorf("both PS of job after on %s: the restarted extender's hard PS anti-affinity was not applied", bound["after-ps-0"])
	}
	// The restarted extender serves the new job's predicates (Volcano alone would place the
	// two PS apart anyway, so the check above alone would not show it).
	framework.WaitFor(t, 30*time.Second, "the restarted extender's predicate for job after", func() (bool, error) {
		return v.extenderLogged(`"path":"/volcano/predicate"`, `"pod":"default/after-`), nil
	})
	// Every job's pods were bound in one burst: Volcano binds a gang's pods together.
	for _, j := range []vcJob{racing, during, after} {
		lastBound(t, rec, j.jobSpec) // the watch has seen every binding
	}
	checkWhole(t, rec, racing.jobSpec, during.jobSpec, after.jobSpec)
}
