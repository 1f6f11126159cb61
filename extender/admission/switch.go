package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1 "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/utils/clock"

	"github.com/cps-extender/cps-extender/extender/gang"
)

// SwitchCondition is the matchCondition the extender keeps in every webhook of the turn-gate
// configuration: "true" while a job waits (the API server calls the webhook on each pod
// creation the other conditions match), "false" once none has waited for a while (the API
// server calls nothing). The shipped manifest leaves it out (calls on until the extender
// first looks), so that applying the manifest again, client- or server-side, does not
// contend with the extender for it. On an idle cluster the webhook gates nothing, yet its call on
// every pod creation bound a backlog that all fits at 0.81x native gang's rate instead of
// 0.93x on the load test's 2-core machine (docs/performance.md).
const SwitchCondition = "cps-extender-job-waits"

// JobPodsCondition is the matchCondition that sends the API server's calls for a job's pods
// alone (the standalone overlay's, for the default scheduler, whose pods are mostly in no
// job): JobPodsExpression of the configured job label. Where a webhook of the configuration
// has it, the extender keeps its expression (Switch), so that a changed gang.jobLabel needs
// no change of the manifest; it never adds it (the sidecar's webhook gates every pod of its
// own scheduler).
const JobPodsCondition = "cps-extender-job-pods"

// JobPodsExpression is JobPodsCondition's CEL expression: the pod carries jobLabel, the
// label a workload controller or a PodGroup source sets on its pods, or Volcano's group
// annotation.
func JobPodsExpression(jobLabel string) string {
	keys := []string{jobLabel, gang.KubeflowJobLabel, gang.JobSetNameLabel, gang.LWSNameLabel, gang.RayClusterLabel,
		gang.JobCompletionIndex, gang.KueuePodGroupLabel, gang.CoschedulingLabel}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = celString(k)
	}
	return "(has(object.metadata.labels) && [" + strings.Join(quoted, ", ") + "].exists(k, k in object.metadata.labels)) || " +
		"(has(object.metadata.annotations) && " + celString(gang.VolcanoGroupAnnotation) + " in object.metadata.annotations)"
}

// celString is s as a CEL string literal.
func celString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// The switch condition's expressions.
const (
	switchOn  = "true"
	switchOff = "false"
)

// How often the switch looks at the queue, and how often it reads the configuration again
// even when its own state has not changed (someone, or a replica whose view lagged, may
// have written it since): one GET per replica every 10 s.
const (
	switchPoll   = 250 * time.Millisecond
	switchResync = 10 * time.Second
)

// SwitchMetrics is what the switch reports: whether the API server is to call the webhook.
type SwitchMetrics interface {
	TurnGateWebhookOn(on bool)
}

// SwitchOptions configures Switch.
type SwitchOptions struct {
	Log *zap.Logger
	// Webhooks is the Kubernetes I/O: the MutatingWebhookConfiguration named Configuration.
	Webhooks      admissionregistrationv1.MutatingWebhookConfigurationsGetter
	Configuration string
	// Contended reports whether a job waits now; known is false while the extender cannot
	// tell yet (no queue computed): the switch is then left as it is.
	Contended func() (contended, known bool)
	// OffAfter is how long no job must have waited before the calls are switched off: it
	// bounds the configuration's writes to about one per OffAfter. 0 keeps them on (and
	// switches them back on if an earlier run left them off).
	OffAfter time.Duration
	Metrics  SwitchMetrics // optional
	Clock    clock.WithTicker
	// Leading says whether this replica leads: only the leader writes (nil: always).
	Leading func() bool
	// JobPods is the expression JobPodsCondition is kept at where a webhook has it
	// (JobPodsExpression of gang.jobLabel); "" leaves it as it is.
	JobPods string
}

// Switch turns the API server's calls of the turn-gate webhook on while a job waits and off
// while none does, through SwitchCondition. While off, the webhook would gate nothing
// anyway (it gates a pod only while a job waits: New's contended); when a job starts to
// wait, pods created before the API server has the calls on (the next snapshot, up to a
// quarter second, the write, the API server's watch) go ungated, the old way. The replicas
// all switch by the same queue; one that sees it a moment apart writes at most once more.
type Switch struct {
	opts SwitchOptions
	// mu makes Step and Off one at a time: Off comes from the extender's way out, while Run
	// may still be stepping.
	mu sync.Mutex
	// applied is the state last written or read (nil: unknown), lastRead when; waited is
	// the last time a job waited, ever whether one has.
	applied  *bool
	lastRead time.Time
	waited   time.Time
	ever     bool
	missing  bool // the configuration was not found (logged once)
}

