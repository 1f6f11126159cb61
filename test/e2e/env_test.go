//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/cps-extender/cps-extender/priority"
	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// schedulerName is the profile of scheduler-config/kube-scheduler.yaml.
const schedulerName = "cps-scheduler"

var (
	extenderBinOnce sync.Once
	extenderBin     string
	extenderBinErr  error
)

// extenderBinary builds cps-extender once per test run, with the race detector, so that
// every end-to-end test also hunts races in the real process.
func extenderBinary(t testing.TB) string {
	t.Helper()
	extenderBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cps-extender-bin-")
		if err != nil {
			extenderBinErr = err
			return
		}
		extenderBin, extenderBinErr = framework.BuildExtender(dir, "-race")
	})
	if extenderBinErr != nil {
		t.Fatal(extenderBinErr)
	}
	return extenderBin
}

// env is one control plane with (optionally) cps-extender and kube-scheduler on it.
type env struct {
	t        *testing.T
	cp       *framework.ControlPlane
	ext      *framework.Process
	extAddr  string
	extCfg   string
	extKube  string      // the extender's kubeconfig: extenderUser's (see grantExtenderRole)
	extTLS   *tls.Config // set: the helpers talk HTTPS to the extender
	sched    *framework.Process
	repoRoot string
}

// newEnv starts a control plane with the given nodes. The extender will run as extenderUser,
// bound only to deploy/base's ClusterRole: every end-to-end test runs under the shipped RBAC.
func newEnv(t *testing.T, nodes ...framework.NodeSpec) *env {
	t.Helper()
	return newEnvWith(t, framework.Options{}, nodes...)
}

// newEnvWith is newEnv on a control plane started with opts (extenderUser joins its Users).
func newEnvWith(t *testing.T, opts framework.Options, nodes ...framework.NodeSpec) *env {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	opts.Users = append(opts.Users, framework.User{Name: extenderUser})
	cp := framework.Start(t, opts)
	grantExtenderRole(t, cp, root, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: extenderUser})
	if len(nodes) > 0 {
		cp.AddNodes(t, nodes...)
	}
	return &env{t: t, cp: cp, repoRoot: root, extKube: cp.UserKubeconfig(extenderUser)}
}

// startExtender runs cps-extender with the given extra config YAML (appended to the
// test's base config) on a free port, and waits until it is ready.
func (e *env) startExtender(extraConfig string) {
	e.t.Helper()
	if e.extAddr == "" {
		e.extAddr = freeAddr(e.t)
	}
	e.startExtenderWith(e.extenderConfig(extraConfig))
}

// startExtenderWith runs cps-extender with the whole config cfg, which must listen on
// e.extAddr, and waits until it is ready.
func (e *env) startExtenderWith(cfg string) {
	e.t.Helper()
	e.extCfg = filepath.Join(e.cp.Dir, "cps-extender.yaml")
	e.writeConfigFile(cfg)
	e.ext = e.cp.StartProcess(e.t, "cps-extender", extenderBinary(e.t), []string{"--config=" + e.extCfg}, nil)
	framework.WaitExtenderReady(e.t, e.ext, 60*time.Second, func() (*http.Response, error) { return e.extenderGet("/readyz") })
}

// extenderConfig is the test's base extender config followed by extraConfig. The tests'
// pods name their users with the cps-extender.io/user label in namespace default, where the
// base config lets them (gang.podUserNamespaces), as an admin would for a trusted pipeline;
// TestTrustBoundary checks the label elsewhere. So may they mark their jobs urgent
// (gang.urgentLabelNamespaces); PriorityClass cps-urgent makes a job urgent anywhere
// (TestUrgentByClassEvictsWholeGangs).
func (e *env) extenderConfig(extraConfig string) string {
	const podUsers = "  podUserNamespaces: [default]\n  urgentLabelNamespaces: [default]\n  urgentPriorityClasses: [cps-urgent]\n"
	switch {
	case strings.HasPrefix(extraConfig, "gang:\n"):
		extraConfig = "gang:\n" + podUsers + strings.TrimPrefix(extraConfig, "gang:\n")
	case strings.Contains(extraConfig, "\ngang:\n"):
		extraConfig = strings.Replace(extraConfig, "\ngang:\n", "\ngang:\n"+podUsers, 1)
	default:
		extraConfig += "\ngang:\n" + podUsers
	}
	return fmt.Sprintf("listen: %s\nurlPrefix: /scheduler\nkubeconfig: %s\nlog:\n  format: json\n  level: debug\n%s", e.extAddr, e.extKube, extraConfig)
}

