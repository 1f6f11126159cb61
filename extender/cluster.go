package extender

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Cluster is the extender's view of the cluster, kept by client-go shared informers. The
// handlers read it; they never call the API server.
type Cluster struct {
	log     *zap.Logger
	factory informers.SharedInformerFactory
	nodes   corelisters.NodeLister
	pods    corelisters.PodLister
	synced  []cache.InformerSynced
	ready   atomic.Bool
}

// NewCluster builds the cluster view on client; Start runs it.
func NewCluster(log *zap.Logger, client kubernetes.Interface, resync time.Duration) *Cluster {
	factory := informers.NewSharedInformerFactory(client, resync)
	nodeInf := factory.Core().V1().Nodes()
	podInf := factory.Core().V1().Pods()
	return &Cluster{
		log:     log,
		factory: factory,
		nodes:   nodeInf.Lister(),
		pods:    podInf.Lister(),
		synced:  []cache.InformerSynced{nodeInf.Informer().HasSynced, podInf.Informer().HasSynced},
	}
}

// Start starts the informers and waits until their caches have synced; after that Ready
// answers true. It returns an error when ctx ends first.
func (c *Cluster) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("cluster view: informer caches did not sync: %w", ctx.Err())
	}
	c.ready.Store(true)
	c.log.Info("cluster view synced")
	return nil
}

// Shutdown stops the informers and waits for their goroutines.
func (c *Cluster) Shutdown() { c.factory.Shutdown() }

// Ready reports whether the informer caches have synced.
func (c *Cluster) Ready() bool { return c.ready.Load() }

// Node returns the node called name from the informer cache.
func (c *Cluster) Node(name string) (*corev1.Node, bool) {
	n, err := c.nodes.Get(name)
	if err != nil {
		return nil, false
	}
	return n, true
}
