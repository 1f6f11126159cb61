package framework

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// DefaultKwokStages are the kwok stages Start loads, as paths under the binaries' kwok-stages/
// folder (a copy of sigs.k8s.io/kwok@v0.8.0/kustomize/stage/):
//   - node/fast/node-initialize: a new node becomes Ready at once;
//   - node/heartbeat-with-lease: kwok keeps the node's conditions fresh and renews its lease;
//   - pod/fast/pod-ready: a bound pod becomes Running and Ready at once;
//   - pod/general/pod-complete: a Running pod whose ownerReferences name a kind Job completes
//     (phase Succeeded) after the delay in its annotation PodCompleteDelayAnnotation (default 1 s)
//     plus a random jitter up to PodCompleteJitterAnnotation (default 5 s; set both to the same
//     value for an exact duration); pods without a Job owner run until deleted. Nothing checks
//     that the Job exists (there is no garbage collector), so a made-up owner reference will do;
//   - pod/fast/pod-delete: a pod being deleted is removed at once, finalizers and grace period
//     notwithstanding.
var DefaultKwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/general/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
}

const (
	// PodCompleteDelayAnnotation sets how long after it started a Job-owned pod completes, as a
	// Go duration ("30s").
	PodCompleteDelayAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"
	// PodCompleteJitterAnnotation sets the upper bound of the random completion delay; give it
	// the same value as PodCompleteDelayAnnotation for an exact duration.
	PodCompleteJitterAnnotation = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
)

// startKwok writes the stages into one configuration file and runs kwok, managing the nodes
// annotated kwok.x-k8s.io/node=fake, with its server on a free port; it returns once the
// server's /healthz answers, which kwok starts only after its controllers.
func (cp *ControlPlane) startKwok(t testing.TB, stages []string) {
	t.Helper()
	if stages == nil {
		stages = DefaultKwokStages
	}
	var config bytes.Buffer
	for _, stage := range stages {
		b, err := os.ReadFile(filepath.Join(cp.BinDir, "kwok-stages", stage))
		if err != nil {
			t.Fatalf("kwok stage: %v", err)
		}
		fmt.Fprintf(&config, "---\n# %s\n%s\n", stage, bytes.TrimSpace(b))
	}
	configPath := filepath.Join(cp.Dir, "kwok.yaml")
	if err := os.WriteFile(configPath, config.Bytes(), 0o644); err != nil {
		t.Fatalf("write kwok config: %v", err)
	}

	cp.startWithRetry(t, "kwok", func() (*Process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		p, err := cp.startChild(t, "kwok", filepath.Join(cp.BinDir, "kwok"), []string{
			"--kubeconfig=" + cp.Kubeconfig,
			"--config=" + configPath,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeAnnotationValue,
			"--server-address=" + addr,
		}, nil)
		if err != nil {
			return nil, err
		}
		return p, waitUntil(p, kwokTimeout, func() (bool, error) { return httpOK("http://" + addr + "/healthz") })
	})
}