// writeExtenderConfig rewrites the extender's config file with the base config and
// extraConfig (a running extender reloads its model section from it).
func (e *env) writeExtenderConfig(extraConfig string) {
	e.t.Helper()
	e.writeConfigFile(e.extenderConfig(extraConfig))
}

func (e *env) writeConfigFile(cfg string) {
	e.t.Helper()
	if err := os.WriteFile(e.extCfg, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// extenderURL is the extender's URL for path, over HTTPS when extTLS is set.
func (e *env) extenderURL(path string) string {
	if e.extTLS != nil {
		return "https://" + e.extAddr + path
	}
	return "http://" + e.extAddr + path
}

// extenderGet GETs path from the extender.
func (e *env) extenderGet(path string) (*http.Response, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	if e.extTLS != nil {
		c.Transport = &http.Transport{TLSClientConfig: e.extTLS}
	}
	return c.Get(e.extenderURL(path))
}

// schedulerConfig is scheduler-config/kube-scheduler.yaml as shipped, with only the
// kubeconfig path, the extender URL and leader election (one scheduler per test control
// plane, started and stopped at will) replaced. withExtender false drops the extenders
// block: the same scheduler without cps-extender, for baselines.
func (e *env) schedulerConfig(withExtender bool, edits ...func(string) string) []byte {
	e.t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.repoRoot, "scheduler-config", "kube-scheduler.yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := string(raw)
	replace := func(old, new string) {
		if !strings.Contains(cfg, old) {
			e.t.Fatalf("scheduler-config/kube-scheduler.yaml no longer contains %q", old)
		}
		cfg = strings.Replace(cfg, old, new, 1)
	}
	replace("kubeconfig: /etc/kubernetes/scheduler.conf", "kubeconfig: "+e.cp.Kubeconfig)
	replace("leaderElect: true", "leaderElect: false")
	if withExtender {
		replace("urlPrefix: http://127.0.0.1:8888/scheduler", "urlPrefix: http://"+e.extAddr+"/scheduler")
	} else {
		cfg = cfg[:strings.Index(cfg, "\nextenders:")] + "\n"
	}
	for _, edit := range edits {
		cfg = edit(cfg)
	}
	return []byte(cfg)
}

// startScheduler runs kube-scheduler with the shipped config (see schedulerConfig).
func (e *env) startScheduler(withExtender bool, edits ...func(string) string) {
	e.t.Helper()
	if withExtender && e.extAddr == "" {
		e.t.Fatal("start the extender first")
	}
	e.sched = e.cp.StartScheduler(e.t, e.schedulerConfig(withExtender, edits...))
}

func (e *env) stopScheduler() {
	e.t.Helper()
	if err := e.sched.Stop(); err != nil {
		e.t.Logf("stopping kube-scheduler: %v", err)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// podSpec describes one test pod.
type podSpec struct {
	name      string
	namespace string
	cpu       string
	labels    map[string]string
	annots    map[string]string
	priority  string // PriorityClass name
	scheduler string // default: cps-scheduler
	selector  map[string]string
	// tolerations are the pod's; sidecarCPU, when set, adds a sidecar (a restartable init
	// container) asking for that much cpu.
	tolerations []corev1.Toleration
	sidecarCPU  string
	// apart and spread are the pod's required pod anti-affinity terms and topology spread
	// constraints, which the admission fit models; preferApart its preferred anti-affinity
	// terms, which steer the plan.
	apart       []corev1.PodAffinityTerm
	preferApart []corev1.WeightedPodAffinityTerm
	spread      []corev1.TopologySpreadConstraint
	// gates are the pod's scheduling gates.
	gates []string
	// extended adds requests of extended resources (name: quantity) to the pod; claim, when
	// set, is a ResourceClaimTemplate the pod takes a claim of (dra_test.go).
	extended map[string]string
	claim    string
}

func (p podSpec) pod() *corev1.Pod {
	ns := p.namespace
	if ns == "" {
		ns = "default"
	}
	sched := p.scheduler
	if sched == "" {
		sched = schedulerName
	}
	cpu := p.cpu
	if cpu == "" {
		cpu = "1"
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Labels: p.labels, Annotations: p.annots},
		Spec: corev1.PodSpec{
			SchedulerName:     sched,
			PriorityClassName: p.priority,
			NodeSelector:      p.selector,
			Tolerations:       p.tolerations,
			Containers: []corev1.Container{{
				Name: "main", Image: "fake",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
	if len(p.apart) > 0 || len(p.preferApart) > 0 {
		if pod.Spec.Affinity == nil {
			pod.Spec.Affinity = &corev1.Affinity{}
		}
		pod.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: p.apart,
			PreferredDuringSchedulingIgnoredDuringExecution: p.preferApart}
	}
	pod.Spec.TopologySpreadConstraints = p.spread
	for name, q := range p.extended {
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceName(name)] = resource.MustParse(q)
		if pod.Spec.Containers[0].Resources.Limits == nil {
			pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{}
		}
		pod.Spec.Containers[0].Resources.Limits[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	if p.claim != "" {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "devices", ResourceClaimTemplateName: &p.claim}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "devices"}}
	}
	for _, g := range p.gates {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
	}
	if p.sidecarCPU != "" {
		always := corev1.ContainerRestartPolicyAlways
		pod.Spec.InitContainers = []corev1.Container{{
			Name: "sidecar", Image: "fake", RestartPolicy: &always,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(p.sidecarCPU)}},
		}}
	}
	return pod
}

// jobSpec is a PS/worker job labelled with the project's own labels.
type jobSpec struct {
	name      string
	namespace string
	ps        int
	workers   int
	cpu       string
	psCPU     string // the PS's cpu; default cpu
	min       int    // default ps+workers
	user      string
	priority  string
	urgent    bool
	// selector, tolerations and sidecarCPU are every pod's (see podSpec).
	selector    map[string]string
	tolerations []corev1.Toleration
	sidecarCPU  string
	// gates are every pod's scheduling gates.
	gates []string
	// extended and claim are every pod's (see podSpec).
	extended map[string]string
	claim    string
	// labels are added to every pod's; apart, spread and preferApart are every pod's (see
	// podSpec), but preferApart only the workers' when workersPrefer is set.
	labels        map[string]string
	apart         []corev1.PodAffinityTerm
	spread        []corev1.TopologySpreadConstraint
	preferApart   []corev1.WeightedPodAffinityTerm
	workersPrefer bool
}

// pods lists the job's pods, PS first.
func (j jobSpec) pods() []podSpec {
	min := j.min
	if min == 0 {
		min = j.ps + j.workers
	}
	var out []podSpec
	add := func(role string, i int) {
		labels := map[string]string{
			"cps-extender.io/job": j.name, "cps-extender.io/role": role,
			"cps-extender.io/index": strconv.Itoa(i), "cps-extender.io/min-member": strconv.Itoa(min),
		}
		if j.user != "" {
			labels["cps-extender.io/user"] = j.user
		}
		if j.urgent {
			labels["cps-extender.io/urgent"] = "true"
		}
		maps.Copy(labels, j.labels)
		cpu := j.cpu
		if role == "ps" && j.psCPU != "" {
			cpu = j.psCPU
		}
		prefer := j.preferApart
		if j.workersPrefer && role != "worker" {
			prefer = nil
		}
		out = append(out, podSpec{name: fmt.Sprintf("%s-%s-%d", j.name, role, i), namespace: j.namespace, cpu: cpu, labels: labels, priority: j.priority,
			selector: j.selector, tolerations: j.tolerations, sidecarCPU: j.sidecarCPU, gates: j.gates, apart: j.apart, spread: j.spread,
			preferApart: prefer, extended: j.extended, claim: j.claim})
	}
	for i := 0; i < j.ps; i++ {
		add("ps", i)
	}
	for i := 0; i < j.workers; i++ {
		add("worker", i)
	}
	return out
}

// blockers creates, for each label set, a pod in no job named prefix-i with a required pod
// anti-affinity by kubernetes.io/os (linux on every node) to pods with those labels, and
// waits until they are bound (they ask for no cpu): a pod carrying the labels then fits no
// node until its blocker is deleted, which requeues it. kube-scheduler enforces it
// (InterPodAffinity: an existing pod's anti-affinity); the admission fit does not model it
// (it keeps a gang's own terms).
func (e *env) blockers(prefix string, sets ...map[string]string) []string {
	e.t.Helper()
	names := make([]string, len(sets))
	for i, set := range sets {
		names[i] = prefix + "-" + strconv.Itoa(i)
		e.createPods(podSpec{name: names[i], cpu: "0", apart: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelOSStable, LabelSelector: &metav1.LabelSelector{MatchLabels: set}}}})
	}
	framework.WaitFor(e.t, 30*time.Second, "the blockers bound", func() (bool, error) {
		bound := e.bound("default")
		for _, n := range names {
			if bound[n] == "" {
				return false, fmt.Errorf("%s not bound", n)
			}
		}
		return true, nil
	})
	return names
}

