package view

import (
	"testing"

	"github.com/cps-extender/cps-extender/extender/config"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/extender/sources"
	"github.com/cps-extender/cps-extender/priority"
	loadfixture "github.com/cps-extender/cps-extender/test/load/fixture"
)

// Heartbeats and status-only updates must not cost a recompute; real changes must.
func TestIndexChangesThatNeedARecompute(t *testing.T) {
	x := newViewIndex()
	cfg := &viewConfig{gang: config.DefaultConfig().Gang}
	x.cfg = cfg
	node := loadfixture.Nodes(loadfixture.Spec{Nodes: 1})[0]
	pod := loadfixture.Pods(loadfixture.Spec{Jobs: 1, PodsPerJob: 1})[0]
	heartbeat := node.DeepCopy()
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	resized := node.DeepCopy()
	resized.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("1")
	cordoned := node.DeepCopy()
	cordoned.Spec.Unschedulable = true
	relabelled := node.DeepCopy()
	relabelled.Labels[loadfixture.RackLabel] = "elsewhere"
	for _, tt := range []struct {
		name string
		node *corev1.Node
		want bool
	}{{"new node", node, true}, {"heartbeat", heartbeat, false}, {"allocatable", resized, true}, {"cordoned", cordoned, true}, {"labels", relabelled, true}} {
		before := x.changes.Load()
		if got := x.setNode(tt.node); got != tt.want {
			t.Errorf("node %s: setNode = %v, want %v", tt.name, got, tt.want)
		}
		if counted := x.changes.Load() != before; counted != tt.want {
			t.Errorf("node %s: change counted = %v, want %v", tt.name, counted, tt.want)
		}
	}
	ready := pod.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	bound := ready.DeepCopy()
	bound.Spec.NodeName = node.Name
	scheduled := bound.DeepCopy()
	scheduled.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	// A pod with a topology request: its records hold the request by pointer, a new one
	// each time, which must not read as a change.
	withTopology := scheduled.DeepCopy()
	withTopology.Annotations = map[string]string{"cps-extender.io/topology-required": loadfixture.RackLabel}
	withTopologyStatus := withTopology.DeepCopy()
	withTopologyStatus.Status.Conditions = append(withTopologyStatus.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	relabelledPod := withTopologyStatus.DeepCopy()
	relabelledPod.Labels[loadfixture.JobLabel] = "other"
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{{"new pod", pod, true}, {"status condition", ready, false}, {"bound", bound, true}, {"scheduled at", scheduled, true},
		{"topology requested", withTopology, true}, {"status of a pod with a topology request", withTopologyStatus, false},
		{"other job", relabelledPod, true}} {
		before := x.changes.Load()
		if got := x.setPod(tt.pod, cfg); got != tt.want {
			t.Errorf("pod %s: setPod = %v, want %v", tt.name, got, tt.want)
		}
		if counted := x.changes.Load() != before; counted != tt.want {
			t.Errorf("pod %s: change counted = %v, want %v", tt.name, counted, tt.want)
		}
	}
	before := x.changes.Load()
	x.deletePod(pod)
	if x.changes.Load() == before {
		t.Error("deleting a pod was not counted as a change")
	}
}

// TestTrimForCacheKeepsWhatTheViewReads: a pod trimmed for the informer cache gives the
// same record as the whole pod (request, membership, node, gates, priority...), and loses
// its env, volumes, commands and statuses.
func TestTrimForCacheKeepsWhatTheViewReads(t *testing.T) {
	cfg := config.DefaultConfig().Gang
	full := loadfixture.Pods(loadfixture.Spec{Jobs: 1, PodsPerJob: 2})[1]
	full.Spec.NodeName = "node-1"
	full.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}}
	full.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	full.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"sh"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
	always := corev1.ContainerRestartPolicyAlways
	full.Spec.InitContainers = append(full.Spec.InitContainers, corev1.Container{Name: "sidecar", Image: "proxy", RestartPolicy: &always,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}})
	full.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}
	full.Spec.NodeSelector = map[string]string{"pool": "a"}
	full.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}},
		}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
	}, PodAntiAffinity: &corev1.PodAntiAffinity{}}
	full.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	full.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
	full.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	full.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: full.Spec.Containers[0].Name, Image: "trainer",
		AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}}
	// A status that reports no resources reads as none: it is not kept.
	full.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", Image: "proxy", Ready: true}}
	full.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "long"}, {Type: corev1.PodReady}}
	want := newPodRecord(full, cfg)
	obj, err := sources.TrimForCache(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := obj.(*corev1.Pod)
	got := newPodRecord(trimmed, cfg)
	if !samePodRecord(want, got) || got.counted != want.counted || got.turnedAway != want.turnedAway || !want.turnedAway {
		t.Errorf("trimmed record %+v, want %+v", got, want)
	}
	// Every field above counts: the resize in progress (5 CPU allocated) plus the sidecar
	// (1), the overhead (100m), pod-level memory.
	if diff := cmp.Diff(priority.Resources{"cpu": 6100, "memory": 8 << 30}, got.request); diff != "" {
		t.Errorf("request of the trimmed pod (-want +got):\n%s", diff)
	}
	if trimmed.Spec.Volumes != nil || trimmed.Spec.Containers[0].Env != nil || trimmed.Spec.InitContainers[0].Image != "" ||
		trimmed.Status.ContainerStatuses[0].Image != "" || trimmed.Status.InitContainerStatuses != nil || trimmed.Spec.Affinity.PodAntiAffinity != nil ||
		trimmed.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution != nil || len(trimmed.Status.Conditions) != 1 {
		t.Errorf("trimmed pod still carries what the view never reads: %+v", trimmed)
	}

	// A Workload API PodGroup's member names its group in the spec alone.
	member := full.DeepCopy()
	delete(member.Labels, cfg.JobLabel)
	group := "pg"
	member.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
	obj, err = sources.TrimForCache(member.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if r := newPodRecord(obj.(*corev1.Pod), cfg); !r.inJob || r.jobKey() != member.Namespace+"/pg" {
		t.Errorf("trimmed PodGroup member: in a job %v, key %q; want %s/pg", r.inJob, r.jobKey(), member.Namespace)
	}
}
