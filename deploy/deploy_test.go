// Package deploy holds the Kubernetes manifests (kustomize) and the image build; its tests
// check the files against the code and the shipped scheduler configuration. The end-to-end
// suite (test/e2e/deploy_test.go) renders every kustomization and has a real API server
// accept every object.
package deploy

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cps-extender/cps-extender/extender/admission"
	"github.com/cps-extender/cps-extender/extender/config"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const (
	extenderConfig       = "base/config.yaml"
	standaloneConfig     = "overlays/standalone/config.yaml"
	sidecarScheduler     = "overlays/sidecar/kube-scheduler.yaml"
	shippedScheduler     = "../scheduler-config/kube-scheduler.yaml"
	namespace            = "cps-system"
	extenderServiceAcct  = "cps-extender"
	extenderContainer    = "cps-extender"
	schedulerContainer   = "kube-scheduler"
	extenderConfigMount  = "/etc/cps-extender"
	schedulerConfigMount = "/etc/cps-scheduler"
)

// deployments are the overlays' Deployment files with the containers each must run.
var deployments = map[string][]string{
	"overlays/sidecar/deployment.yaml":    {schedulerContainer, extenderContainer},
	"overlays/standalone/deployment.yaml": {extenderContainer},
}

// TestExtenderConfigLoads: the ConfigMap's config.yaml is what cps-extender starts with; it
// must load with no unknown key and validate, and run in-cluster.
func TestExtenderConfigLoads(t *testing.T) {
	cfg := loadExtenderConfig(t)
	if cfg.Kubeconfig != "" {
		t.Errorf("kubeconfig = %q, want empty (in-cluster)", cfg.Kubeconfig)
	}
	if host, _, _ := net.SplitHostPort(cfg.Listen); host != "" {
		t.Errorf("listen = %q: must listen on every interface, or probes and scrapes of the pod IP fail", cfg.Listen)
	}
}

func loadExtenderConfig(t *testing.T) config.Config {
	t.Helper()
	cfg, errs := config.LoadConfig(extenderConfig)
	errs = append(errs, cfg.Validate()...)
	for _, err := range errs {
		t.Errorf("%s: %v", extenderConfig, err)
	}
	return cfg
}

