// Package leader elects one writer among the extender's replicas with a Lease (client-go
// leaderelection): every replica computes the queue and serves the verbs and the webhook,
// but only the leader evicts preemption victims, nudges and lifts pods, writes the waiting
// Events and switches the webhook's calls. It imports metrics only.
package leader

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cps-extender/cps-extender/extender/metrics"
)

// Options configure an Elector.
type Options struct {
	Log    *zap.Logger
	Client kubernetes.Interface
	// Namespace and Name name the Lease.
	Namespace, Name string
	// Identity names this replica in the Lease (default: the host name and a random
	// suffix, so that a restarted pod is a new candidate).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's: a leader that is gone
	// (killed, cut off) is replaced within LeaseDuration of its last renewal.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Metrics reports cps_extender_leader; nil reports nothing.
	Metrics *metrics.Metrics
	// OnStarted is called (on its own goroutine) each time this replica becomes the leader,
	// before Leading reports true: the place to rebuild what the writers need from the API
	// server. Nil: nothing.
	OnStarted func(ctx context.Context)
}

// Elector campaigns for the Lease until its context ends, and reports whether this replica
// leads now.
type Elector struct {
	o       Options
	leading atomic.Bool
	mu      sync.Mutex
	leader  string // the identity the Lease names, as last observed
}

// New builds an Elector; Run campaigns.
func New(o Options) (*Elector, error) {
	if o.Client == nil || o.Name == "" || o.Namespace == "" {
		return nil, fmt.Errorf("leader election: a client, a Lease name and a namespace are required")
	}
	if o.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("leader election: the host name, for the identity: %w", err)
		}
		o.Identity = host + "_" + rand.String(5)
	}
	o.Metrics.Leader(false)
	return &Elector{o: o}, nil
}

// Identity is this replica's name in the Lease.
func (e *Elector) Identity() string { return e.o.Identity }

// Leading reports whether this replica leads now. A nil Elector leads: a single extender
// run without election writes as before.
func (e *Elector) Leading() bool { return e == nil || e.leading.Load() }

// Leader is the identity the Lease named when last observed ("" before).
func (e *Elector) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// Run campaigns until ctx ends, again and again: a leader that loses the Lease (a renewal
// that failed past RenewDeadline) stops writing and becomes a candidate again. On ctx's end
// a leader releases the Lease, so that a replica left takes over at once rather than after
// LeaseDuration.
func (e *Elector) Run(ctx context.Context) {
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.o.Namespace, e.o.Name, e.o.Client.CoreV1(), e.o.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: e.o.Identity})
	if err != nil {
		e.o.Log.Error("leader election: the lock", zap.Error(err))
		return
	}
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: e.o.LeaseDuration, RenewDeadline: e.o.RenewDeadline, RetryPeriod: e.o.RetryPeriod,
			ReleaseOnCancel: true, Name: e.o.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					if e.o.OnStarted != nil {
						e.o.OnStarted(lctx)
					}
					e.leading.Store(true)
					e.o.Metrics.Leader(true)
					e.o.Log.Info("leading: this replica writes (evictions, nudges, gate lifts, waiting Events, the webhook switch)", zap.String("identity", e.o.Identity))
				},
				OnStoppedLeading: func() { // also when this round never led
					if e.leading.Swap(false) {
						e.o.Metrics.Leader(false)
						e.o.Log.Info("not leading any more: this replica serves the verbs and writes nothing", zap.String("identity", e.o.Identity))
					}
				},
				OnNewLeader: func(identity string) {
					e.mu.Lock()
					e.leader = identity
					e.mu.Unlock()
					if identity != e.o.Identity {
						e.o.Log.Info("the leader is another replica", zap.String("leader", identity))
					}
				},
			},
		})
		if err != nil {
			e.o.Log.Error("leader election: the elector", zap.Error(err))
			return
		}
		elector.Run(ctx)
	}
}
