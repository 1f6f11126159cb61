//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// tfJobManifest is a distributed TFJob (1 PS, 2 workers) as the Kubeflow docs write one, with
// tiny requests; its pods keep the default scheduler.
const tfJobManifest = `apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: dist-mnist
  namespace: default
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: tensorflow
            image: kubeflow/tf-dist-mnist-test:latest
            resources:
              requests: {cpu: 100m}
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: tensorflow
            image: kubeflow/tf-dist-mnist-test:latest
            resources:
              requests: {cpu: 100m}
`

// jobSetManifest is a JobSet of two replicatedJobs (a driver Job, two worker Jobs of two pods)
// that leaves every default to JobSet's webhook (no restartPolicy, completion mode or success
// policy); kwok completes each pod a second after it runs.
const jobSetManifest = `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: paralleljobs
  namespace: default
spec:
  replicatedJobs:
  - name: driver
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          metadata:
            annotations: &done
              pod-complete.stage.kwok.x-k8s.io/delay: 1s
              pod-complete.stage.kwok.x-k8s.io/jitter-delay: 1s
          spec:
            containers:
            - name: driver
              image: busybox
              command: [sleep, "1"]
              resources:
                requests: {cpu: 100m}
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          metadata:
            annotations: *done
          spec:
            containers:
            - name: worker
              image: busybox
              command: [sleep, "1"]
              resources:
                requests: {cpu: 100m}
`

// TestRealControllers proves the harness of the real workload controllers: kube-controller-
// manager (Job controller, garbage collector), the Kubeflow training-operator and JobSet, with
// a plain kube-scheduler, turn a TFJob and a JobSet into pods labelled and owned as in a real
// cluster; the JobSet runs to Completed and its deletion takes its Jobs and pods with it.
func TestRealControllers(t *testing.T) {
	began := time.Now()
	bin := framework.ControllersBinDir(t)
	cp := framework.Start(t, framework.Options{})
	cp.AddNodes(t, framework.Nodes("node", 2, "4", "8Gi")...)
	cp.StartScheduler(t, fmt.Appendf(nil, schedulerConfig, cp.Kubeconfig))
	// The CRDs first: the garbage collector watches the kinds served when it starts (and looks
	// for new ones only every 30 s).
	cp.InstallTrainingOperator(t, bin)
	cp.InstallJobSet(t, bin)
	cp.StartControllerManager(t)
	cp.StartTrainingOperator(t, bin, "tfjob")
	cp.StartJobSet(t, bin)
	t.Logf("control plane and controllers up in %v", time.Since(began).Round(time.Millisecond))

	t.Run("TFJob", func(t *testing.T) {
		job := cp.CreateYAML(t, framework.TFJobs, true, tfJobManifest)
		pods := waitPods(t, cp, "training.kubeflow.org/job-name="+job.GetName(), 3, true)
		var roles []string
		for _, p := range pods {
			roles = append(roles, p.Labels["training.kubeflow.org/replica-type"]+"-"+p.Labels["training.kubeflow.org/replica-index"])
			checkControllerOwner(t, p.Name, p.OwnerReferences, "TFJob", job)
		}
		slices.Sort(roles)
		if want := []string{"ps-0", "worker-0", "worker-1"}; !slices.Equal(roles, want) {
			t.Errorf("pods' replica-type-index %v, want %v", roles, want)
		}
		waitCondition(t, cp, framework.TFJobs, job.GetName(), "Running")

		deleteAndWaitGone(t, cp, framework.TFJobs, job.GetName(), "training.kubeflow.org/job-name="+job.GetName())
	})

	t.Run("JobSet", func(t *testing.T) {
		js := cp.CreateYAML(t, framework.JobSets, true, jobSetManifest)
		if op, _, _ := unstructured.NestedString(js.Object, "spec", "successPolicy", "operator"); op != "All" {
			t.Errorf("JobSet created without the webhook's defaults: successPolicy.operator %q", op)
		}
		selector := "jobset.sigs.k8s.io/jobset-name=" + js.GetName()
		waitCondition(t, cp, framework.JobSets, js.GetName(), "Completed")

		jobs, err := cp.Client.BatchV1().Jobs("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		jobOf := map[string]metav1.Object{}
		var names []string
		for i := range jobs.Items {
			j := &jobs.Items[i]
			jobOf[j.Name] = j
			names = append(names, j.Name)
			checkControllerOwner(t, j.Name, j.OwnerReferences, "JobSet", js)
			if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != "Indexed" {
				t.Errorf("Job %s: completion mode %v, want Indexed (JobSet's default)", j.Name, j.Spec.CompletionMode)
			}
		}
		slices.Sort(names)
		if want := []string{"paralleljobs-driver-0", "paralleljobs-workers-0", "paralleljobs-workers-1"}; !slices.Equal(names, want) {
			t.Errorf("Jobs %v, want %v", names, want)
		}
		pods := waitPods(t, cp, selector, 5, false)
		for _, p := range pods {
			if p.Status.Phase != corev1.PodSucceeded {
				t.Errorf("pod %s: phase %s, want Succeeded", p.Name, p.Status.Phase)
			}
			rj, idx := p.Labels["jobset.sigs.k8s.io/replicatedjob-name"], p.Labels["jobset.sigs.k8s.io/job-index"]
			owner := metav1.GetControllerOf(&p)
			if owner == nil || jobOf[owner.Name] == nil {
				t.Errorf("pod %s: controller %v, want one of the JobSet's Jobs", p.Name, owner)
				continue
			}
			checkControllerOwner(t, p.Name, p.OwnerReferences, "Job", jobOf[owner.Name])
			if want := js.GetName() + "-" + rj + "-" + idx; owner.Name != want {
				t.Errorf("pod %s: labels replicatedjob-name %q, job-index %q, but owned by Job %s", p.Name, rj, idx, owner.Name)
			}
		}

		deleteAndWaitGone(t, cp, framework.JobSets, js.GetName(), selector)
		framework.WaitFor(t, 30*time.Second, "the JobSet's Jobs garbage-collected", func() (bool, error) {
			jobs, err := cp.Client.BatchV1().Jobs("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, err
			}
			return len(jobs.Items) == 0, fmt.Errorf("%d Jobs left", len(jobs.Items))
		})
	})
	t.Logf("TestRealControllers took %v", time.Since(began).Round(time.Millisecond))
}

// waitPods waits until the default namespace holds exactly n pods matching selector, all bound
// and, if running, Running; it returns them.
func waitPods(t *testing.T, cp *framework.ControlPlane, selector string, n int, running bool) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	framework.WaitFor(t, 30*time.Second, fmt.Sprintf("%d pods %s", n, selector), func() (bool, error) {
		list, err := cp.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = list.Items
		var notYet []string
		for _, p := range pods {
			if p.Spec.NodeName == "" || (running && p.Status.Phase != corev1.PodRunning) {
				notYet = append(notYet, p.Name+" "+string(p.Status.Phase))
			}
		}
		if len(pods) != n || len(notYet) > 0 {
			return false, fmt.Errorf("%d pods, unbound or not yet running: %s", len(pods), strings.Join(notYet, ", "))
		}
		return true, nil
	})
	return pods
}

