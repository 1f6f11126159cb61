// Command etcd runs the etcd server pinned by k8s.io/kubernetes, for the local control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
