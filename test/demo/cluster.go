package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// The demo cluster: nodeCount kwok nodes of nodeCPU and nodeMemory, split evenly over
// rackCount racks in name order, each labelled rackLabel=rack-a, rack-b, ...
const (
	nodeCount  = 8
	rackCount  = 2
	nodeCPU    = "8"
	nodeMemory = "32Gi"
	rackLabel  = "topology.cps-extender.io/rack"
)

// Timeouts, generous: the machine may be shared with end-to-end tests.
const (
	extenderReadyTimeout = 120 * time.Second
	apiCallTimeout       = 30 * time.Second
)

// demoNodes returns the node specs: node-0 .. node-7, the first half in rack-a, the rest in
// rack-b.
func demoNodes() []framework.NodeSpec {
	nodes := framework.Nodes("node", nodeCount, nodeCPU, nodeMemory)
	for i := range nodes {
		nodes[i].Labels = map[string]string{rackLabel: fmt.Sprintf("rack-%c", 'a'+i*rackCount/nodeCount)}
	}
	return nodes
}

// rackOf maps each node name to its rack.
func rackOf(nodes []framework.NodeSpec) map[string]string {
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		out[n.Name] = n.Labels[rackLabel]
	}
	return out
}

// clusterCPU is the cpu of all nodes together, in millicores.
func clusterCPU() int64 {
	return milliCores(nodeCPU) * nodeCount
}

// createPriorityClasses creates the workload's PriorityClasses, non-preempting
// (preemptionPolicy: Never): the shipped scheduler configuration keeps kube-scheduler's
// DefaultPreemption, and cps-extender has no preempt verb, so a preempting class lets a
// higher-priority pod that finds no room delete pods of jobs the extender admitted, held or
// bound, and a gang of bare pods then never completes.
func createPriorityClasses(c kubernetes.Interface, classes map[string]int32) error {
	never := corev1.PreemptNever
	for _, name := range sortedKeys(classes) {
		pc := &schedulingv1.PriorityClass{
			ObjectMeta:       metav1.ObjectMeta{Name: name},
			Value:            classes[name],
			PreemptionPolicy: &never,
			Description:      "cps-extender demo: non-preempting, the extender orders the jobs",
		}
		ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
		_, err := c.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("create PriorityClass %s: %w", name, err)
		}
	}
	return nil
}

// createUserNamespaces creates each user's namespace, labelled with its user (labelUser), as
// a cluster's admins set up a tenant; one that exists is left as it is.
func createUserNamespaces(c kubernetes.Interface, work workload) error {
	for _, user := range sortedKeys(work.Users) {
		name := work.namespaceOf(user)
		ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelUser: user}}}
		_, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		cancel()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// buildExtender starts `go build -o <dir>/cps-extender .` in the repository root and returns
// a channel that delivers the binary's path, or the build error with its output.
func buildExtender(dir string) <-chan buildResult {
	done := make(chan buildResult, 1)
	go func() {
		bin, err := framework.BuildExtender(dir)
		done <- buildResult{bin: bin, err: err}
	}()
	return done
}

// buildResult is what buildExtender delivers.
type buildResult struct {
	bin string
	err error
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// extenderConfig is the extender's config file: the defaults, plus the listen address, the
// kubeconfig, console logging at info, the demo users' tiers, the rack topology, and the
// turn-gate webhook on hookAddr with the certificate the extender keeps (as deployed, and
// also for 127.0.0.1). As by default, no namespace's pods may name their user
// (gang.podUserNamespaces): the users are the namespaces' labels. The jobs of
// urgentClasses are urgent (gang.urgentPriorityClasses).
func extenderConfig(listen, hookAddr, kubeconfig string, userTiers map[string]string, urgentClasses []string) ([]byte, error) {
	cfg := map[string]any{
		"listen":     listen,
		"kubeconfig": kubeconfig,
		"log":        map[string]any{"format": "console", "level": "info"},
		"model":      map[string]any{"userTiers": userTiers},
		"gang":       map[string]any{"urgentPriorityClasses": urgentClasses},
		"affinity":   map[string]any{"topology": []string{rackLabel}},
		"webhook":    map[string]any{"listen": hookAddr, "hosts": []string{"127.0.0.1"}},
		// One extender: it leads without an election.
		"leaderElection": map[string]any{"leaderElect": false},
	}
	return yaml.Marshal(cfg)
}

// startExtender writes the extender's config into the control plane's folder, starts the
// binary as a child of the control plane and waits until its /readyz answers 200.
func startExtender(t *runner, cp *framework.ControlPlane, bin, addr, hookAddr string, userTiers map[string]string, urgentClasses []string) (*framework.Process, error) {
	cfg, err := extenderConfig(addr, hookAddr, cp.Kubeconfig, userTiers, urgentClasses)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(cp.Dir, "cps-extender.yaml")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return nil, err
	}
	p := cp.StartProcess(t, "cps-extender", bin, []string{"--config=" + path}, nil)
	framework.WaitExtenderReady(t, p, extenderReadyTimeout, framework.HTTPGet("http://"+addr+"/readyz"))
	return p, nil
}

// schedulerConfig is scheduler-config/kube-scheduler.yaml as shipped, with only the
// kubeconfig path, the extender URL and leader election replaced (as the end-to-end tests
// do).
func schedulerConfig(root, kubeconfig, extenderAddr string) ([]byte, error) {
	path := filepath.Join(root, "scheduler-config", "kube-scheduler.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := string(raw)
	for _, r := range []struct{ old, new string }{
		{"kubeconfig: /etc/kubernetes/scheduler.conf", "kubeconfig: " + kubeconfig},
		{"leaderElect: true", "leaderElect: false"},
		{"urlPrefix: http://127.0.0.1:8888/scheduler", "urlPrefix: http://" + extenderAddr + "/scheduler"},
	} {
		if !strings.Contains(cfg, r.old) {
			return nil, fmt.Errorf("%s no longer contains %q", path, r.old)
		}
		cfg = strings.Replace(cfg, r.old, r.new, 1)
	}
	return []byte(cfg), nil
}