// TestStandaloneExtenderConfig: the standalone overlay's config.yaml is the base's but for who
// may call the verbs: the default scheduler's client certificate over HTTPS, and its pods
// alone to bind.
func TestStandaloneExtenderConfig(t *testing.T) {
	base := loadExtenderConfig(t)
	standalone, errs := config.LoadConfig(standaloneConfig)
	errs = append(errs, standalone.Validate()...)
	for _, err := range errs {
		t.Errorf("%s: %v", standaloneConfig, err)
	}
	want := config.TLSConfig{SelfKept: true, ClientCAFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", ClientNames: []string{"system:kube-scheduler"}}
	if diff := cmp.Diff(want, standalone.TLS); diff != "" {
		t.Errorf("%s tls (-want +got):\n%s", standaloneConfig, diff)
	}
	if !slices.Equal(standalone.Access.Scheduler, []string{config.AccessClientCertificate}) || !slices.Equal(standalone.SchedulerNames, []string{"default-scheduler"}) {
		t.Errorf("%s: access.scheduler %v, schedulerNames %v; want clientCertificate, default-scheduler", standaloneConfig, standalone.Access.Scheduler, standalone.SchedulerNames)
	}
	standalone.TLS, standalone.Access.Scheduler, standalone.SchedulerNames = base.TLS, base.Access.Scheduler, base.SchedulerNames
	if diff := cmp.Diff(base, standalone); diff != "" {
		t.Errorf("%s differs from %s beyond who may call (-base +standalone):\n%s", standaloneConfig, extenderConfig, diff)
	}
}

// TestSidecarSchedulerConfig: the sidecar's KubeSchedulerConfiguration is the shipped one
// with only what in-cluster use must change: no kubeconfig path (the service account) and the
// leader lease in the overlay's namespace.
func TestSidecarSchedulerConfig(t *testing.T) {
	shipped, sidecar := readYAML(t, shippedScheduler), readYAML(t, sidecarScheduler)

	conn, _ := shipped["clientConnection"].(map[string]any)
	if conn == nil || conn["kubeconfig"] == nil {
		t.Fatalf("%s has no clientConnection.kubeconfig to drop: update this test", shippedScheduler)
	}
	delete(conn, "kubeconfig")
	if len(conn) == 0 {
		delete(shipped, "clientConnection")
	}
	le, _ := shipped["leaderElection"].(map[string]any)
	if le == nil || le["leaderElect"] != true {
		t.Fatalf("%s: leader election must be on for an in-cluster scheduler", shippedScheduler)
	}
	le["resourceNamespace"] = namespace
	if diff := cmp.Diff(shipped, sidecar); diff != "" {
		t.Errorf("%s differs from %s beyond the in-cluster fields (-shipped +sidecar):\n%s", sidecarScheduler, shippedScheduler, diff)
	}

	// The scheduler reaches the extender over the pod's loopback, on the port it listens on.
	// (kube-scheduler itself validates the whole file in test/e2e/deploy_test.go.)
	cfg := loadExtenderConfig(t)
	_, port, _ := net.SplitHostPort(cfg.Listen)
	want := "http://127.0.0.1:" + port + cfg.URLPrefix
	extenders, _ := sidecar["extenders"].([]any)
	if len(extenders) != 1 || extenders[0].(map[string]any)["urlPrefix"] != want {
		t.Errorf("extenders = %v, want one at %s", extenders, want)
	}
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := yaml.Unmarshal(mustRead(t, path), &out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// TestDeployments: each Deployment runs its containers hardened (non-root, read-only root
// filesystem, no privilege escalation, no capabilities, RuntimeDefault seccomp), with
// resources and probes, as the extender's service account, with the config mounted where
// the args point and the extender's ports equal to the config's listen and webhook.listen.
func TestDeployments(t *testing.T) {
	cfg := loadExtenderConfig(t)
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: portOf(t, cfg.Listen)}, {Name: "webhook", ContainerPort: portOf(t, cfg.Webhook.Listen)}}
	for path, wantContainers := range deployments {
		t.Run(filepath.Dir(path), func(t *testing.T) {
			d := readDeployment(t, path)
			spec := d.Spec.Template.Spec
			if d.Namespace != namespace || spec.ServiceAccountName != extenderServiceAcct {
				t.Errorf("namespace %q, serviceAccountName %q; want %q, %q", d.Namespace, spec.ServiceAccountName, namespace, extenderServiceAcct)
			}
			psc := spec.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
				psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v: want runAsNonRoot, a non-zero runAsUser and RuntimeDefault seccomp", psc)
			}
			var names []string
			for _, c := range spec.Containers {
				names = append(names, c.Name)
				for _, problem := range containerProblems(c, ports) {
					t.Errorf("container %s: %s", c.Name, problem)
				}
			}
			if diff := cmp.Diff(wantContainers, names); diff != "" {
				t.Errorf("containers (-want +got):\n%s", diff)
			}
		})
	}
}

func readDeployment(t *testing.T, path string) appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(mustRead(t, path), &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

// portOf is the port of a host:port address.
func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return int32(n)
}

// containerProblems lists what a container of ours lacks.
func containerProblems(c corev1.Container, ports []corev1.ContainerPort) []string {
	var out []string
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" {
		out = append(out, fmt.Sprintf("securityContext %+v: want allowPrivilegeEscalation false, readOnlyRootFilesystem, drop ALL", sc))
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		out = append(out, "want cpu and memory requests and a memory limit")
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		out = append(out, "want liveness and readiness probes")
	}
	if c.Name == schedulerContainer {
		want := "--config=" + schedulerConfigMount + "/" + filepath.Base(sidecarScheduler)
		if !strings.Contains(strings.Join(c.Command, " "), want) || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != schedulerConfigMount {
			out = append(out, fmt.Sprintf("command %q, mounts %+v: want %s with the config mounted at %s", c.Command, c.VolumeMounts, want, schedulerConfigMount))
		}
		return out
	}
	if diff := cmp.Diff(ports, c.Ports); diff != "" {
		out = append(out, fmt.Sprintf("ports: want the config's listen and webhook.listen ports (-want +got):\n%s", diff))
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		out = append(out, "want liveness on /healthz and readiness on /readyz")
	}
	want := "--config=" + extenderConfigMount + "/" + filepath.Base(extenderConfig)
	if strings.Join(c.Args, " ") != want || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != extenderConfigMount {
		out = append(out, fmt.Sprintf("args %q, mounts %+v: want %s with the config mounted at %s", c.Args, c.VolumeMounts, want, extenderConfigMount))
	}
	return out
}

