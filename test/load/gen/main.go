// Command gen writes the load-test request bodies (test/load/run.sh replays them) for a
// synthetic cluster of the given size, the same cluster `make load` creates on the local
// control plane: nodes node-00000.., jobs job-00000.. of 1 PS and workers.
//
//	go run ./test/load/gen -nodes 5000 -jobs 2000 -pods-per-job 5 -out /tmp/fixtures
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cps-extender/cps-extender/test/load/fixture"
)

func main() {
	spec := fixture.Spec{}
	flag.IntVar(&spec.Nodes, "nodes", 5000, "nodes in the cluster")
	flag.IntVar(&spec.Jobs, "jobs", 2000, "jobs (1 PS + workers each)")
	flag.IntVar(&spec.PodsPerJob, "pods-per-job", 5, "pods per job")
	flag.StringVar(&spec.Namespace, "namespace", "default", "namespace of the pods")
	count := flag.Int("count", 20, "bodies per verb (each for another pod)")
	fullNodes := flag.Bool("full-nodes", false, "send full Node objects (nodeCacheCapable: false) instead of node names")
	out := flag.String("out", "", "folder to write the bodies into (required)")
	flag.Parse()
	if *out == "" || spec.Nodes <= 0 || spec.Jobs <= 0 || spec.PodsPerJob <= 0 || *count <= 0 {
		fmt.Fprintln(os.Stderr, "gen: -out is required; -nodes, -jobs, -pods-per-job and -count must be positive")
		flag.Usage()
		os.Exit(2)
	}
	n, err := fixture.WriteBodies(*out, fixture.Pods(spec), fixture.Nodes(spec), *count, *fullNodes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %d request bodies to %s (%d nodes, %d jobs x %d pods)\n", n, *out, spec.Nodes, spec.Jobs, spec.PodsPerJob)
}
