//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/turns"
	"github.com/cps-extender/cps-extender/internal/testcerts"
	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// caller is an HTTPS client of the extender that trusts its serving CA and presents cert
// (none when nil) and token (none when "").
type caller struct {
	client *http.Client
	token  string
}

func newCaller(roots *testcerts.CA, cert *tls.Certificate, token string) caller {
	cfg := &tls.Config{RootCAs: roots.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return caller{client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, token: token}
}

// do sends a request and returns the status and body.
func (c caller) do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func pair(t *testing.T, certPEM, keyPEM []byte) *tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestTrustBoundary attacks the extender as a tenant would, with the verbs behind client
// certificates and the admin endpoints behind tokens, and checks each door is shut: a bind
// without the scheduler's client certificate, with one of another CA or name, or for a pod of
// another scheduler or onto a node the pod may not use; the webhook's port serves the webhook
// alone; /debug/queue without a token, with one lacking the rule, and with it; a pod naming a
// gold user in a namespace that may not; eight slow requests declaring 60 MB bodies. The real
// scheduler, with its certificate, binds a gang meanwhile.
func TestTrustBoundary(t *testing.T) {
	e := newEnvWith(t, framework.Options{Users: []framework.User{{Name: "reader"}, {Name: "nosy"}}},
		framework.Nodes("node", 2, "8", "16Gi")...)
	tainted := framework.Nodes("gpu", 1, "8", "16Gi")[0]
	tainted.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	e.cp.AddNodes(t, tainted)
	bindDebugReader(t, e, "reader")

	dir := t.TempDir()
	ca, caFile, certFile, keyFile := e.extenderCerts(1)
	schedCert, schedKey := ca.IssueClient(t, 10, "system:kube-scheduler")
	schedCertFile, schedKeyFile := filepath.Join(dir, "sched.crt"), filepath.Join(dir, "sched.key")
	testcerts.WriteFile(t, schedCertFile, schedCert)
	testcerts.WriteFile(t, schedKeyFile, schedKey)
	other := testcerts.NewCA(t)
	forgedCert, forgedKey := other.IssueClient(t, 11, "system:kube-scheduler")
	forged := pair(t, forgedCert, forgedKey)
	malloryCert, malloryKey := ca.IssueClient(t, 12, "mallory")
	mallory := pair(t, malloryCert, malloryKey)
	scheduler := pair(t, schedCert, schedKey)

	hookAddr := freeAddr(t)
	e.extAddr = freeAddr(t)
	e.startExtenderWith(e.extenderConfig(fmt.Sprintf(`maxRequestBytes: 67108864
access: {scheduler: [clientCertificate], admin: [token]}
tls: {certFile: %s, keyFile: %s, clientCAFile: %s, clientNames: [system:kube-scheduler]}
webhook: {listen: %q, certFile: %s, keyFile: %s}
model:
  userTiers: {alice: gold}
`, certFile, keyFile, caFile, hookAddr, certFile, keyFile)))
	e.startScheduler(true, func(cfg string) string {
		cfg = schedulerOverHTTPS(t, e, caFile)(cfg)
		return strings.Replace(cfg, "    caFile: "+caFile, fmt.Sprintf("    caFile: %s\n    certFile: %s\n    keyFile: %s", caFile, schedCertFile, schedKeyFile), 1)
	})
	base := "https://" + e.extAddr

	t.Run("the scheduler with its certificate binds a gang", func(t *testing.T) {
		defer e.use(t)()
		job := jobSpec{name: "legit", ps: 1, workers: 2, cpu: "2"}
		e.createJobs(job)
		e.waitJobBound(job, 60*time.Second)
	})

	t.Run("the verbs take only the scheduler's certificate", func(t *testing.T) {
		defer e.use(t)()
		// Pods kube-scheduler cannot place (no node matches the selector of one, none has
		// room for the other), and one of another scheduler: they stay pending unless someone
		// binds them.
		e.createPods(podSpec{name: "held", selector: map[string]string{"pool": "none"}}, podSpec{name: "huge", cpu: "100"},
			podSpec{name: "theirs", scheduler: "default-scheduler"})
		bind := func(pod, node string) string {
			return fmt.Sprintf(`{"PodName":%q,"PodNamespace":"default","Node":%q}`, pod, node)
		}
		for _, tc := range []struct {
			name   string
			caller caller
			path   string
			body   string
			status int
			has    string
		}{
			{"no certificate: bind", newCaller(ca, nil, ""), "/scheduler/bind", bind("held", "node-0"), http.StatusUnauthorized, "no client certificate"},
			{"no certificate: filter", newCaller(ca, nil, ""), "/scheduler/filter", `{}`, http.StatusUnauthorized, "no client certificate"},
			{"a certificate of another CA", newCaller(ca, forged, ""), "/scheduler/bind", bind("held", "node-0"), http.StatusForbidden, "not signed by tls.clientCAFile"},
			{"our CA, another name", newCaller(ca, mallory, ""), "/scheduler/bind", bind("held", "node-0"), http.StatusForbidden, `\"mallory\" is not in tls.clientNames`},
			{"the scheduler's certificate, another scheduler's pod", newCaller(ca, scheduler, ""), "/scheduler/bind", bind("theirs", "node-0"), http.StatusOK,
				`pod default/theirs is of scheduler \"default-scheduler\", not one this extender binds for`},
			{"the scheduler's certificate, a node the pod's selector rules out", newCaller(ca, scheduler, ""), "/scheduler/bind", bind("held", "node-0"), http.StatusOK,
				"may not run on node node-0: it does not match the pod's node selector"},
			{"the scheduler's certificate, a node the pod does not tolerate", newCaller(ca, scheduler, ""), "/scheduler/bind", bind("huge", "gpu-0"), http.StatusOK,
				"it has a taint the pod does not tolerate (nvidia.com/gpu=present:NoSchedule)"},
			{"the scheduler's certificate, a pod bound already", newCaller(ca, scheduler, ""), "/scheduler/bind", bind("legit-worker-0", "gpu-0"), http.StatusOK, "is bound to"},
		} {
			status, body := tc.caller.do(t, http.MethodPost, base+tc.path, tc.body)
			if status != tc.status || !strings.Contains(body, tc.has) {
				t.Errorf("%s: %d %s, want %d containing %q", tc.name, status, body, tc.status, tc.has)
			}
			if status >= 400 && !strings.HasPrefix(body, `{"error":`) {
				t.Errorf("%s: the refusal is not a JSON error: %s", tc.name, body)
			}
		}
		time.Sleep(time.Second)
		for _, pod := range []string{"held", "huge", "theirs"} {
			if node := e.bound("default")[pod]; node != "" {
				t.Errorf("pod %s was bound to %s", pod, node)
			}
		}
	})

	t.Run("the webhook's port serves the webhook alone", func(t *testing.T) {
		defer e.use(t)()
		c := newCaller(ca, scheduler, "")
		hook := "https://" + hookAddr
		for _, path := range []string{"/scheduler/bind", "/scheduler/filter", "/volcano/onSessionOpen"} {
			if status, body := c.do(t, http.MethodPost, hook+path, `{}`); status != http.StatusNotFound {
				t.Errorf("POST %s on the webhook's port: %d %s, want 404", path, status, body)
			}
		}
		for _, path := range []string{"/debug/queue", "/debug/nodes", "/ui", "/metrics"} {
			if status, body := c.do(t, http.MethodGet, hook+path, ""); status != http.StatusNotFound {
				t.Errorf("GET %s on the webhook's port: %d %s, want 404", path, status, body)
			}
		}
		review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"version":"v1","kind":"Pod"},` +
			`"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","namespace":"default","name":"p","object":{"metadata":{"name":"p"},"spec":{"containers":[]}}}}`
		if status, body := c.do(t, http.MethodPost, hook+"/webhook/turn-gate", review); status != http.StatusOK || !strings.Contains(body, `"uid":"u1"`) {
			t.Errorf("the webhook on its port: %d %s", status, body)
		}
	})

	t.Run("the admin endpoints take a token whose user may get them", func(t *testing.T) {
		defer e.use(t)()
		for _, tc := range []struct {
			token  string
			path   string
			status int
		}{
			{"", "/debug/queue", http.StatusUnauthorized},
			{"forged-token", "/debug/queue", http.StatusUnauthorized},
			{e.cp.UserToken("nosy"), "/debug/queue", http.StatusForbidden},
			{e.cp.UserToken("nosy"), "/metrics", http.StatusForbidden},
			{e.cp.UserToken("reader"), "/debug/queue", http.StatusOK},
			{e.cp.UserToken("reader"), "/debug/nodes", http.StatusOK},
			{e.cp.UserToken("reader"), "/metrics", http.StatusOK},
			{"", "/healthz", http.StatusOK},
			{"", "/readyz", http.StatusOK},
		} {
			if status, body := newCaller(ca, nil, tc.token).do(t, http.MethodGet, base+tc.path, ""); status != tc.status {
				t.Errorf("GET %s with token %q: %d %s, want %d", tc.path, tc.token, status, body, tc.status)
			}
		}
	})

	t.Run("a pod naming a gold user in a namespace that may not is ranked as its namespace", func(t *testing.T) {
		defer e.use(t)()
		if _, err := e.cp.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		job := jobSpec{name: "sneaky", namespace: "team-b", workers: 1, cpu: "1", user: "alice"}
		e.createJobs(job)
		reader := newCaller(ca, nil, e.cp.UserToken("reader"))
		framework.WaitFor(t, 30*time.Second, "team-b/sneaky ranked as user team-b", func() (bool, error) {
			status, body := reader.do(t, http.MethodGet, base+"/debug/queue", "")
			var report struct {
				Jobs []struct {
					Job, User, UserFrom string
					Terms               struct{ User float64 }
				}
			}
			if status != http.StatusOK || json.Unmarshal([]byte(body), &report) != nil {
				return false, fmt.Errorf("%d %s", status, body)
			}
			for _, j := range report.Jobs {
				if j.Job == "team-b/sneaky" {
					return j.User == "team-b" && j.UserFrom == "namespace" && j.Terms.User < 1, fmt.Errorf("%+v", j)
				}
			}
			return false, fmt.Errorf("not in the queue yet")
		})
		e.waitEvent("team-b", "sneaky-worker-0", "LabelIgnored", "label cps-extender.io/user=alice is ignored: namespace team-b may not name its pods' user")
	})

	t.Run("slow requests declaring 60 MB bodies take no memory", func(t *testing.T) {
		defer e.use(t)()
		reader := newCaller(ca, nil, e.cp.UserToken("reader"))
		heapBefore, rssBefore := extenderMemory(t, reader, base, e.ext.Pid())
		var conns []*tls.Conn
		for range 8 {
			conn, err := tls.Dial("tcp", e.extAddr, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{*scheduler}, MinVersion: tls.VersionTLS12})
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
			fmt.Fprintf(conn, "POST /scheduler/filter HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n{\"Pod\":", e.extAddr)
			if _, err := conn.Write(bytes.Repeat([]byte(" "), 1024)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3 * time.Second) // the server has read the headers and the first bytes of each
		heapAfter, rssAfter := extenderMemory(t, reader, base, e.ext.Pid())
		for _, c := range conns {
			_ = c.Close()
		}
		t.Logf("heap in use %d -> %d MiB, RSS %d -> %d MiB with 8 requests declaring 60 MB each", heapBefore>>20, heapAfter>>20, rssBefore>>20, rssAfter>>20)
		if heapAfter-heapBefore > 50<<20 || rssAfter-rssBefore > 50<<20 {
			t.Errorf("8 slow requests of a declared 60 MB took heap %d MiB, RSS %d MiB more, want under 50 MiB each", (heapAfter-heapBefore)>>20, (rssAfter-rssBefore)>>20)
		}
	})
}

// extenderMemory reads the extender's Go heap in use (its /metrics) and its RSS (/proc).
func extenderMemory(t *testing.T, c caller, base string, pid int) (heap, rss int64) {
	t.Helper()
	status, body := c.do(t, http.MethodGet, base+"/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			heap = int64(f)
		}
	}
	procStatus, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(procStatus), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			rss = kb << 10
		}
	}
	if heap == 0 || rss == 0 {
		t.Fatalf("no heap (%d) or RSS (%d) figure", heap, rss)
	}
	return heap, rss
}

// bindDebugReader creates deploy/base's cps-extender-debug-reader ClusterRole and binds it to
// user.
func bindDebugReader(t *testing.T, e *env, user string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.repoRoot, "deploy", "base", "debug-reader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.cp.Client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := e.cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPodWritePolicy: deploy/base's ValidatingAdmissionPolicy lets the extender's service
// account change a pod only by the turn annotation (the nudge) and by lifting its own
// scheduling gate, through the extender's own patches; any other change is refused.
func TestPodWritePolicy(t *testing.T) {
	sa := "system:serviceaccount:cps-system:cps-extender"
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cp := framework.Start(t, framework.Options{Users: []framework.User{{Name: sa}}})
	grantExtenderRole(t, cp, root, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: sa})
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "base", "admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.Unmarshal([]byte(docs[0]), &policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &binding); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "ml"}},
		Spec: corev1.PodSpec{SchedulerName: schedulerName, SchedulingGates: []corev1.PodSchedulingGate{{Name: gang.TurnGate}, {Name: "example.com/other"}},
			Containers: []corev1.Container{{Name: "main", Image: "trainer:v1"}}}}
	pod, err = cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := kubernetes.NewForConfig(cp.UserConfig(sa))
	if err != nil {
		t.Fatal(err)
	}
	patch := func(body string) error {
		_, err := ext.CoreV1().Pods("default").Patch(ctx, "p", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	// The policy is in force once the API server has loaded it: wait until a forbidden
	// patch, tried as a dry run, is refused.
	framework.WaitFor(t, 30*time.Second, "the policy in force", func() (bool, error) {
		_, err := ext.CoreV1().Pods("default").Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"app":"probe"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)), fmt.Errorf("dry-run label patch: %v", err)
	})
	for _, tc := range []struct {
		name  string
		patch string
		ok    bool
	}{
		{"an image", `{"spec":{"containers":[{"name":"main","image":"evil:latest"}]}}`, false},
		{"a label", `{"metadata":{"labels":{"app":"other"}}}`, false},
		{"another annotation", `{"metadata":{"annotations":{"example.com/x":"1"}}}`, false},
		{"another gate", `{"spec":{"schedulingGates":[{"name":"example.com/other","$patch":"delete"}]}}`, false},
	} {
		if err := patch(tc.patch); err == nil {
			t.Errorf("changing %s: allowed, want refused", tc.name)
		} else if !strings.Contains(err.Error(), "cps-extender-pod-writes") {
			t.Errorf("changing %s: refused, but not by the policy: %v", tc.name, err)
		}
	}
	// What the extender does, through its own code: the nudge and the lift.
	nudger := turns.NewAPINudger(ext, 10*time.Second)
	ref := gang.PodRef{Namespace: "default", Name: "p", UID: pod.UID}
	if err := nudger.Nudge(ctx, ref, time.Now()); err != nil {
		t.Errorf("the nudge (turn annotation): %v", err)
	}
	if err := nudger.Ungate(ctx, ref); err != nil {
		t.Errorf("the lift of the turn gate: %v", err)
	}
	got, err := cp.Client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.SchedulingGates) != 1 || got.Spec.SchedulingGates[0].Name != "example.com/other" || got.Annotations[turns.TurnAnnotation] == "" ||
		got.Spec.Containers[0].Image != "trainer:v1" || got.Labels["app"] != "ml" {
		t.Errorf("pod after the patches: gates %v, annotations %v, image %s, labels %v", got.Spec.SchedulingGates, got.Annotations, got.Spec.Containers[0].Image, got.Labels)
	}
}