func (e *env) createPods(pods ...podSpec) {
	e.t.Helper()
	for _, p := range pods {
		obj := p.pod()
		if _, err := e.cp.Client.CoreV1().Pods(obj.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			e.t.Fatalf("create pod %s: %v", p.name, err)
		}
	}
}

func (e *env) createJobs(jobs ...jobSpec) {
	e.t.Helper()
	for _, j := range jobs {
		e.createPods(j.pods()...)
	}
}

// deletePods deletes pods by name (namespace default) and waits until they are gone.
func (e *env) deletePods(namespace string, names ...string) {
	e.t.Helper()
	zero := int64(0)
	for _, n := range names {
		if err := e.cp.Client.CoreV1().Pods(namespace).Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			e.t.Fatalf("delete pod %s: %v", n, err)
		}
	}
	framework.WaitFor(e.t, 60*time.Second, "pods deleted", func() (bool, error) {
		for _, n := range names {
			if _, err := e.cp.Client.CoreV1().Pods(namespace).Get(context.Background(), n, metav1.GetOptions{}); err == nil {
				return false, fmt.Errorf("pod %s still exists", n)
			}
		}
		return true, nil
	})
}

func (e *env) deleteJob(j jobSpec) {
	e.t.Helper()
	var names []string
	for _, p := range j.pods() {
		names = append(names, p.name)
	}
	ns := j.namespace
	if ns == "" {
		ns = "default"
	}
	e.deletePods(ns, names...)
}