// checkControllerOwner checks that an object's controller owner reference names owner, of kind.
func checkControllerOwner(t *testing.T, name string, refs []metav1.OwnerReference, kind string, owner metav1.Object) {
	t.Helper()
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller {
			if ref.Kind != kind || ref.Name != owner.GetName() || ref.UID != owner.GetUID() {
				t.Errorf("%s: controller %s %s (%s), want %s %s (%s)", name, ref.Kind, ref.Name, ref.UID, kind, owner.GetName(), owner.GetUID())
			}
			return
		}
	}
	t.Errorf("%s: no controller owner reference in %v", name, refs)
}

// waitCondition waits until the object name of gvr in the default namespace has condition typ
// True.
func waitCondition(t *testing.T, cp *framework.ControlPlane, gvr schema.GroupVersionResource, name, typ string) {
	t.Helper()
	res := cp.Dynamic(t).Resource(gvr).Namespace("default")
	framework.WaitFor(t, 30*time.Second, fmt.Sprintf("%s %s %s", gvr.Resource, name, typ), func() (bool, error) {
		obj, err := res.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		return framework.StatusCondition(obj, typ) == "True", fmt.Errorf("conditions %v", conds)
	})
}

// deleteAndWaitGone deletes the object name of gvr in the default namespace, as kubectl does
// (background propagation), and waits until it and the pods matching selector are gone: the
// garbage collector deletes what it owns.
func deleteAndWaitGone(t *testing.T, cp *framework.ControlPlane, gvr schema.GroupVersionResource, name, selector string) {
	t.Helper()
	res := cp.Dynamic(t).Resource(gvr).Namespace("default")
	background := metav1.DeletePropagationBackground
	if err := res.Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, 30*time.Second, fmt.Sprintf("%s %s and its pods gone", gvr.Resource, name), func() (bool, error) {
		if _, err := res.Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("%s still there (%v)", name, err)
		}
		pods, err := cp.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, fmt.Errorf("%d pods left", len(pods.Items))
	})
}