// TestEveryManifestIsInAKustomization: every YAML file under deploy/ is a resource or a
// generator input of some kustomization, so the end-to-end dry run (which renders the
// kustomizations) sees every manifest.
func TestEveryManifestIsInAKustomization(t *testing.T) {
	used := map[string]bool{}
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		if d.Name() != "kustomization.yaml" {
			files = append(files, path)
			return nil
		}
		var k struct {
			Resources          []string `json:"resources"`
			ConfigMapGenerator []struct {
				Files []string `json:"files"`
			} `json:"configMapGenerator"`
		}
		if err := yaml.Unmarshal(mustRead(t, path), &k); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		refs := k.Resources
		for _, g := range k.ConfigMapGenerator {
			refs = append(refs, g.Files...)
		}
		for _, r := range refs {
			used[filepath.Join(filepath.Dir(path), r)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests found")
	}
	for _, f := range files {
		if !used[f] {
			t.Errorf("%s is in no kustomization.yaml", f)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestTurnGateWebhook: the webhook calls the path the extender serves it on, through each
// overlay's Service to the extender's webhook port, for the pods of the shipped scheduler
// profile, and never blocks a pod creation; the config names that Service, that webhook
// configuration and a Secret the RBAC lets the extender keep, and the caBundle it may fill.
func TestTurnGateWebhook(t *testing.T) {
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(mustRead(t, "webhook/turn-gate.yaml"), &cfg); err != nil {
		t.Fatal(err)
	}
	shipped := readYAML(t, shippedScheduler)
	profiles, _ := shipped["profiles"].([]any)
	if len(profiles) != 1 {
		t.Fatalf("%s has %d profiles, want one", shippedScheduler, len(profiles))
	}
	profile, _ := profiles[0].(map[string]any)["schedulerName"].(string)
	if len(cfg.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want one", len(cfg.Webhooks))
	}
	w := cfg.Webhooks[0]
	ext := loadExtenderConfig(t).Webhook
	if !ext.SelfSigned() || ext.Configuration != cfg.Name {
		t.Errorf("%s webhook: %+v; want the self-kept certificate, its CA into %s", extenderConfig, ext, cfg.Name)
	}
	for _, overlay := range []string{"overlays/standalone", "overlays/sidecar"} {
		var svc corev1.Service
		if err := yaml.UnmarshalStrict(mustRead(t, overlay+"/service.yaml"), &svc); err != nil {
			t.Fatal(err)
		}
		var port *corev1.ServicePort
		for i, p := range svc.Spec.Ports {
			if p.TargetPort.StrVal == "webhook" {
				port = &svc.Spec.Ports[i]
			}
		}
		s := w.ClientConfig.Service
		if port == nil || s == nil || s.Namespace != svc.Namespace || s.Name != svc.Name || s.Port == nil || *s.Port != port.Port ||
			s.Path == nil || *s.Path != admission.Path {
			t.Errorf("%s: clientConfig.service %+v: want %s/%s, the port to targetPort webhook, path %s", overlay, s, svc.Namespace, svc.Name, admission.Path)
		}
		if ext.Service != svc.Namespace+"/"+svc.Name {
			t.Errorf("%s webhook.service %q, want the Service %s/%s", extenderConfig, ext.Service, svc.Namespace, svc.Name)
		}
		d := readDeployment(t, overlay+"/deployment.yaml")
		if !labelsMatch(svc.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("%s: Service selector %v does not select the pods %v", overlay, svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
	// The profile's pods (the standalone overlay patches that one); not the switch the
	// extender adds and keeps (admission.SwitchCondition): applying the file again must
	// not contend with the extender for it.
	wantCond := "object.spec.schedulerName == '" + profile + "'"
	if len(w.MatchConditions) != 1 || w.MatchConditions[0].Expression != wantCond {
		t.Errorf("matchConditions %+v, want %q alone (not %s)", w.MatchConditions, wantCond, admission.SwitchCondition)
	}
	if ext.OffAfter.Duration <= 0 {
		t.Errorf("%s webhook.offAfter %v: the calls would never be switched off", extenderConfig, ext.OffAfter)
	}
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy %v, want Ignore: a webhook outage must not block pod creation", w.FailurePolicy)
	}
	// The RBAC names what the extender reads and writes by name.
	var clusterRole rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(mustRead(t, "base/clusterrole.yaml"), &clusterRole); err != nil {
		t.Fatal(err)
	}
	if !grants(clusterRole.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", cfg.Name, "get", "update") {
		t.Errorf("base/clusterrole.yaml: no get, update of mutatingwebhookconfigurations %s", cfg.Name)
	}
	docs := strings.Split(string(mustRead(t, "base/role.yaml")), "\n---\n")
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &role); err != nil {
		t.Fatal(err)
	}
	ns, name, _ := strings.Cut(ext.Secret, "/")
	if role.Namespace != ns || !grants(role.Rules, "", "secrets", name, "get", "update") || !grants(role.Rules, "", "secrets", "", "create") {
		t.Errorf("base/role.yaml: want create, and get and update of %s, of secrets in %s", name, ns)
	}
}

// TestWebhookNamespaceSelector: the webhook configuration's namespaceSelector sends the
// API server's calls for a namespace's pods exactly when the shipped configs'
// exemption rule (config.GangConfig.Exempt) does not exempt it: one rule, kept in two
// files. A namespace the selector sends that the rule exempts costs a call for nothing; one
// it leaves out that the rule does not exempt has its pods go ungated.
func TestWebhookNamespaceSelector(t *testing.T) {
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(mustRead(t, "webhook/turn-gate.yaml"), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{extenderConfig, standaloneConfig} {
		ext, errs := config.LoadConfig(file)
		for _, err := range errs {
			t.Fatalf("%s: %v", file, err)
		}
		for _, w := range cfg.Webhooks {
			selector, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
			if err != nil {
				t.Fatalf("webhook %s: namespaceSelector: %v", w.Name, err)
			}
			namespaces := slices.Concat([]string{"default", namespace, "kube-system", "kube-public"}, ext.Gang.ExemptNamespaces)
			for _, e := range w.NamespaceSelector.MatchExpressions {
				namespaces = append(namespaces, e.Values...)
			}
			for _, ns := range namespaces {
				called := selector.Matches(labels.Set{corev1.LabelMetadataName: ns})
				if exempt := ext.Gang.Exempt(ns); called == exempt {
					t.Errorf("webhook %s: namespace %s is called %v, but %s exempts it: %v", w.Name, ns, called, file, exempt)
				}
			}
		}
	}
}

// TestStandaloneJobPodsCondition: the standalone overlay sends the webhook the default
// scheduler's job pods alone, by a condition the extender keeps (admission.JobPodsCondition):
// as shipped, it is the expression the extender would write for the shipped config's job
// label, so the extender need not write it.
func TestStandaloneJobPodsCondition(t *testing.T) {
	var kustomization struct {
		Patches []struct {
			Target struct{ Kind, Name string }
			Patch  string
		}
	}
	if err := yaml.Unmarshal(mustRead(t, "overlays/standalone/kustomization.yaml"), &kustomization); err != nil {
		t.Fatal(err)
	}
	conditions := map[string]string{}
	for _, p := range kustomization.Patches {
		if p.Target.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		var ops []struct {
			Value admissionregistrationv1.MatchCondition
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			conditions[op.Value.Name] = op.Value.Expression
		}
	}
	standalone, errs := config.LoadConfig(standaloneConfig)
	for _, err := range errs {
		t.Fatalf("%s: %v", standaloneConfig, err)
	}
	if got, want := conditions[admission.JobPodsCondition], admission.JobPodsExpression(standalone.Gang.JobLabel); got != want {
		t.Errorf("condition %s:\n%s\nwant, for %s's gang.jobLabel:\n%s", admission.JobPodsCondition, got, standaloneConfig, want)
	}
	if got, want := conditions["default-scheduler"], "object.spec.schedulerName == 'default-scheduler'"; got != want {
		t.Errorf("condition default-scheduler %q, want %q", got, want)
	}
}

// labelsMatch reports whether every selector label is among labels.
func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// grants reports whether one rule allows all verbs on resource of group, for the object
// named name (any name when name is empty, and then only a rule with no resourceNames).
func grants(rules []rbacv1.PolicyRule, group, resource, name string, verbs ...string) bool {
	for _, r := range rules {
		named := len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name))
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && named &&
			!slices.ContainsFunc(verbs, func(v string) bool { return !slices.Contains(r.Verbs, v) }) {
			return true
		}
	}
	return false
}
