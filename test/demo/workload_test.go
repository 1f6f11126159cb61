package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestShippedWorkloadTenants loads test/demo/workload.yaml and checks the tenants' layout:
// every user has a namespace labelled with the user, every job's pods are in its user's
// namespace and name no user (the extender takes it from the namespace), and the job keys
// the queue shows are namespace/name.
func TestShippedWorkloadTenants(t *testing.T) {
	work, err := loadWorkload("workload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientset()
	if err := createUserNamespaces(c, work); err != nil {
		t.Fatal(err)
	}
	list, err := c.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	userOf := map[string]string{}
	for _, ns := range list.Items {
		userOf[ns.Name] = ns.Labels[labelUser]
	}
	if len(userOf) != len(work.Users) {
		t.Errorf("namespaces %v, want one per user of %v", userOf, work.Users)
	}
	for user := range work.Users {
		if got := userOf["team-"+user]; got != user {
			t.Errorf("namespace team-%s: user label %q, want %q", user, got, user)
		}
	}
	users := map[string]bool{}
	for _, j := range work.Jobs {
		users[j.User] = true
		if want := "team-" + j.User + "/" + j.Name; j.Key() != want {
			t.Errorf("job %s: key %q, want %q", j.Name, j.Key(), want)
		}
		pods := j.Pods()
		if len(pods) != j.Size() {
			t.Fatalf("job %s: %d pods, want %d", j.Name, len(pods), j.Size())
		}
		for i, p := range pods {
			if userOf[p.Namespace] != j.User {
				t.Errorf("pod %s of %s's job %s is in namespace %q, of user %q", p.Name, j.User, j.Name, p.Namespace, userOf[p.Namespace])
			}
			if v, ok := p.Labels[labelUser]; ok {
				t.Errorf("pod %s/%s names its user %q by label", p.Namespace, p.Name, v)
			}
			if key := p.Namespace + "/" + p.Name; key != j.PodKeys()[i] {
				t.Errorf("pod %s, want %s", key, j.PodKeys()[i])
			}
		}
	}
	if len(users) < 3 {
		t.Errorf("the demo has %d users with jobs: the tiers show little", len(users))
	}
	// Interleaving keeps every pod in its job's namespace.
	for _, p := range interleavedPods(work.Jobs) {
		if job := p.Labels[labelJob]; !strings.HasPrefix(p.Name, job+"-") || userOf[p.Namespace] == "" {
			t.Errorf("interleaved pod %s/%s of job %s", p.Namespace, p.Name, job)
		}
	}
}

func TestWorkloadNamespaceChecks(t *testing.T) {
	base := `users: {alice: gold}
priorityClasses: {p: 1}
jobs:
- {name: j, user: alice, priorityClass: p, ps: 1, workers: 1, cpu: "1"}
`
	for _, c := range []struct {
		name, file, wantErr string
	}{
		{"prefix", "namespacePrefix: team-\n" + base, ""},
		{"no prefix: the user's name", base, ""},
		{"bad prefix", "namespacePrefix: Team_\n" + base, `namespace "Team_alice"`},
		{"the old single namespace", "namespace: demo\n" + base, `unknown field "namespace"`},
	} {
		path := filepath.Join(t.TempDir(), "w.yaml")
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		w, err := loadWorkload(path)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.wantErr)
		case err == nil && w.Jobs[0].Namespace != w.NamespacePrefix+"alice":
			t.Errorf("%s: job in namespace %q", c.name, w.Jobs[0].Namespace)
		}
	}
}

// TestBindRecorderNamespaces: the recorder keys pods by namespace/name and ignores pods of
// other namespaces, even of the same name.
func TestBindRecorderNamespaces(t *testing.T) {
	r := newBindRecorder([]string{"team-alice", "team-bob"})
	pod := func(ns string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Namespace, p.Name, p.Spec.NodeName = ns, "j-ps-0", "node-0"
		return p
	}
	r.observe(pod("default"))
	r.observe(pod("team-bob"))
	if got := r.BoundCount([]string{"team-alice/j-ps-0", "team-bob/j-ps-0", "default/j-ps-0"}); got != 1 {
		t.Errorf("bound %d, want only team-bob/j-ps-0", got)
	}
	r.deleted(pod("team-alice"))
	r.deleted(pod("default"))
	if got := r.FirstGone([]string{"default/j-ps-0", "team-bob/j-ps-0", "team-alice/j-ps-0"}); got != "team-alice/j-ps-0" {
		t.Errorf("first gone %q, want team-alice/j-ps-0", got)
	}
}
