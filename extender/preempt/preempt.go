// Package preempt evicts the victims of preemptions: the running jobs a Preempting job's
// decision names (priority.Decision.Victims), whole gangs through the Eviction API, so that
// PodDisruptionBudgets are respected. It tells the view which jobs it may not evict (an
// eviction was refused) and how many victim jobs it evicted lately, and puts an Event on
// every evicted pod naming the job it made room for. It imports view, gang and metrics.
package preempt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/extender/view"
	"github.com/cps-extender/cps-extender/priority"
)

// The reasons of the preemptor's Events: on each evicted pod, and on each pod of a victim
// left running when a budget refused its eviction after the dry run passed.
const (
	ReasonPreempted            = "Preempted"
	ReasonPreemptionIncomplete = "PreemptionIncomplete"
)

// Evictor evicts one pod through the Eviction API; with dryRun nothing is evicted, but a
// PodDisruptionBudget that would refuse it does.
type Evictor interface {
	Evict(ctx context.Context, pod gang.PodRef, dryRun bool) error
}

// EventRecorder is the part of client-go's record.EventRecorder the preemptor uses.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// APIEvictor evicts through the API server (pods/eviction create).
type APIEvictor struct {
	client  kubernetes.Interface
	timeout time.Duration
}

// NewAPIEvictor returns an evictor of client; each call is bounded by timeout.
func NewAPIEvictor(client kubernetes.Interface, timeout time.Duration) *APIEvictor {
	return &APIEvictor{client: client, timeout: timeout}
}

// Evict posts an Eviction for pod, with its UID as a precondition: a pod recreated under
// the same name is not the victim.
func (e *APIEvictor) Evict(ctx context.Context, pod gang.PodRef, dryRun bool) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	opts := &metav1.DeleteOptions{}
	if pod.UID != "" {
		uid := pod.UID
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: opts,
	}
	// The typed Evict would retry a 429 after its Retry-After (10 s) up to ten times: a
	// budget that refuses must come back as a refusal now, so the request is built here
	// with retries off (the same POST the typed client makes).
	return e.client.PolicyV1().RESTClient().Post().AbsPath("/api/v1").
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("eviction").
		Body(eviction).MaxRetries(0).Do(ctx).Error()
}

// Options are the dependencies and settings of a Preemptor.
type Options struct {
	Log     *zap.Logger
	Evictor Evictor
	// Events records the Preempted Event on each evicted pod; nil records none.
	Events EventRecorder
	// Metrics counts preemptions and evicted pods; nil counts none.
	Metrics *metrics.Metrics
	// Clock is the clock; nil means the real one.
	Clock clock.PassiveClock
	// ProtectFor is how long a job whose eviction was refused is no victim (default 5m).
	ProtectFor time.Duration
	// Budgets checks each victim gang as a whole against the PodDisruptionBudgets; nil
	// leaves them to the Eviction API's checks, one pod at a time.
	Budgets Budgets
	// Leading says whether this replica leads: only the leader evicts (nil: always).
	Leading func() bool
	// Ledger keeps the evictions and protections where the next leader finds them (see
	// Restore); nil keeps them in memory only.
	Ledger LedgerStore
}

// Preemptor evicts the victims of the published snapshots' preempting jobs, each victim job
// once, all its bound pods at once after a check of the whole gang against the budgets
// (Budgets) and a dry run of each: a PodDisruptionBudget that would refuse any of them
// leaves the whole gang running and protects the job for ProtectFor. Only the leader
// evicts; what it remembers (victims evicted lately, jobs protected) it saves in the
// Ledger, which the next leader restores before it evicts anything.
type Preemptor struct {
	log        *zap.Logger
	evictor    Evictor
	events     EventRecorder
	metrics    *metrics.Metrics
	clock      clock.PassiveClock
	protectFor time.Duration
	budgets    Budgets
	leading    func() bool
	ledger     LedgerStore
	// dirty is signalled when the ledger has news to save.
	dirty chan struct{}

	mu        sync.Mutex
	evicted   map[string]time.Time // victim job -> when its eviction began
	finished  map[string]time.Time // victim job -> when its eviction calls returned
	protected map[string]time.Time // job -> until
	rounds    map[string]round     // preemptor job -> its victims under way
	wg        sync.WaitGroup
	ctx       context.Context
}

