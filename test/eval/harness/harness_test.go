package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/priority"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/test/eval"
)

func TestInterleave(t *testing.T) {
	pod := func(n string) *corev1.Pod { p := &corev1.Pod{}; p.Name = n; return p }
	got := interleave([][]*corev1.Pod{{pod("a0"), pod("a1"), pod("a2")}, {pod("b0")}, {pod("c0"), pod("c1")}})
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if want := "a0 b0 c0 a1 c1 a2"; strings.Join(names, " ") != want {
		t.Errorf("interleave: %s, want %s", strings.Join(names, " "), want)
	}
}

func TestJobPods(t *testing.T) {
	j := eval.Job{Name: "job-001", User: "ana", Tier: eval.TierGold, PriorityClass: eval.UrgentClass.Name, Urgent: true, PS: 2, Workers: 3}
	for _, c := range []struct {
		setup     Setup
		class     string
		withGroup bool
	}{
		{Setups[0], "", false},
		{Setup{Name: "pc", PriorityClasses: true}, eval.UrgentClass.Name, false},
		{Setup{Name: "gang", PriorityClasses: true, NativeGang: true}, eval.UrgentClass.Name, true},
	} {
		pods := jobPods(j, c.setup)
		if len(pods) != 5 || pods[0].Name != "job-001-ps-0" || pods[2].Name != "job-001-worker-0" {
			t.Fatalf("%s: pods %v", c.setup.Name, pods)
		}
		for i, p := range pods {
			l := p.Labels
			if l["cps-extender.io/job"] != "job-001" || l["cps-extender.io/min-member"] != "5" || l["cps-extender.io/urgent"] != "" {
				t.Errorf("%s: %s labels %v", c.setup.Name, p.Name, l)
			}
			// The user is the namespace's, not the pod's.
			if _, ok := l[userLabel]; ok || p.Namespace != "team-ana" {
				t.Errorf("%s: %s in namespace %q with labels %v, want team-ana and no %s label", c.setup.Name, p.Name, p.Namespace, l, userLabel)
			}
			if p.Spec.SchedulerName != schedulerName || p.Spec.PriorityClassName != c.class {
				t.Errorf("%s: %s scheduler %q class %q", c.setup.Name, p.Name, p.Spec.SchedulerName, p.Spec.PriorityClassName)
			}
			if got := p.Spec.SchedulingGroup != nil && *p.Spec.SchedulingGroup.PodGroupName == "job-001"; got != c.withGroup {
				t.Errorf("%s: %s scheduling group %v", c.setup.Name, p.Name, p.Spec.SchedulingGroup)
			}
			res := p.Spec.Containers[0].Resources
			gpu, want := res.Limits[gpuResource], int64(0)
			if i >= 2 {
				want = eval.WorkerGPU
			}
			if gpu.Value() != want || !res.Requests[gpuResource].Equal(res.Limits[gpuResource]) {
				t.Errorf("%s: %s GPU request %v limit %v, want %d", c.setup.Name, p.Name, res.Requests[gpuResource], gpu, want)
			}
		}
	}
}

// TestUsersNamespaces checks the tenants' layout on a generated workload, under every
// setup: each job's pods are in its user's namespace and name no user, so the user the
// extender ranks them as is the namespace's label; each namespace is labelled with its user.
func TestUsersNamespaces(t *testing.T) {
	c := fake.NewClientset()
	if err := createNamespaces(c); err != nil {
		t.Fatal(err)
	}
	if err := createNamespaces(c); err != nil { // every setup's control plane is fresh, but twice is fine
		t.Fatalf("createNamespaces again: %v", err)
	}
	list, err := c.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	userOf := map[string]string{}
	for _, ns := range list.Items {
		userOf[ns.Name] = ns.Labels[userLabel]
	}
	if len(userOf) != len(eval.Users) {
		t.Errorf("namespaces %v, want one per user of %v", userOf, eval.Users)
	}
	for _, u := range eval.Users {
		if got := userOf["team-"+u.Name]; got != u.Name {
			t.Errorf("namespace team-%s: user label %q, want %q", u.Name, got, u.Name)
		}
	}
	w := eval.Generate(eval.Small())
	users := map[string]bool{}
	for _, s := range Setups {
		for _, j := range w.Jobs {
			users[j.User] = true
			for _, p := range jobPods(j, s) {
				if userOf[p.Namespace] != j.User || p.Namespace != j.Namespace() {
					t.Fatalf("%s: pod %s of %s's job %s in namespace %q (user %q)", s.Name, p.Name, j.User, j.Name, p.Namespace, userOf[p.Namespace])
				}
				if v, ok := p.Labels[userLabel]; ok {
					t.Fatalf("%s: pod %s/%s names its user %q by label", s.Name, p.Namespace, p.Name, v)
				}
			}
			if got, want := j.Key(), "team-"+j.User+"/"+j.Name; got != want {
				t.Fatalf("job key %q, want %q", got, want)
			}
		}
	}
	if len(users) < 2 {
		t.Errorf("the small workload has %d users: the check proves little", len(users))
	}
}

// TestRecorderKeysPodsByNamespace: the recorder watches every namespace and records only the
// workload's pods, by namespace/name; a pod of the same name in another namespace is not one.
func TestRecorderKeysPodsByNamespace(t *testing.T) {
	j := eval.Job{Name: "job-000", User: "ana", Tier: eval.TierGold, PS: 1, Workers: 1, Base: time.Minute}
	r := newRecorder(nil, eval.Workload{Jobs: []eval.Job{j}}, Setups[0], map[string]string{"node-00": "rack-0"})
	r.start()
	bound := func(ns string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Namespace, p.Name, p.Spec.NodeName = ns, "job-000-ps-0", "node-00"
		return p
	}
	r.observe(bound("default"), false)
	if spans := r.jobs[0].rec.Spans; len(spans) != 0 {
		t.Fatalf("a pod of another namespace was recorded: %+v", spans)
	}
	r.observe(bound("team-ana"), false)
	if spans := r.jobs[0].rec.Spans; len(spans) != 1 || spans[0].Pod != "team-ana/job-000-ps-0" {
		t.Fatalf("spans %+v, want the pod team-ana/job-000-ps-0", spans)
	}
}

