package tenant

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/gang"
)

// namespaces is a lister over the given namespaces.
func namespaces(t *testing.T, nss ...*corev1.Namespace) corelisters.NamespaceLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range nss {
		if err := idx.Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewNamespaceLister(idx)
}

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
	r := NewReader(namespaces(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Labels: map[string]string{"cps-extender.io/user": "carol"}}}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := config.DefaultConfig().Gang
			g.PodUserNamespaces = tt.podNS
			user, from := r.UserOf(g, tt.namespace, tt.podUser)
			if user != tt.user || from != tt.from {
				t.Errorf("UserOf = %s (%s), want %s (%s)", user, from, tt.user, tt.from)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tt.namespace, Name: "p", Labels: map[string]string{"cps-extender.io/job": "j"}}}
			if tt.podUser != "" {
				pod.Labels["cps-extender.io/user"] = tt.podUser
			}
			m, _ := gang.PodMembership(g, pod)
			checkWarnings(t, r.LabelWarnings(g, pod.Namespace, "", m, nil), tt.warningHas)
		})
	}
}

// checkWarnings fails t unless warnings are one LabelIgnored saying want, or none for "".
func checkWarnings(t *testing.T, warnings []Warning, want string) {
	t.Helper()
	switch {
	case want == "" && len(warnings) > 0:
		t.Errorf("warnings %v, want none", warnings)
	case want != "" && (len(warnings) != 1 || warnings[0].Message != want || warnings[0].Reason != ReasonLabelIgnored):
		t.Errorf("warnings %+v, want one LabelIgnored: %q", warnings, want)
	}
}

// TestUrgencyOf: a pod makes its job urgent by a PriorityClass of gang.urgentPriorityClasses,
// or by the urgent label in a namespace allowed to (listed in gang.urgentLabelNamespaces, or
// labelled cps-extender.io/urgent-allowed=true); the label elsewhere counts for nothing and
// earns a Warning.
func TestUrgencyOf(t *testing.T) {
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
		{name: "the namespace label on a pod not labelled: not urgent", namespace: "allowed"},
	}
	r := NewReader(namespaces(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "allowed", Labels: map[string]string{"cps-extender.io/urgent-allowed": "true"}}}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := config.DefaultConfig().Gang
			g.UrgentPriorityClasses = []string{"ml-urgent"}
			g.UrgentLabelNamespaces = tt.labelNS
			from, _ := r.UrgencyOf(g, tt.namespace, tt.class, tt.labelled)
			if from != tt.from {
				t.Errorf("UrgencyOf = %q, want %q", from, tt.from)
			}
			m := gang.Membership{JobKey: tt.namespace + "/j", Urgent: tt.labelled}
			checkWarnings(t, r.LabelWarnings(g, tt.namespace, tt.class, m, nil), tt.warningHas)
		})
	}
}

// TestLabelWarningsOnce: with Warned, each job gets each label's warning once, whichever
// of its pods comes first; another job gets its own.
func TestLabelWarningsOnce(t *testing.T) {
	g := config.DefaultConfig().Gang
	r := NewReader(nil)
	warned := Warned{}
	tests := []struct {
		name string
		job  string
		user string
		want int
	}{
		{"the first pod of a job", "ns/a", "gold", 1},
		{"another pod of that job", "ns/a", "gold", 0},
		{"a pod of another job", "ns/b", "gold", 1},
		{"a pod naming no user", "ns/c", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := gang.Membership{JobKey: tt.job, User: tt.user}
			if got := r.LabelWarnings(g, "ns", "", m, warned); len(got) != tt.want {
				t.Errorf("%d warnings %+v, want %d", len(got), got, tt.want)
			}
		})
	}
}