// New builds a Preemptor; ctx bounds its evictions.
func New(ctx context.Context, o Options) (*Preemptor, error) {
	var errs []error
	if o.Log == nil {
		errs = append(errs, errors.New("log is required"))
	}
	if o.Evictor == nil {
		errs = append(errs, errors.New("evictor is required"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("preemptor: %w", errors.Join(errs...))
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.ProtectFor <= 0 {
		o.ProtectFor = 5 * time.Minute
	}
	p := &Preemptor{log: o.Log, evictor: o.Evictor, events: o.Events, metrics: o.Metrics, clock: o.Clock,
		protectFor: o.ProtectFor, budgets: o.Budgets, leading: o.Leading, ledger: o.Ledger, dirty: make(chan struct{}, 1),
		evicted: map[string]time.Time{}, finished: map[string]time.Time{}, protected: map[string]time.Time{}, rounds: map[string]round{}, ctx: ctx}
	if p.ledger != nil {
		go p.saveLoop(ctx)
	}
	return p, nil
}

// Leading reports whether this replica may evict.
func (p *Preemptor) Leading() bool { return p.leading == nil || p.leading() }

// Restore takes in the ledger the last leader saved, before this replica evicts anything as
// the leader: the victims evicted lately still count against maxPreemptions and are not
// chosen again, and the jobs whose eviction was refused stay protected, whichever replica
// evicted or was refused. Entries past ProtectFor are dropped.
func (p *Preemptor) Restore(ctx context.Context) error {
	if p.ledger == nil {
		return nil
	}
	l, err := p.ledger.Load(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for job, at := range l.Evicted {
		if now.Sub(at) < p.protectFor && at.After(p.evicted[job]) {
			p.evicted[job] = at
			p.finished[job] = at // evicted by another replica: not under way here
		}
	}
	for job, until := range l.Protected {
		if until.After(now) && until.After(p.protected[job]) {
			p.protected[job] = until
		}
	}
	p.log.Info("preemption ledger restored", zap.Int("evicted", len(l.Evicted)), zap.Int("protected", len(l.Protected)))
	return nil
}

// changed asks for the ledger to be saved. p.mu is held or not: it does not block.
func (p *Preemptor) changed() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// saveLoop saves the ledger after each change, until ctx ends.
func (p *Preemptor) saveLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.dirty:
		}
		if !p.Leading() {
			continue
		}
		p.mu.Lock()
		l := Ledger{Evicted: maps.Clone(p.evicted), Protected: maps.Clone(p.protected)}
		p.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := p.ledger.Save(sctx, l); err != nil {
			p.log.Warn("saving the preemption ledger; the next leader may count fewer recent evictions", zap.Error(err))
		}
		cancel()
	}
}

// Protected maps the jobs that may not be victims to when that ends.
func (p *Preemptor) Protected() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	out := make(map[string]time.Time, len(p.protected))
	for k, until := range p.protected {
		if until.After(now) {
			out[k] = until
		} else {
			delete(p.protected, k)
		}
	}
	return out
}

// Evicted counts the victim jobs whose eviction began after since. A record older than
// since and than ProtectFor (for which claim still needs it) is dropped.
func (p *Preemptor) Evicted(since time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for k, at := range p.evicted {
		switch {
		case at.After(since):
			n++
		case p.clock.Since(at) > p.protectFor:
			delete(p.evicted, k)
			delete(p.finished, k)
		}
	}
	return n
}

// evictSettle is how long after its evictions returned a victim still counts as being
// evicted (Evicting): the view needs a moment to see its pods' deletions, and until then it
// counts them as bound.
const evictSettle = 2 * time.Second

// Evicting reports whether a victim job's eviction is under way or ended less than
// evictSettle ago. The gate binds none of its pods meanwhile: a pod its controller made
// anew after an early eviction could otherwise gather with the gang's doomed pods and stay
// bound alone (seen in make eval).
func (p *Preemptor) Evicting(job string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.evicted[job]; !ok {
		return false
	}
	if until, kept := p.protected[job]; kept && until.After(p.clock.Now()) {
		return false // its eviction was refused: it keeps running
	}
	done, ok := p.finished[job]
	return !ok || p.clock.Since(done) < evictSettle
}

