//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// schedulerConfig is a minimal KubeSchedulerConfiguration; %q is the kubeconfig path.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
`

func pod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "fake",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
				},
			}},
		},
	}
}

// TestSmokeSchedulesPods runs the whole stack: kube-scheduler binds pods to kwok nodes, and
// kwok makes them Running.
func TestSmokeSchedulesPods(t *testing.T) {
	began := time.Now()
	cp := framework.Start(t, framework.Options{})
	nodes := framework.Nodes("node", 3, "4", "8Gi")
	cp.AddNodes(t, nodes...)
	cp.StartScheduler(t, fmt.Appendf(nil, schedulerConfig, cp.Kubeconfig))
	setUp := time.Since(began)

	ctx := context.Background()
	const namespace, pods = "default", 3
	for i := range pods {
		if _, err := cp.Client.CoreV1().Pods(namespace).Create(ctx, pod("smoke-"+strconv.Itoa(i), "1"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod: %v", err)
		}
	}
	framework.WaitFor(t, 60*time.Second, "pods bound and Running", func() (bool, error) {
		list, err := cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running < pods {
			return false, fmt.Errorf("%d of %d pods bound and Running", running, pods)
		}
		return true, nil
	})

	nodeNames := map[string]bool{}
	for _, n := range nodes {
		nodeNames[n.Name] = true
	}
	placements := framework.PodPlacements(t, cp.Client, namespace)
	if len(placements) != pods {
		t.Errorf("got %d pods, want %d: %v", len(placements), pods, placements)
	}
	for name, node := range placements {
		if !nodeNames[node] {
			t.Errorf("pod %s is on node %q, not one of %v", name, node, nodeNames)
		}
	}
	t.Logf("placements %v; set-up (control plane, nodes, scheduler) %v, total %v",
		placements, setUp.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// TestSmokeStopLeavesNoProcess checks that a test's cleanup ends every process group it
// started, including a grandchild of a StartProcess child, and that token users are
// authenticated but not authorised.
func TestSmokeStopLeavesNoProcess(t *testing.T) {
	var procs []*framework.Process
	t.Run("control plane", func(t *testing.T) {
		cp := framework.Start(t, framework.Options{Users: []framework.User{{Name: "alice"}}})
		cp.StartScheduler(t, fmt.Appendf(nil, schedulerConfig, cp.Kubeconfig))
		// A child that forks: Stop must reach the grandchild through the process group.
		cp.StartProcess(t, "forker", "/bin/sh", []string{"-c", "sleep 300 & wait"}, nil)

		cfg, err := clientcmd.BuildConfigFromFlags("", cp.UserKubeconfig("alice"))
		if err != nil {
			t.Fatalf("load alice's kubeconfig: %v", err)
		}
		alice, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = alice.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("alice lists pods: got error %v, want Forbidden", err)
		}

		procs = cp.Processes()
		for _, p := range procs {
			if err := syscall.Kill(p.Pid(), 0); err != nil {
				t.Errorf("%s (pid %d) is not running: %v", p.Name, p.Pid(), err)
			}
		}
	})

	if len(procs) != 5 {
		t.Errorf("got %d processes, want etcd, kube-apiserver, kwok, kube-scheduler and forker", len(procs))
	}
	for _, p := range procs {
		if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group of %s (%d) still exists after cleanup (kill -0: %v)", p.Name, p.Pid(), err)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.Pid())); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s (pid %d) still in /proc after cleanup", p.Name, p.Pid())
		}
		if !p.Exited() {
			t.Errorf("%s (pid %d) not reaped", p.Name, p.Pid())
		}
	}
}