// bound returns pod name -> node of the namespace's bound pods.
func (e *env) bound(namespace string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for name, node := range framework.PodPlacements(e.t, e.cp.Client, namespace) {
		if node != "" {
			out[name] = node
		}
	}
	return out
}

// countBound counts the bound pods of a job.
func (e *env) countBound(j jobSpec) int {
	ns := j.namespace
	if ns == "" {
		ns = "default"
	}
	b := e.bound(ns)
	n := 0
	for _, p := range j.pods() {
		if b[p.name] != "" {
			n++
		}
	}
	return n
}

func (e *env) waitJobBound(j jobSpec, timeout time.Duration) {
	e.t.Helper()
	total := len(j.pods())
	framework.WaitFor(e.t, timeout, "job "+j.name+" fully bound", func() (bool, error) {
		n := e.countBound(j)
		return n == total, fmt.Errorf("%d of %d pods bound", n, total)
	})
}

// bindRecorder watches pods and records the order in which they were bound, as the API
// server committed it.
type bindRecorder struct {
	mu    sync.Mutex
	order []string
	at    map[string]time.Time
	stop  func()
}

func (e *env) recordBindings(namespace string) *bindRecorder {
	e.t.Helper()
	// A list, then a watch from its resourceVersion that resumes where it broke off: the
	// API server closes a watch that falls behind (seen in CI with 720 pods on 2 cores),
	// and a plain watch would lose the Bindings after that.
	pods := e.cp.Client.CoreV1().Pods(namespace)
	list, err := pods.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(context.Background(), list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	r := &bindRecorder{at: map[string]time.Time{}, stop: w.Stop}
	seen := map[string]bool{}
	for i := range list.Items {
		if p := &list.Items[i]; p.Spec.NodeName != "" {
			seen[p.Name] = true
			r.order = append(r.order, p.Name)
			r.at[p.Name] = time.Now()
		}
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" || seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			r.mu.Lock()
			r.order = append(r.order, p.Name)
			r.at[p.Name] = time.Now()
			r.mu.Unlock()
		}
	}()
	e.t.Cleanup(w.Stop)
	return r
}

// Order returns the pods in the order they were bound.
func (r *bindRecorder) Order() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...)
}

// BoundAt returns when the recorder saw a pod bound.
func (r *bindRecorder) BoundAt(pod string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[pod]
	return t, ok
}

