// Command kustomize renders a kustomization folder to a YAML stream on stdout, with the same
// library (sigs.k8s.io/kustomize/api, krusty) that `kubectl apply -k` and the kustomize CLI
// use. The end-to-end tests build it to render deploy/ exactly as an operator's kubectl would.
//
//	go run . DIR
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kustomize DIR")
		os.Exit(2)
	}
	opts := krusty.MakeDefaultOptions()
	// As `kustomize build` and `kubectl kustomize` do: namespaces and RBAC before workloads.
	opts.Reorder = krusty.ReorderOptionLegacy
	resources, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kustomize:", err)
		os.Exit(1)
	}
	out, err := resources.AsYaml()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kustomize:", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(out); err != nil {
		fmt.Fprintln(os.Stderr, "kustomize:", err)
		os.Exit(1)
	}
}
