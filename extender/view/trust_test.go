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
)

// TestUserOf: the user comes from the namespace (its label, else its name); a pod's label
// counts only in the namespaces allowed to name their pods' user, and elsewhere earns a
// Warning naming the user the job is ranked as.
func TestUserOf(t *testing.T) {
	tests := []struct {
		name       string
		podNS      []string // gang.podUserNamespaces
		namespace  string
		podUser    string
		user, from string
		warningHas string // "" for no warning
	}{
		{name: "the namespace's name", namespace: "team-a", user: "team-a", from: UserFromNamespace},
		{name: "the namespace's label", namespace: "labelled", user: "carol", from: UserFromNamespaceLabel},
		{name: "a pod label where its namespace may not: ignored, with a warning", namespace: "labelled", podUser: "gold-user",
			user: "carol", from: UserFromNamespaceLabel, warningHas: "label cps-extender.io/user=gold-user is ignored: namespace labelled may not name its pods' user (gang.podUserNamespaces); job labelled/j is ranked as user carol (from the namespace label)"},
		{name: "a pod label where its namespace may", podNS: []string{"pipelines"}, namespace: "pipelines", podUser: "alice", user: "alice", from: UserFromPodLabel},
		{name: "a pod label anywhere with *", podNS: []string{"*"}, namespace: "team-a", podUser: "alice", user: "alice", from: UserFromPodLabel},
	}
	client := fake.NewClientset()
	c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: client, Config: config.DefaultConfig()})
	nsStore := c.factory.Core().V1().Namespaces().Informer().GetStore()
	if err := nsStore.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Labels: map[string]string{"cps-extender.io/user": "carol"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.Gang.PodUserNamespaces = tt.podNS
			vc := &viewConfig{gang: cfg.Gang}
			user, from := c.userOf(tt.namespace, tt.podUser, cfg.Gang)
			if user != tt.user || from != tt.from {
				t.Errorf("userOf = %s (%s), want %s (%s)", user, from, tt.user, tt.from)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tt.namespace, Name: "p", Labels: map[string]string{"cps-extender.io/job": "j"}}}
			if tt.podUser != "" {
				pod.Labels["cps-extender.io/user"] = tt.podUser
			}
			m, _ := gang.PodMembership(cfg.Gang, pod)
			warnings := c.ignoredLabels(vc, pod, m)
			switch {
			case tt.warningHas == "" && len(warnings) > 0:
				t.Errorf("warnings %v, want none", warnings)
			case tt.warningHas != "" && (len(warnings) != 1 || warnings[0].Message != tt.warningHas || warnings[0].Reason != ReasonLabelIgnored):
				t.Errorf("warnings %+v, want one LabelIgnored: %q", warnings, tt.warningHas)
			}
		})
	}
}

// TestUrgency: a job is urgent when a pod of it uses a PriorityClass of
// gang.urgentPriorityClasses, or carries the urgent label in a namespace allowed to (listed in
// gang.urgentLabelNamespaces, or labelled cps-extender.io/urgent-allowed=true); the label
// elsewhere counts for nothing and earns a Warning. The job says where its urgency came from.
func TestUrgency(t *testing.T) {
	tests := []struct {
		name       string
		labelNS    []string // gang.urgentLabelNamespaces
		namespace  string
		class      string
		labelled   bool
		from       string // "" for not urgent
		warningHas string // "" for no warning
	}{
		{name: "a listed PriorityClass, anywhere", namespace: "team-a", class: "ml-urgent", from: "PriorityClass ml-urgent (gang.urgentPriorityClasses)"},
		{name: "a PriorityClass not listed", namespace: "team-a", class: "high"},
		{name: "the label where its namespace may not: ignored, with a warning", namespace: "team-a", labelled: true,
			warningHas: "cps-extender.io/urgent=true is ignored: namespace team-a may not mark its jobs urgent (gang.urgentLabelNamespaces, or the namespace label cps-extender.io/urgent-allowed=true); job team-a/j is not urgent unless it uses one of the PriorityClasses in gang.urgentPriorityClasses"},
		{name: "the label and a listed PriorityClass: urgent by the class, no warning", namespace: "team-a", class: "ml-urgent", labelled: true,
			from: "PriorityClass ml-urgent (gang.urgentPriorityClasses)"},
		{name: "the label in a listed namespace", labelNS: []string{"oncall"}, namespace: "oncall", labelled: true,
			from: "label cps-extender.io/urgent in namespace oncall (gang.urgentLabelNamespaces)"},
		{name: "the label anywhere with *", labelNS: []string{"*"}, namespace: "team-a", labelled: true,
			from: "label cps-extender.io/urgent in namespace team-a (gang.urgentLabelNamespaces)"},
		{name: "the label in a namespace labelled to allow it", namespace: "allowed", labelled: true,
			from: "label cps-extender.io/urgent in namespace allowed (namespace label cps-extender.io/urgent-allowed=true)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.Gang.UrgentPriorityClasses = []string{"ml-urgent"}
			cfg.Gang.UrgentLabelNamespaces = tt.labelNS
			c := NewCluster(ClusterOptions{Log: zap.NewNop(), Client: fake.NewClientset(), Config: cfg,
				Holds: &fixedHolds{held: map[types.UID]string{}, coolDowns: map[string]time.Time{}}})
			nsStore := c.factory.Core().V1().Namespaces().Informer().GetStore()
			if err := nsStore.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "allowed", Labels: map[string]string{"cps-extender.io/urgent-allowed": "true"}}}); err != nil {
				t.Fatal(err)
			}
			pod := capacityPod(tt.namespace, "j-0", "j", "", 1000)
			pod.Spec.PriorityClassName = tt.class
			if tt.labelled {
				pod.Labels["cps-extender.io/urgent"] = "true"
			}
			fillStores(t, c, nil, []*corev1.Pod{pod})
			c.recompute(time.Unix(1_700_000_000, 0))
			job, d, ok := c.Snapshot().Job(tt.namespace + "/j")
			if !ok {
				t.Fatal("no job")
			}
			if job.Urgent != (tt.from != "") || job.UrgentFrom != tt.from || d.UrgentFrom != tt.from {
				t.Errorf("urgent %v from %q (decision %q), want from %q", job.Urgent, job.UrgentFrom, d.UrgentFrom, tt.from)
			}
			// The snapshot carries the warning too, for the leader to send: a pod no node
			// has room for never reaches the filter. A recompute that changes no label
			// keeps it.
			c.recompute(time.Unix(1_700_000_001, 0))
			if ws := c.Snapshot().Warnings(); (tt.warningHas == "") != (len(ws) == 0) || len(ws) > 0 && (ws[0].Message != tt.warningHas || ws[0].Pod.Name != "j-0") {
				t.Errorf("snapshot warnings %+v, want %q", ws, tt.warningHas)
			}
			m, _ := gang.PodMembership(cfg.Gang, pod)
			warnings := c.ignoredLabels(&viewConfig{gang: cfg.Gang}, pod, m)
			switch {
			case tt.warningHas == "" && len(warnings) > 0:
				t.Errorf("warnings %v, want none", warnings)
			case tt.warningHas != "" && (len(warnings) != 1 || warnings[0].Message != tt.warningHas || warnings[0].Reason != ReasonLabelIgnored):
				t.Errorf("warnings %+v, want one LabelIgnored: %q", warnings, tt.warningHas)
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