// extenderRequests counts the extender's access-log lines by path (its debug log).
func (e *env) extenderRequests() map[string]int {
	e.t.Helper()
	data, err := os.ReadFile(e.ext.LogPath())
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, `"msg":"request"`) {
			continue
		}
		if i := strings.Index(line, `"path":"`); i >= 0 {
			rest := line[i+len(`"path":"`):]
			out[rest[:strings.Index(rest, `"`)]]++
		}
	}
	return out
}

// waitRequestsLogged waits until the extender's log shows at least atLeast's count of
// requests for each path, and returns the counts. A request is logged when its handler
// returns, which may be just after the Binding it created is visible: read once after the
// pods are bound, the log can be one request short.
func (e *env) waitRequestsLogged(atLeast map[string]int) map[string]int {
	e.t.Helper()
	var reqs map[string]int
	framework.WaitFor(e.t, 30*time.Second, fmt.Sprintf("requests logged: at least %v", atLeast), func() (bool, error) {
		reqs = e.extenderRequests()
		for path, n := range atLeast {
			if reqs[path] < n {
				return false, fmt.Errorf("requests logged: %v", reqs)
			}
		}
		return true, nil
	})
	return reqs
}

// use points the env's helpers at a subtest's t; call as defer e.use(t)().
func (e *env) use(t *testing.T) func() {
	prev := e.t
	e.t = t
	return func() { e.t = prev }
}

// queueJob is one job of the extender's /debug/queue.
type queueJob struct {
	Job      string             `json:"job"`
	Phase    string             `json:"phase"`
	Position int                `json:"position"`
	P        float64            `json:"p"`
	Terms    map[string]float64 `json:"terms"`
	Starved  bool               `json:"starved"`
	Urgent   bool               `json:"urgent"`
	// UrgentFrom says how the job was granted urgency.
	UrgentFrom string             `json:"urgentFrom"`
	Reason     string             `json:"reason"`
	Wait       string             `json:"wait"`
	Blocker    string             `json:"blocker"`
	Pods       int                `json:"pods"`
	Bound      int                `json:"bound"`
	Held       int                `json:"held"`
	MinMember  int                `json:"minMember"`
	Placement  priority.Placement `json:"placement"`
	Finished   string             `json:"finished"`
	// SizeUnknown: the job waits for its gang size to be known.
	SizeUnknown bool `json:"sizeUnknown"`
}

// queue reads the extender's admission queue, by job key.
func (e *env) queue() (map[string]queueJob, error) {
	resp, err := e.extenderGet("/debug/queue")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var report struct {
		Jobs []queueJob `json:"jobs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		return nil, err
	}
	out := map[string]queueJob{}
	for _, j := range report.Jobs {
		out[j.Job] = j
	}
	return out, nil
}

// waitWaiting waits until the extender has every job queued and waiting.
func (e *env) waitWaiting(jobs ...jobSpec) {
	e.t.Helper()
	framework.WaitFor(e.t, 60*time.Second, "jobs queued and waiting", func() (bool, error) {
		q, err := e.queue()
		if err != nil {
			return false, err
		}
		for _, j := range jobs {
			ns := j.namespace
			if ns == "" {
				ns = "default"
			}
			// All of its pods in the view: a decision made on part of a gang names it incomplete.
			if d, ok := q[ns+"/"+j.name]; !ok || d.Phase != "Waiting" || d.Pods != len(j.pods()) {
				return false, fmt.Errorf("%s: %+v", j.name, d)
			}
		}
		return true, nil
	})
}

// failedSchedulingMessages returns the messages of a pod's FailedScheduling events.
func (e *env) failedSchedulingMessages(namespace, pod string) []string {
	e.t.Helper()
	list, err := e.cp.Client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", pod), fields.OneTermEqualSelector("reason", "FailedScheduling")).String(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Message)
	}
	sort.Strings(out)
	return out
}

func (e *env) waitFailedScheduling(namespace, pod, substr string) {
	e.t.Helper()
	framework.WaitFor(e.t, 60*time.Second, "FailedScheduling event of "+pod+" containing "+strconv.Quote(substr), func() (bool, error) {
		msgs := e.failedSchedulingMessages(namespace, pod)
		for _, m := range msgs {
			if strings.Contains(m, substr) {
				return true, nil
			}
		}
		return false, fmt.Errorf("events so far: %q", msgs)
	})
}