// NewSwitch checks the options.
func NewSwitch(opts SwitchOptions) (*Switch, error) {
	if opts.Configuration == "" || opts.Webhooks == nil || opts.Contended == nil {
		return nil, fmt.Errorf("webhook switch: configuration, client and contention report are required")
	}
	if opts.OffAfter < 0 {
		return nil, fmt.Errorf("webhook switch: offAfter %v is negative", opts.OffAfter)
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Switch{opts: opts}, nil
}

// Run switches until ctx ends, looking at the queue every quarter second.
func (s *Switch) Run(ctx context.Context) {
	ticker := s.opts.Clock.NewTicker(switchPoll)
	defer ticker.Stop()
	for {
		if err := s.Step(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Warn("switching the turn-gate webhook", zap.Error(err), zap.Duration("retryIn", retryAfter))
			select {
			case <-ctx.Done():
				return
			case <-s.opts.Clock.After(retryAfter):
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Want is whether the calls should be on now: a job waits, or one waited less than
// OffAfter ago (always, with OffAfter 0). known is false while the queue cannot tell.
func (s *Switch) Want() (on, known bool) {
	if s.opts.OffAfter == 0 {
		return true, true
	}
	contended, known := s.opts.Contended()
	if !known {
		return false, false
	}
	now := s.opts.Clock.Now()
	if contended {
		s.waited, s.ever = now, true
	}
	return s.ever && now.Sub(s.waited) < s.opts.OffAfter, true
}

// Step looks at the queue once and writes the switch condition when it is not what the
// queue wants (reading the configuration at least every minute).
func (s *Switch) Step(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	on, known := s.Want()
	if !known {
		return nil
	}
	if s.opts.Leading != nil && !s.opts.Leading() {
		s.applied = nil // another replica writes; read it again on leading
		return nil
	}
	now := s.opts.Clock.Now()
	if s.applied != nil && *s.applied == on && now.Sub(s.lastRead) < switchResync {
		return nil
	}
	found, err := s.write(ctx, on)
	if err != nil {
		s.applied = nil
		return fmt.Errorf("MutatingWebhookConfiguration %s: %w", s.opts.Configuration, err)
	}
	s.applied, s.lastRead = &on, now
	if found && s.opts.Metrics != nil {
		s.opts.Metrics.TurnGateWebhookOn(on)
	}
	return nil
}

// Off switches the calls off, for a leader going away: pods created while no replica leads
// are not gated (nobody would lift their gate until a leader comes). A replica that leads
// next switches them on again when a job waits. It reports whether the configuration is
// installed.
func (s *Switch) Off(ctx context.Context) (found bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found, err = s.write(ctx, false)
	if err == nil && found && s.opts.Metrics != nil {
		s.opts.Metrics.TurnGateWebhookOn(false)
	}
	return found, err
}

// write sets SwitchCondition in every webhook of the configuration (adding it where it is
// missing). A missing configuration is no error (found is false): nothing calls the
// webhook then.
func (s *Switch) write(ctx context.Context, on bool) (found bool, err error) {
	expression := switchOff
	if on {
		expression = switchOn
	}
	found, updated, err := updateWebhooks(ctx, s.opts.Webhooks, s.opts.Configuration, func(hook *admissionv1.MutatingWebhook) bool {
		changed := setCondition(hook, SwitchCondition, expression, true)
		if s.opts.JobPods != "" {
			changed = setCondition(hook, JobPodsCondition, s.opts.JobPods, false) || changed
		}
		return changed
	})
	if err != nil {
		return found, err
	}
	if !found && !s.missing {
		s.opts.Log.Info("no MutatingWebhookConfiguration to switch: the turn-gate webhook is not installed",
			zap.String("configuration", s.opts.Configuration))
	}
	s.missing = !found
	if updated {
		s.opts.Log.Info("switched the turn-gate webhook", zap.String("configuration", s.opts.Configuration), zap.Bool("on", on))
	}
	return found, nil
}

// setCondition makes the expression of hook's condition name expression, adding the
// condition when it is missing and add is set; it reports whether it changed hook.
func setCondition(hook *admissionv1.MutatingWebhook, name, expression string, add bool) bool {
	for i, c := range hook.MatchConditions {
		if c.Name == name {
			if c.Expression == expression {
				return false
			}
			hook.MatchConditions[i].Expression = expression
			return true
		}
	}
	if !add {
		return false
	}
	hook.MatchConditions = append(hook.MatchConditions, admissionv1.MatchCondition{Name: name, Expression: expression})
	return true
}
