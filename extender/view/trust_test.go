package view

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/tenant"
)

// TestJobTenant: a job's user and urgency are read when the queue is recomputed
// (tenant.Reader, with the namespace labels from the informer), and say where they came
// from; the snapshot carries the Warnings for the labels ignored.
func TestJobTenant(t *testing.T) {
	tests := []struct {
		name       string
		namespace  string
		class      string
		labelled   bool
		podUser    string
		user, from string // the job's user and where it came from
		urgentFrom string // "" for not urgent
		warningHas string // "" for no warning
	}{
		{name: "a listed PriorityClass", namespace: "team-a", class: "ml-urgent", user: "team-a", from: tenant.UserFromNamespace,
			urgentFrom: "PriorityClass ml-urgent (gang.urgentPriorityClasses)"},
		{name: "the label in a namespace labelled to allow it, of a user by its label", namespace: "allowed", labelled: true,
			user: "carol", from: tenant.UserFromNamespaceLabel,
			urgentFrom: "label cps-extender.io/urgent in namespace allowed (namespace label cps-extender.io/urgent-allowed=true)"},
		{name: "the urgent label where its namespace may not: ignored, with a warning", namespace: "team-a", labelled: true,
			user: "team-a", from: tenant.UserFromNamespace,
			warningHas: "cps-extender.io/urgent=true is ignored: namespace team-a may not mark its jobs urgent (gang.urgentLabelNamespaces, or the namespace label cps-extender.io/urgent-allowed=true); job team-a/j is not urgent unless it uses one of the PriorityClasses in gang.urgentPriorityClasses"},
		{name: "a pod naming its user where its namespace may not: ignored, with a warning", namespace: "allowed", podUser: "gold-user",
			user: "carol", from: tenant.UserFromNamespaceLabel,
			warningHas: "label cps-extender.io/user=gold-user is ignored: namespace allowed may not name its pods' user (gang.podUserNamespaces); job allowed/j is ranked as user carol (from the namespace label)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.Gang.UrgentPriorityClasses = []string{"ml-urgent"}
			c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: cfg,
				Holds: &fixedHolds{held: map[types.UID]string{}, coolDowns: map[string]time.Time{}}})
			nsStore := c.factory.Core().V1().Namespaces().Informer().GetStore()
			if err := nsStore.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "allowed", Labels: map[string]string{"cps-extender.io/urgent-allowed": "true", "cps-extender.io/user": "carol"}}}); err != nil {
				t.Fatal(err)
			}
			pod := capacityPod(tt.namespace, "j-0", "j", "", 1000)
			pod.Spec.PriorityClassName = tt.class
			if tt.labelled {
				pod.Labels["cps-extender.io/urgent"] = "true"
			}
			if tt.podUser != "" {
				pod.Labels["cps-extender.io/user"] = tt.podUser
			}
			fillStores(t, c, nil, []*corev1.Pod{pod})
			c.recompute(time.Unix(1_700_000_000, 0))
			job, d, ok := c.Snapshot().Job(tt.namespace + "/j")
			if !ok {
				t.Fatal("no job")
			}
			if job.Urgent != (tt.urgentFrom != "") || job.UrgentFrom != tt.urgentFrom || d.UrgentFrom != tt.urgentFrom {
				t.Errorf("urgent %v from %q (decision %q), want from %q", job.Urgent, job.UrgentFrom, d.UrgentFrom, tt.urgentFrom)
			}
			if job.User != tt.user || job.UserFrom != tt.from {
				t.Errorf("user %s (%s), want %s (%s)", job.User, job.UserFrom, tt.user, tt.from)
			}
			// The snapshot carries the warning too, for the leader to send: a pod no node
			// has room for never reaches the filter. A recompute that changes no label
			// keeps it.
			c.recompute(time.Unix(1_700_000_001, 0))
			if ws := c.Snapshot().Warnings(); (tt.warningHas == "") != (len(ws) == 0) || len(ws) > 0 && (ws[0].Message != tt.warningHas || ws[0].Pod.Name != "j-0") {
				t.Errorf("snapshot warnings %+v, want %q", ws, tt.warningHas)
			}
		})
	}
}

// TestBindCheck: the extender binds only pods of the schedulers it serves, still unbound,
// to a node they may use.
func TestBindCheck(t *testing.T) {
	node := func(name string, taints []corev1.Taint, labels map[string]string, unschedulable bool) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints, Unschedulable: unschedulable},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	gpuTaint := []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	nodes := []*corev1.Node{
		node("plain", nil, map[string]string{"pool": "cpu"}, false),
		node("gpu", gpuTaint, map[string]string{"pool": "gpu"}, false),
		node("cordoned", nil, nil, true),
		{ObjectMeta: metav1.ObjectMeta{Name: "down"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}},
	}
	pod := func(name, scheduler, boundTo string, selector map[string]string, tolerations []corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{SchedulerName: scheduler, NodeName: boundTo, NodeSelector: selector, Tolerations: tolerations}}
	}
	pods := []*corev1.Pod{
		pod("ours", "cps-scheduler", "", nil, nil),
		pod("theirs", "default-scheduler", "", nil, nil),
		pod("bound", "cps-scheduler", "plain", nil, nil),
		pod("cpu-only", "cps-scheduler", "", map[string]string{"pool": "cpu"}, nil),
		pod("tolerant", "cps-scheduler", "", nil, []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}),
	}
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: config.DefaultConfig()})
	fillStores(t, c, nodes, pods)
	tests := []struct {
		pod, uid, node string
		err            string // a part of the error; "" for none
	}{
		{pod: "ours", node: "plain"},
		{pod: "theirs", node: "plain", err: `pod ns/theirs is of scheduler "default-scheduler", not one this extender binds for (cps-scheduler)`},
		{pod: "bound", node: "gpu", err: "pod ns/bound is bound to plain already"},
		{pod: "ours", node: "gpu", err: "it has a taint the pod does not tolerate (nvidia.com/gpu=present:NoSchedule)"},
		{pod: "tolerant", node: "gpu"},
		{pod: "cpu-only", node: "gpu", err: "it does not match the pod's node selector"},
		{pod: "ours", node: "cordoned", err: "node.kubernetes.io/unschedulable"},
		{pod: "ours", node: "down", err: "node.kubernetes.io/not-ready"},
		{pod: "ours", node: "nowhere", err: "node nowhere is not in the extender's view"},
		{pod: "ghost", node: "plain", err: "pod ns/ghost no longer exists"},
		{pod: "ours", uid: "uid-older", node: "plain", err: "is not the pod of UID uid-older"},
	}
	for _, tt := range tests {
		uid := tt.uid
		if uid == "" {
			uid = "uid-" + tt.pod
		}
		err := c.BindCheck(context.Background(), gang.PodRef{Namespace: "ns", Name: tt.pod, UID: types.UID(uid)}, tt.node)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s on %s: %v, want no error", tt.pod, tt.node, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s on %s: %v, want an error containing %q", tt.pod, tt.node, err, tt.err)
		}
	}
}
