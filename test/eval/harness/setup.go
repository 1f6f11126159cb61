// Package harness runs the evaluation's workload on a real local control plane (the
// end-to-end framework: etcd, kube-apiserver, kwok nodes, kube-scheduler, and cps-extender
// where the setup uses it), one fresh control plane per setup, and records what happened as an
// eval.Run. The pure parts (workload, communication model, metrics, report) are in test/eval.
package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/eval"
)

// Setup is one scheduler configuration under comparison.
type Setup struct {
	Name string
	// PriorityClasses gives pods their job's PriorityClass (the rest run without priority).
	PriorityClasses bool
	// Policy, when set, runs kube-scheduler with cps-extender under this admission policy.
	Policy string
	// NativeGang runs kube-scheduler's own gang scheduling (GenericWorkload): a Workload and
	// a PodGroup per job.
	NativeGang bool
	// NativeTopology adds kube-scheduler's topology-aware workload scheduling
	// (TopologyAwareWorkloadScheduling, KEP-5732) to NativeGang: each job's PodGroup is
	// constrained to one rack.
	NativeTopology bool
	// Preemption is the extender's model.preemption; empty keeps the default (urgent).
	Preemption string
	// TurnGate runs the extender's turn-gate webhook as deployed (deploy/webhook, the
	// certificate the extender keeps): pods created while a job waits get the scheduling
	// gate, which the extender lifts when their job's turn comes.
	TurnGate bool
}

// Extender tells whether the setup runs cps-extender.
func (s Setup) Extender() bool { return s.Policy != "" }

// Setups are the ten setups, in report order.
var Setups = []Setup{
	{Name: "plain"},
	{Name: "priorityclasses", PriorityClasses: true},
	{Name: "native-gang", PriorityClasses: true, NativeGang: true},
	{Name: "native-gang-tas", PriorityClasses: true, NativeGang: true, NativeTopology: true},
	{Name: "cps-strict", PriorityClasses: true, Policy: "strict"},
	{Name: "cps-reserve", PriorityClasses: true, Policy: "reserve"},
	{Name: "cps-besteffort", PriorityClasses: true, Policy: "besteffort"},
	{Name: "cps-backfill", PriorityClasses: true, Policy: "backfill"},
	{Name: "cps-reserve-nopreempt", PriorityClasses: true, Policy: "reserve", Preemption: "off"},
	{Name: "cps-reserve-gated", PriorityClasses: true, Policy: "reserve", TurnGate: true},
}

// Rivals name the setups a user would run instead of cps-extender for gangs: the default
// must not wait or take longer than they do (the summary's floors).
var Rivals = []string{"native-gang", "native-gang-tas"}

// DefaultSetup names the setup that stands for cps-extender as shipped: the default policy
// (reserve), the default preemption rule, and the turn gate (the deploy overlays' webhook
// gives every pod of the scheduler the gate). The report pairs every other setup with it.
const DefaultSetup = "cps-reserve-gated"

// SetupsNamed returns the setups with the given names, in the order given.
func SetupsNamed(names ...string) ([]Setup, error) {
	var out []Setup
	for _, n := range names {
		found := false
		for _, s := range Setups {
			if s.Name == n {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no setup %q (have %s)", n, setupNames())
		}
	}
	return out, nil
}

func setupNames() string {
	names := make([]string, len(Setups))
	for i, s := range Setups {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Labels and resources the harness puts on nodes and pods.
const (
	schedulerName = "cps-scheduler" // the profile of scheduler-config/kube-scheduler.yaml
	// userLabel names the user of a namespace (the extender's gang.userLabel): each user's
	// namespace (eval.NamespaceOf) carries it, the pods do not.
	userLabel   = "cps-extender.io/user"
	rackLabel   = "topology.cps-extender.io/rack"
	gpuResource = "nvidia.com/gpu"
)

// Model time constants of the extender, in simulated time (scaled by eval.Scale when the
// extender is configured): the defaults of tau, the starvation bound, how long a job waits
// for one rack before it spreads and for a reservation under backfill, the minimum run time
// of a preemption victim and the window of the eviction budget. turnHold is not scaled: it
// covers kube-scheduler placing an admitted job's pods, which takes real time.
const (
	Tau              = 10 * time.Minute
	StarvationBound  = 30 * time.Minute
	SpreadAfter      = 5 * time.Minute
	ReserveAfter     = 10 * time.Minute
	MinRunTime       = 10 * time.Minute
	PreemptionWindow = 10 * time.Minute
)

// schedulerConfig is scheduler-config/kube-scheduler.yaml as shipped with the kubeconfig and
// leader election replaced, and the extender URL set, or the extenders block dropped when
// extenderAddr is empty (the same scheduler, profile and backoff for every setup).
func schedulerConfig(kubeconfig, extenderAddr string) ([]byte, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, "scheduler-config", "kube-scheduler.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := string(raw)
	edits := [][2]string{
		{"kubeconfig: /etc/kubernetes/scheduler.conf", "kubeconfig: " + kubeconfig},
		{"leaderElect: true", "leaderElect: false"},
	}
	if extenderAddr != "" {
		edits = append(edits, [2]string{"urlPrefix: http://127.0.0.1:8888/scheduler", "urlPrefix: http://" + extenderAddr + "/scheduler"})
	}
	for _, e := range edits {
		if !strings.Contains(cfg, e[0]) {
			return nil, fmt.Errorf("%s no longer contains %q", path, e[0])
		}
		cfg = strings.Replace(cfg, e[0], e[1], 1)
	}
	if extenderAddr == "" {
		i := strings.Index(cfg, "\nextenders:")
		if i < 0 {
			return nil, fmt.Errorf("%s has no extenders block", path)
		}
		cfg = cfg[:i] + "\n"
	}
	return []byte(cfg), nil
}

// extenderConfig is the extender's configuration for a setup: the eval's users and tiers,
// the rack topology, the policy and preemption mode, and the model's times scaled to real
// time. It leaves gang.podUserNamespaces unset: a job's user is its namespace's label, as
// for any tenant.
func extenderConfig(listen, hookAddr, kubeconfig string, s Setup) string {
	var b strings.Builder
	// One extender: it leads without an election.
	fmt.Fprintf(&b, "listen: %s\nurlPrefix: /scheduler\nkubeconfig: %s\nlog: {format: json, level: info}\nleaderElection: {leaderElect: false}\n", listen, kubeconfig)
	fmt.Fprintf(&b, "model:\n  policy: %s\n  tau: %s\n  starvationBound: %s\n  spreadAfter: %s\n  reserveAfter: %s\n",
		s.Policy, eval.Real(Tau), eval.Real(StarvationBound), eval.Real(SpreadAfter), eval.Real(ReserveAfter))
	if s.Preemption != "" {
		fmt.Fprintf(&b, "  preemption: %s\n", s.Preemption)
	}
	fmt.Fprintf(&b, "  minRunTime: %s\n  preemptionWindow: %s\n  userTiers:\n", eval.Real(MinRunTime), eval.Real(PreemptionWindow))
	for _, u := range eval.Users {
		fmt.Fprintf(&b, "    %s: %s\n", u.Name, u.Tier)
	}
	fmt.Fprintf(&b, "gang:\n  urgentPriorityClasses: [%s]\n", eval.UrgentClass.Name)
	fmt.Fprintf(&b, "affinity:\n  topology: [%s]\n", rackLabel)
	if hookAddr != "" {
		b.WriteString(framework.TurnGateWebhookConfig(hookAddr))
	}
	return b.String()
}
