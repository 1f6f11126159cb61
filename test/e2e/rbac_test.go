//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// extenderUser is the token user cps-extender runs as in the end-to-end tests.
const extenderUser = "cps-extender"

// extenderClusterRole and extenderRole are the shipped ClusterRole and the Role in the
// extender's namespace (with its RoleBinding), relative to the repository root.
const (
	extenderClusterRole = "deploy/base/clusterrole.yaml"
	extenderRole        = "deploy/base/role.yaml"
)

// grantExtenderRole creates the ClusterRole and the Role of deploy/base (read from their
// files) and binds them to subject, and nothing else.
func grantExtenderRole(t testing.TB, cp *framework.ControlPlane, root string, subject rbacv1.Subject) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, extenderClusterRole))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatalf("%s: %v", extenderClusterRole, err)
	}
	ctx := context.Background()
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterRole %s: %v", role.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-e2e"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterRoleBinding: %v", err)
	}
	raw, err = os.ReadFile(filepath.Join(root, extenderRole))
	if err != nil {
		t.Fatal(err)
	}
	var nsRole rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(strings.Split(string(raw), "\n---\n")[0]), &nsRole); err != nil {
		t.Fatalf("%s: %v", extenderRole, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsRole.Namespace}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns.Name, err)
	}
	if _, err := cp.Client.RbacV1().Roles(nsRole.Namespace).Create(ctx, &nsRole, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role %s: %v", nsRole.Name, err)
	}
	nsBinding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: nsRole.Name + "-e2e", Namespace: nsRole.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: nsRole.Name},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := cp.Client.RbacV1().RoleBindings(nsRole.Namespace).Create(ctx, nsBinding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding: %v", err)
	}
}