// roundWait is the longest a preemptor's victims under way hold back its next victims:
// pods stuck terminating must not keep it waiting for ever.
const roundWait = time.Minute

// round is a preemptor's victims under way: the jobs claimed for it, and since when.
type round struct {
	victims []string
	since   time.Time
}

// Published starts the eviction of every victim of snap's preempting jobs not evicted yet.
// A preemptor gets no new victims while those of its last round are still on their nodes
// (up to roundWait): until the view sees them go, the model may count their room as taken
// and name others, as it did on a loaded machine (two gangs evicted for one's room). It does
// not block.
func (p *Preemptor) Published(snap *view.Snapshot) {
	if snap == nil || snap.Queue == nil || !p.Leading() {
		return
	}
	for _, d := range snap.Queue.Order {
		if d.Phase != priority.PhasePreempting || p.underWay(d.Key, snap) {
			continue
		}
		for _, victim := range d.Victims {
			job, _, ok := snap.Job(victim.Key)
			if !ok || !p.claim(victim.Key) {
				continue
			}
			p.started(d.Key, victim.Key)
			pods := boundPods(job)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.evict(d.Key, d.P, victim, pods)
			}()
		}
	}
}

// Wait waits for the evictions under way (tests, shutdown).
func (p *Preemptor) Wait() { p.wg.Wait() }

// underWay reports whether a preemptor's last round has a victim still on its nodes in
// snap (bound or leaving), not refused, for less than roundWait; it forgets a round that
// has not.
func (p *Preemptor) underWay(preemptor string, snap *view.Snapshot) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.rounds[preemptor]
	if !ok {
		return false
	}
	now := p.clock.Now()
	if now.Sub(r.since) < roundWait {
		for _, v := range r.victims {
			if until, refused := p.protected[v]; refused && until.After(now) {
				continue // kept by a refusal: it is not leaving
			}
			if job, _, ok := snap.Job(v); ok && (job.Leaving > 0 || len(boundPods(job)) > 0) {
				return true
			}
		}
	}
	delete(p.rounds, preemptor)
	return false
}

// started adds a victim to its preemptor's round. Rounds past roundWait are dropped here
// too: a preemptor that got its turn is not asked about its round again.
func (p *Preemptor) started(preemptor, victim string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for k, r := range p.rounds {
		if now.Sub(r.since) >= roundWait {
			delete(p.rounds, k)
		}
	}
	r, ok := p.rounds[preemptor]
	if !ok {
		r.since = now
	}
	r.victims = append(r.victims, victim)
	p.rounds[preemptor] = r
}

// claim marks a victim job as being evicted, unless it already is (an earlier snapshot
// named it) or its eviction was refused.
func (p *Preemptor) claim(job string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if until, ok := p.protected[job]; ok && until.After(now) {
		return false
	}
	if at, ok := p.evicted[job]; ok && now.Sub(at) < p.protectFor {
		return false
	}
	p.evicted[job] = now
	delete(p.finished, job)
	p.changed()
	return true
}