func TestNodeSpecsRacks(t *testing.T) {
	specs := nodeSpecs(eval.Params{Nodes: 16, Racks: 4})
	racks := rackOf(specs)
	if len(specs) != 16 || racks["node-00"] != "rack-0" || racks["node-03"] != "rack-0" || racks["node-04"] != "rack-1" || racks["node-15"] != "rack-3" {
		t.Errorf("racks: %v", racks)
	}
	gpu := specs[0].Capacity[gpuResource]
	if gpu.Value() != eval.NodeGPU {
		t.Errorf("node GPUs %v", gpu)
	}
}

func TestSchedulerConfig(t *testing.T) {
	with, err := schedulerConfig("/k", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	without, err := schedulerConfig("/k", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg       string
		extenders bool
	}{{string(with), true}, {string(without), false}} {
		if !strings.Contains(c.cfg, "kubeconfig: /k") || !strings.Contains(c.cfg, "leaderElect: false") || !strings.Contains(c.cfg, "schedulerName: "+schedulerName) {
			t.Errorf("config:\n%s", c.cfg)
		}
		if got := strings.Contains(c.cfg, "urlPrefix: http://127.0.0.1:9/scheduler"); got != c.extenders {
			t.Errorf("extender URL present %v, want %v:\n%s", got, c.extenders, c.cfg)
		}
		if got := strings.Contains(c.cfg, "extenders:"); got != c.extenders {
			t.Errorf("extenders block present %v, want %v", got, c.extenders)
		}
	}
}

// TestExtenderConfig loads the generated configuration with the extender's own loader.
func TestExtenderConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cps-extender.yaml")
	for _, s := range []Setup{{Policy: "strict"}, {Policy: "reserve", Preemption: "off"}, {Policy: "backfill"}, {Policy: "reserve", TurnGate: true}} {
		hookAddr := ""
		if s.TurnGate {
			hookAddr = "127.0.0.1:10"
		}
		if err := os.WriteFile(path, []byte(extenderConfig("127.0.0.1:9", hookAddr, "/k", s)), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, errs := config.LoadConfig(path)
		if len(errs) > 0 {
			t.Fatalf("LoadConfig: %v", errs)
		}
		m := cfg.Model.PriorityModel()
		wantMode := priority.PreemptionMode(s.Preemption)
		if wantMode == "" {
			wantMode = priority.DefaultModel().Preemption
		}
		if string(m.Policy) != s.Policy || m.Preemption != wantMode || m.StarvationBound != 30*time.Second || m.Tau != 10*time.Second ||
			m.MinRunTime != 10*time.Second || m.PreemptionWindow != 10*time.Second || m.SpreadAfter != 5*time.Second || m.ReserveAfter != 10*time.Second ||
			m.UserTiers["ana"] != eval.TierGold || m.UserTiers["hal"] != eval.TierBronze {
			t.Errorf("model %+v", m)
		}
		// Users come from the namespaces' label: no namespace may name its pods' user.
		if cfg.Gang.UserLabel != userLabel || len(cfg.Gang.PodUserNamespaces) != 0 {
			t.Errorf("gang.userLabel %q (want %q), podUserNamespaces %v (want none)", cfg.Gang.UserLabel, userLabel, cfg.Gang.PodUserNamespaces)
		}
		// Urgency comes from the PriorityClass, as an admin grants it.
		if len(cfg.Gang.UrgentPriorityClasses) != 1 || cfg.Gang.UrgentPriorityClasses[0] != eval.UrgentClass.Name {
			t.Errorf("gang.urgentPriorityClasses %v, want [%s]", cfg.Gang.UrgentPriorityClasses, eval.UrgentClass.Name)
		}
		if len(cfg.Affinity.Topology) != 1 || cfg.Affinity.Topology[0] != rackLabel {
			t.Errorf("topology %v", cfg.Affinity.Topology)
		}
		if errs := cfg.Validate(); len(errs) > 0 || cfg.Webhook.Listen != hookAddr || (s.TurnGate && !cfg.Webhook.SelfSigned()) {
			t.Errorf("webhook %+v (%v), want listen %q with the certificate kept", cfg.Webhook, errs, hookAddr)
		}
	}
}

func TestSetupsNamed(t *testing.T) {
	got, err := SetupsNamed("cps-strict", "plain")
	if err != nil || len(got) != 2 || got[0].Name != "cps-strict" || !got[0].Extender() || got[1].Extender() {
		t.Errorf("SetupsNamed: %v, %v", got, err)
	}
	if _, err := SetupsNamed("nope"); err == nil {
		t.Error("SetupsNamed(nope): no error")
	}
	// The report pairs every setup with DefaultSetup: it must be one, and run the shipped defaults.
	def, err := SetupsNamed(DefaultSetup)
	if err != nil || def[0].Policy != string(priority.DefaultPolicy) || def[0].Preemption != "" || !def[0].TurnGate {
		t.Errorf("DefaultSetup %q: %v, %v; want the default policy %s, preemption and the turn gate", DefaultSetup, def, err, priority.DefaultPolicy)
	}
}