// TestRBACExtenderRole checks that deploy/base's ClusterRole grants cps-extender what it calls
// and no more: each of its calls is allowed, and writes beyond binding and events, and reads
// of anything else, are refused. (That the role is enough to schedule is shown by every other
// end-to-end test: they all run the extender as extenderUser.)
func TestRBACExtenderRole(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 1, "4", "8Gi")...)
	ctx := context.Background()
	user, err := kubernetes.NewForConfig(e.cp.UserConfig(extenderUser))
	if err != nil {
		t.Fatal(err)
	}
	e.createPods(podSpec{name: "p"})

	t.Run("access review", func(t *testing.T) {
		type attr = authorizationv1.ResourceAttributes
		for _, c := range []struct {
			attr  attr
			allow bool
		}{
			{attr{Verb: "list", Resource: "pods"}, true},
			{attr{Verb: "watch", Resource: "pods"}, true},
			{attr{Verb: "get", Resource: "pods", Namespace: "default"}, true},
			{attr{Verb: "list", Resource: "nodes"}, true},
			{attr{Verb: "watch", Resource: "namespaces"}, true},
			{attr{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default"}, true},
			{attr{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "default"}, true},
			{attr{Verb: "patch", Resource: "pods", Namespace: "default"}, true},
			{attr{Verb: "list", Group: "policy", Resource: "poddisruptionbudgets"}, true},
			{attr{Verb: "watch", Group: "policy", Resource: "poddisruptionbudgets"}, true},
			{attr{Verb: "create", Group: "policy", Resource: "poddisruptionbudgets", Namespace: "default"}, false},
			{attr{Verb: "create", Resource: "events", Namespace: "default"}, true},
			{attr{Verb: "patch", Resource: "events", Namespace: "default"}, true},
			{attr{Verb: "list", Group: "scheduling.volcano.sh", Resource: "podgroups"}, true},
			{attr{Verb: "watch", Group: "scheduling.x-k8s.io", Resource: "podgroups"}, true},
			{attr{Verb: "list", Group: "scheduling.k8s.io", Resource: "podgroups"}, true},
			{attr{Verb: "watch", Group: "kubeflow.org", Resource: "tfjobs"}, true},
			{attr{Verb: "list", Group: "kubeflow.org", Resource: "pytorchjobs"}, true},
			{attr{Verb: "list", Group: "jobset.x-k8s.io", Resource: "jobsets"}, true},
			{attr{Verb: "watch", Group: "leaderworkerset.x-k8s.io", Resource: "leaderworkersets"}, true},
			{attr{Verb: "list", Group: "ray.io", Resource: "rayclusters"}, true},
			{attr{Verb: "watch", Group: "batch", Resource: "jobs"}, true},
			{attr{Verb: "get", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "cps-extender-turn-gate"}, true},
			{attr{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "cps-extender-turn-gate"}, true},
			{attr{Verb: "create", Resource: "secrets", Namespace: "cps-system"}, true},
			{attr{Verb: "get", Resource: "secrets", Namespace: "cps-system", Name: "cps-extender-webhook-tls"}, true},
			{attr{Verb: "update", Resource: "secrets", Namespace: "cps-system", Name: "cps-extender-webhook-tls"}, true},

			{attr{Verb: "delete", Resource: "pods", Namespace: "default"}, false},
			{attr{Verb: "create", Resource: "pods", Namespace: "default"}, false},
			{attr{Verb: "update", Resource: "pods", Namespace: "default"}, false},
			{attr{Verb: "patch", Resource: "pods", Subresource: "status", Namespace: "default"}, false},

			{attr{Verb: "update", Resource: "nodes"}, false},
			{attr{Verb: "delete", Resource: "namespaces"}, false},
			{attr{Verb: "list", Resource: "secrets"}, false},
			{attr{Verb: "get", Resource: "secrets", Namespace: "cps-system", Name: "other"}, false},
			{attr{Verb: "create", Resource: "secrets", Namespace: "default"}, false},
			{attr{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "other"}, false},
			{attr{Verb: "list", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, false},
			{attr{Verb: "get", Resource: "configmaps", Namespace: "kube-system"}, false},
			{attr{Verb: "delete", Resource: "events", Namespace: "default"}, false},
			{attr{Verb: "update", Group: "scheduling.volcano.sh", Resource: "podgroups", Namespace: "default"}, false},
			{attr{Verb: "create", Group: "scheduling.k8s.io", Resource: "podgroups", Namespace: "default"}, false},
			{attr{Verb: "update", Group: "kubeflow.org", Resource: "tfjobs", Namespace: "default"}, false},
			{attr{Verb: "delete", Group: "jobset.x-k8s.io", Resource: "jobsets", Namespace: "default"}, false},
			{attr{Verb: "create", Group: "batch", Resource: "jobs", Namespace: "default"}, false},
			{attr{Verb: "list", Group: "kubeflow.org", Resource: "notebooks"}, false},
			{attr{Verb: "list", Group: "scheduling.k8s.io", Resource: "priorityclasses"}, false},
			{attr{Verb: "list", Group: "apps", Resource: "deployments"}, false},
			{attr{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}, false},
		} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &c.attr}}
			got, err := user.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Allowed != c.allow {
				t.Errorf("%s %s/%s/%s in %q: allowed %v, want %v", c.attr.Verb, c.attr.Group, c.attr.Resource, c.attr.Subresource, c.attr.Namespace, got.Status.Allowed, c.allow)
			}
		}
	})

	t.Run("allowed calls", func(t *testing.T) {
		if _, err := user.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); err != nil {
			t.Errorf("get pod: %v", err)
		}
		if _, err := user.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list nodes: %v", err)
		}
		if _, err := user.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list namespaces: %v", err)
		}
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "p.rbac", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
			Reason:         "RBACCheck", Message: "created as " + extenderUser, Type: corev1.EventTypeNormal,
			FirstTimestamp: metav1.NewTime(time.Now()), LastTimestamp: metav1.NewTime(time.Now()), Count: 1,
		}
		if _, err := user.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Errorf("create event: %v", err)
		}
		if _, err := user.CoreV1().Events("default").Patch(ctx, ev.Name, types.StrategicMergePatchType, []byte(`{"count":2}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("patch event: %v", err)
		}
		// Discovery, which tells the extender which PodGroup kinds are served.
		if _, err := user.Discovery().ServerGroups(); err != nil {
			t.Errorf("discovery: %v", err)
		}
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-0"}}
		if err := user.CoreV1().Pods("default").Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Errorf("bind pod: %v", err)
		}
	})

	t.Run("forbidden calls", func(t *testing.T) {
		forbidden := func(what string, err error) {
			t.Helper()
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: got %v, want Forbidden", what, err)
			}
		}
		zero := int64(0)
		forbidden("delete pod", user.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
		_, err := user.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
		forbidden("list secrets", err)
		node, err := e.cp.Client.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Labels["rbac-check"] = "x"
		_, err = user.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		forbidden("update node", err)
		_, err = user.CoreV1().Pods("default").Create(ctx, podSpec{name: "q"}.pod(), metav1.CreateOptions{})
		forbidden("create pod", err)
		// And nothing of it happened.
		if _, err := e.cp.Client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); err != nil {
			t.Errorf("pod p after the refused delete: %v", err)
		}
	})
}