// evict evicts a victim job's pods: a dry run of each first, then all of them. The dry runs
// go out together, so that the model, which sees the victim running until its first pod is
// deleted, chooses another victim meanwhile only for as long as one round trip.
func (p *Preemptor) evict(preemptor string, preemptorP float64, victim priority.Victim, pods []gang.PodRef) {
	defer func() {
		p.mu.Lock()
		p.finished[victim.Key] = p.clock.Now()
		p.mu.Unlock()
	}()
	log := p.log.With(zap.String("preemptor", preemptor), zap.String("victim", victim.Key), zap.Int("pods", len(pods)))
	if p.budgets != nil {
		if why := p.budgets.Refusal(pods); why != "" {
			p.protect(victim.Key, false)
			p.metrics.Preemption(metrics.PreemptionRefused)
			log.Warn("preemption victim kept: its gang may not go whole", zap.String("budget", why))
			return
		}
	}
	if pod, err := p.dryRun(pods); err != nil {
		p.protect(victim.Key, false)
		if apierrors.IsTooManyRequests(err) {
			p.metrics.Preemption(metrics.PreemptionRefused)
		} else {
			p.metrics.Preemption(metrics.PreemptionFailed)
		}
		log.Warn("preemption victim kept: an eviction would be refused", zap.String("pod", pod.String()), zap.Error(err))
		return
	}
	// Once the first pod is evicted the rest must follow, also when the extender is told to
	// stop meanwhile: each call has its own timeout.
	ctx := context.WithoutCancel(p.ctx)
	var mu sync.Mutex
	var failed []error
	var kept []gang.PodRef
	evicted := 0
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.evictor.Evict(ctx, pod, false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				evicted++
				p.event(pod, preemptor, preemptorP, victim)
			case apierrors.IsNotFound(err):
			default:
				failed = append(failed, fmt.Errorf("%s: %w", pod, err))
				kept = append(kept, pod)
			}
		}()
	}
	wg.Wait()
	p.metrics.PodsEvicted("preempted", evicted)
	switch {
	case len(failed) == 0:
		p.metrics.Preemption(metrics.PreemptionEvicted)
		log.Info("preemption: victim evicted whole")
	case evicted > 0:
		// A budget refused part of the gang after the dry run passed: what is left is
		// reported, and the job is not chosen again meanwhile. It counts against the
		// eviction budget: its pods are gone.
		p.protect(victim.Key, true)
		p.metrics.Preemption(metrics.PreemptionPartial)
		log.Error("preemption: victim evicted in part", zap.Int("evicted", evicted), zap.Error(errors.Join(failed...)))
		for _, pod := range kept {
			p.record(pod, corev1.EventTypeWarning, ReasonPreemptionIncomplete,
				"%d of %d pods of job %s were evicted to make room for job %s; this pod's eviction was refused after the dry run passed, so the gang runs below its minimum: restart or delete it",
				evicted, len(pods), victim.Key, preemptor)
		}
	default:
		p.protect(victim.Key, false)
		p.metrics.Preemption(metrics.PreemptionFailed)
		log.Warn("preemption: victim not evicted", zap.Error(errors.Join(failed...)))
	}
}

// protect keeps a job whose eviction was refused or failed from being a victim for a while;
// unless some of its pods were evicted (counted), it no longer counts as evicted.
func (p *Preemptor) protect(job string, counted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.protected[job] = p.clock.Now().Add(p.protectFor)
	if !counted {
		delete(p.evicted, job)
	}
	p.changed()
}

// dryRun asks for a dry-run eviction of every pod at once; it returns the first refusal or
// error (a pod already gone is no refusal).
func (p *Preemptor) dryRun(pods []gang.PodRef) (gang.PodRef, error) {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.evictor.Evict(p.ctx, pod, true); err != nil && !apierrors.IsNotFound(err) {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return pods[i], err
		}
	}
	return gang.PodRef{}, nil
}

// event records the Preempted Event on an evicted pod.
func (p *Preemptor) event(pod gang.PodRef, preemptor string, preemptorP float64, victim priority.Victim) {
	p.record(pod, corev1.EventTypeWarning, ReasonPreempted,
		"evicted with its whole gang %s (P=%.2f) to make room for job %s (P=%.2f), which has priority over it",
		victim.Key, victim.P, preemptor, preemptorP)
}

// record records an Event on pod.
func (p *Preemptor) record(pod gang.PodRef, eventType, reason, format string, args ...any) {
	if p.events == nil {
		return
	}
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID}}
	p.events.Eventf(obj, eventType, reason, format, args...)
}

// boundPods are a job's pods bound to a node.
func boundPods(job *priority.Job) []gang.PodRef {
	var out []gang.PodRef
	for _, p := range job.Pods {
		if p.State == priority.PodBound {
			ns, name, _ := strings.Cut(p.Name, "/") // the view names pods namespace/name
			out = append(out, gang.PodRef{Namespace: ns, Name: name, UID: types.UID(p.UID)})
		}
	}
	return out
}
