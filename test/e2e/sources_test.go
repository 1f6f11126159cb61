//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

var (
	crdGVR          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	volcanoPG       = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	coschedulingPG  = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	podGroupSources = map[string]schema.GroupVersionResource{"volcano": volcanoPG, "coscheduling": coschedulingPG}
)

// installPodGroupCRDs creates the minimal PodGroup CRDs from test/testdata/crds and waits
// until the API server serves them.
func installPodGroupCRDs(t *testing.T, e *env, dyn dynamic.Interface) {
	t.Helper()
	for name, gvr := range podGroupSources {
		raw, err := os.ReadFile(filepath.Join(e.repoRoot, "test", "testdata", "crds", name+"-podgroup.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(crdGVR).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", name, err)
		}
		framework.WaitFor(t, 30*time.Second, "CRD "+gvr.String()+" served", func() (bool, error) {
			_, err := dyn.Resource(gvr).Namespace("default").List(context.Background(), metav1.ListOptions{})
			return err == nil, err
		})
	}
}

func createPodGroup(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string, minMember int) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       map[string]any{"minMember": int64(minMember)},
	}}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodGroup %s: %v", name, err)
	}
}

// sourceJob is a 1 PS + 2 worker job (3 x 4 CPU, minimum 3) labelled for one gang source.
func sourceJob(source, name string) []podSpec {
	var pods []podSpec
	for i, role := range []string{"ps", "worker", "worker"} {
		index := strconv.Itoa(i)
		if role == "worker" {
			index = strconv.Itoa(i - 1)
		}
		p := podSpec{name: fmt.Sprintf("%s-%d", name, i), cpu: "4", labels: map[string]string{}, annots: map[string]string{}}
		switch source {
		case "volcano":
			p.annots["scheduling.k8s.io/group-name"] = name
			p.annots["volcano.sh/task-spec"] = role
			p.labels["volcano.sh/task-index"] = index
		case "coscheduling":
			p.labels["scheduling.x-k8s.io/pod-group"] = name
			p.labels["training.kubeflow.org/replica-type"] = role
		case "kubeflow":
			// Without a PodGroup the training operator's labels say nothing of the gang's
			// size: the minimum comes from the project's label (set in the pod template).
			p.labels["training.kubeflow.org/job-name"] = name
			p.labels["training.kubeflow.org/replica-type"] = role
			p.labels["training.kubeflow.org/replica-index"] = index
			p.labels["cps-extender.io/min-member"] = "3"
		case "labels":
			p.labels["cps-extender.io/job"] = name
			p.labels["cps-extender.io/role"] = role
			p.labels["cps-extender.io/index"] = index
			p.labels["cps-extender.io/min-member"] = "3"
		}
		pods = append(pods, p)
	}
	return pods
}

// TestAllGangSources: the deadlock scenario in small (two 3 x 4 CPU gangs on 2 x 8 CPU,
// pods interleaved) with jobs from Volcano PodGroups, coscheduling PodGroups, Kubeflow
// labels and the project's own labels: one job runs whole, the other has nothing bound,
// and it takes over when the first is deleted.
func TestAllGangSources(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "8", "16Gi")...)
	dyn, err := dynamic.NewForConfig(e.cp.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	installPodGroupCRDs(t, e, dyn)
	e.startExtender("")
	e.startScheduler(true)
	for _, source := range []string{"volcano", "coscheduling", "kubeflow", "labels"} {
		t.Run(source, func(t *testing.T) {
			defer e.use(t)()
			a, b := source+"-a", source+"-b"
			if gvr, ok := podGroupSources[source]; ok {
				createPodGroup(t, dyn, gvr, a, 3)
				createPodGroup(t, dyn, gvr, b, 3)
			}
			pa, pb := sourceJob(source, a), sourceJob(source, b)
			e.createPods(pa[0], pb[0], pa[1], pb[1], pa[2], pb[2])
			count := func(pods []podSpec) int {
				bound, n := e.bound("default"), 0
				for _, p := range pods {
					if bound[p.name] != "" {
						n++
					}
				}
				return n
			}
			framework.WaitFor(t, 60*time.Second, "one job fully bound", func() (bool, error) {
				na, nb := count(pa), count(pb)
				return na == 3 || nb == 3, fmt.Errorf("%s %d/3, %s %d/3", a, na, b, nb)
			})
			first, second := pa, pb
			if count(pb) == 3 {
				first, second = pb, pa
			}
			e.waitFailedScheduling("default", second[0].name, "waits for its turn")
			if n := count(second); n != 0 {
				t.Fatalf("the waiting job has %d of 3 pods bound", n)
			}
			e.deletePods("default", first[0].name, first[1].name, first[2].name)
			framework.WaitFor(t, 60*time.Second, "the second job fully bound", func() (bool, error) {
				n := count(second)
				return n == 3, fmt.Errorf("%d/3", n)
			})
			e.deletePods("default", second[0].name, second[1].name, second[2].name)
		})
	}
}
