package admission

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cps-extender/cps-extender/extender/gang"
)

// switchStep is one look at the queue: after advancing the clock, the queue reports
// contended (known: it can tell); then the configuration's webhooks hold want as their
// switch condition ("" none), after updates writes in all, and the metric reports metric
// ("" not reported yet).
type switchStep struct {
	advance          time.Duration
	contended, known bool
	want             string
	updates          int
	metric           string
}

// recordedSwitch records what the switch reports.
type recordedSwitch struct{ last string }

func (r *recordedSwitch) TurnGateWebhookOn(on bool) {
	r.last = map[bool]string{true: "on", false: "off"}[on]
}

// TestSwitch: the calls are switched on when a job waits, off OffAfter after the last one
// waited, written only when they change, and written again when someone reset them.
func TestSwitch(t *testing.T) {
	tests := []struct {
		name string
		// edit changes the configuration between steps: before the step of that index.
		edit map[int]func(*admissionregistrationv1.MutatingWebhookConfiguration)
		// alwaysOn runs the switch with OffAfter 0, else 10 s.
		alwaysOn bool
		steps    []switchStep
	}{
		{name: "no queue yet: left as it is", steps: []switchStep{
			{known: false, want: "", updates: 0},
			{advance: time.Hour, known: false, want: "", updates: 0},
		}},
		{name: "idle from the start: off at once, written once", steps: []switchStep{
			{known: true, want: switchOff, updates: 1, metric: "off"},
			{advance: time.Second, known: true, want: switchOff, updates: 1, metric: "off"},
			{advance: 30 * time.Second, known: true, want: switchOff, updates: 1, metric: "off"},
		}},
		{name: "a job waits: on, then off OffAfter after it stopped waiting", steps: []switchStep{
			{known: true, want: switchOff, updates: 1, metric: "off"},
			{advance: time.Second, contended: true, known: true, want: switchOn, updates: 2, metric: "on"},
			{advance: 5 * time.Second, contended: true, known: true, want: switchOn, updates: 2, metric: "on"},
			{advance: 9 * time.Second, known: true, want: switchOn, updates: 2, metric: "on"},
			{advance: time.Second, known: true, want: switchOff, updates: 3, metric: "off"},
		}},
		{name: "contention that comes and goes within OffAfter: no flapping", steps: []switchStep{
			{contended: true, known: true, want: switchOn, updates: 1, metric: "on"},
			{advance: 4 * time.Second, known: true, want: switchOn, updates: 1, metric: "on"},
			{advance: 4 * time.Second, contended: true, known: true, want: switchOn, updates: 1, metric: "on"},
			{advance: 8 * time.Second, known: true, want: switchOn, updates: 1, metric: "on"},
			{advance: 2 * time.Second, known: true, want: switchOff, updates: 2, metric: "off"},
		}},
		{name: "the configuration replaced from the file: switched back within 10 s",
			edit: map[int]func(*admissionregistrationv1.MutatingWebhookConfiguration){
				1: func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
					for i := range c.Webhooks { // the shipped file has no switch
						c.Webhooks[i].MatchConditions = slices.DeleteFunc(c.Webhooks[i].MatchConditions,
							func(m admissionregistrationv1.MatchCondition) bool { return m.Name == SwitchCondition })
					}
				},
			},
			steps: []switchStep{
				{known: true, want: switchOff, updates: 1, metric: "off"},
				{advance: time.Second, known: true, want: "", updates: 2, metric: "off"}, // the edit is one update
				{advance: 8 * time.Second, known: true, want: "", updates: 2, metric: "off"},
				{advance: time.Second, known: true, want: switchOff, updates: 3, metric: "off"},
			}},
		{name: "offAfter 0: on, even over an earlier run's off, whatever the queue", alwaysOn: true,
			edit: map[int]func(*admissionregistrationv1.MutatingWebhookConfiguration){
				0: func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
					for i := range c.Webhooks {
						setCondition(&c.Webhooks[i], SwitchCondition, switchOff, true)
					}
				},
			},
			steps: []switchStep{
				{known: false, want: switchOn, updates: 2, metric: "on"}, // the edit is one update
				{advance: time.Hour, known: true, want: switchOn, updates: 2, metric: "on"},
			}},
		{name: "the manifest applied anew, with an operator's off: back within 10 s",
			edit: map[int]func(*admissionregistrationv1.MutatingWebhookConfiguration){
				1: func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
					for i := range c.Webhooks {
						setCondition(&c.Webhooks[i], SwitchCondition, switchOff, true)
					}
				},
			},
			steps: []switchStep{
				{contended: true, known: true, want: switchOn, updates: 1, metric: "on"},
				{advance: time.Second, contended: true, known: true, want: switchOff, updates: 2, metric: "on"}, // cached
				{advance: 9 * time.Second, contended: true, known: true, want: switchOn, updates: 3, metric: "on"},
			}},
		{name: "queue unknown again (a restart of the view): left as it is", steps: []switchStep{
			{contended: true, known: true, want: switchOn, updates: 1, metric: "on"},
			{advance: time.Hour, known: false, want: switchOn, updates: 1, metric: "on"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := webhookConfiguration(nil)
			cfg.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{
				{Name: "cps-scheduler", Expression: "object.spec.schedulerName == 'cps-scheduler'"}}
			client := fake.NewSimpleClientset(cfg)
			clk := clocktesting.NewFakeClock(testStart)
			var contended, known bool
			metric := &recordedSwitch{}
			offAfter := 10 * time.Second
			if tt.alwaysOn {
				offAfter = 0
			}
			s, err := NewSwitch(SwitchOptions{Webhooks: client.AdmissionregistrationV1(), Configuration: cfg.Name,
				OffAfter: offAfter, Metrics: metric, Clock: clk,
				Contended: func() (bool, bool) { return contended, known }})
			if err != nil {
				t.Fatal(err)
			}
			hooks := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
			for i, step := range tt.steps {
				if edit := tt.edit[i]; edit != nil {
					live, err := hooks.Get(context.Background(), cfg.Name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					edit(live)
					if _, err := hooks.Update(context.Background(), live, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				clk.Step(step.advance)
				contended, known = step.contended, step.known
				if err := s.Step(context.Background()); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				live, err := hooks.Get(context.Background(), cfg.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, hook := range live.Webhooks {
					if got := switchExpression(hook); got != step.want {
						t.Errorf("step %d: webhook %s switch %q, want %q", i, hook.Name, got, step.want)
					}
				}
				if got := live.Webhooks[0].MatchConditions[0].Name; got != "cps-scheduler" {
					t.Errorf("step %d: the manifest's own condition became %q", i, got)
				}
				if got := countVerb(client, "update"); got != step.updates {
					t.Errorf("step %d: %d updates, want %d", i, got, step.updates)
				}
				if metric.last != step.metric {
					t.Errorf("step %d: metric %q, want %q", i, metric.last, step.metric)
				}
			}
		})
	}
}

// TestSwitchAPI: a missing configuration is no error and reported as nothing; a conflict
// is retried; other errors are returned, and the next step writes again.
func TestSwitchAPI(t *testing.T) {
	t.Run("missing configuration", func(t *testing.T) {
		client := fake.NewSimpleClientset()
		metric := &recordedSwitch{}
		s, err := NewSwitch(SwitchOptions{Webhooks: client.AdmissionregistrationV1(), Configuration: "cps-extender-turn-gate",
			OffAfter: time.Second, Metrics: metric, Clock: clocktesting.NewFakeClock(testStart),
			Contended: func() (bool, bool) { return true, true }})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		if metric.last != "" {
			t.Errorf("metric %q for a configuration that does not exist", metric.last)
		}
	})
	t.Run("conflict, then a failure", func(t *testing.T) {
		client := fake.NewSimpleClientset(webhookConfiguration(nil))
		failures := []error{
			apierrors.NewConflict(schema.GroupResource{Resource: "mutatingwebhookconfigurations"}, "cps-extender-turn-gate", nil),
			apierrors.NewInternalError(errors.New("etcd is away")),
		}
		client.PrependReactor("update", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
			if len(failures) == 0 {
				return false, nil, nil
			}
			err := failures[0]
			failures = failures[1:]
			return true, nil, err
		})
		s, err := NewSwitch(SwitchOptions{Webhooks: client.AdmissionregistrationV1(), Configuration: "cps-extender-turn-gate",
			OffAfter: time.Second, Clock: clocktesting.NewFakeClock(testStart),
			Contended: func() (bool, bool) { return true, true }})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Step(context.Background()); err == nil {
			t.Fatal("no error after a conflict and an internal error")
		}
		if err := s.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		live, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "cps-extender-turn-gate", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := switchExpression(live.Webhooks[0]); got != switchOn {
			t.Errorf("switch %q after the retry, want %q", got, switchOn)
		}
	})
	t.Run("bad options", func(t *testing.T) {
		for _, opts := range []SwitchOptions{
			{Configuration: "c", Webhooks: fake.NewSimpleClientset().AdmissionregistrationV1(), OffAfter: -time.Second,
				Contended: func() (bool, bool) { return true, true }},
			{Webhooks: fake.NewSimpleClientset().AdmissionregistrationV1(), OffAfter: time.Second, Contended: func() (bool, bool) { return true, true }},
		} {
			if _, err := NewSwitch(opts); err == nil {
				t.Errorf("NewSwitch(%+v): no error", opts)
			}
		}
	})
}

// switchExpression is hook's switch condition expression, "" without one.
func switchExpression(hook admissionregistrationv1.MutatingWebhook) string {
	for _, c := range hook.MatchConditions {
		if c.Name == SwitchCondition {
			return c.Expression
		}
	}
	return ""
}

// countVerb counts the client's actions of verb.
func countVerb(client *fake.Clientset, verb string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

// TestJobPodsExpression: the condition's CEL, evaluated on pods as the API server hands them
// to matchConditions, sends the pods that name a job by the configured label or by a
// workload's or PodGroup source's key, and no other pod.
func TestJobPodsExpression(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		jobLabel    string
		labels      map[string]string
		annotations map[string]string
		want        bool
	}{
		{name: "the default job label", jobLabel: "cps-extender.io/job", labels: map[string]string{"cps-extender.io/job": "a"}, want: true},
		{name: "a configured job label", jobLabel: "example.com/job", labels: map[string]string{"example.com/job": "a"}, want: true},
		{name: "the default label once another is configured", jobLabel: "example.com/job", labels: map[string]string{"cps-extender.io/job": "a"}},
		{name: "a label with a quote", jobLabel: `it's`, labels: map[string]string{`it's`: "a"}, want: true},
		{name: "Kubeflow's label", jobLabel: "example.com/job", labels: map[string]string{gang.KubeflowJobLabel: "a"}, want: true},
		{name: "an Indexed Job's index", jobLabel: "example.com/job", labels: map[string]string{gang.JobCompletionIndex: "0"}, want: true},
		{name: "Volcano's annotation", jobLabel: "example.com/job", annotations: map[string]string{gang.VolcanoGroupAnnotation: "pg"}, want: true},
		{name: "other labels", jobLabel: "example.com/job", labels: map[string]string{"app": "web"}, annotations: map[string]string{"a": "b"}},
		{name: "no labels, no annotations", jobLabel: "example.com/job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ast, issues := env.Compile(JobPodsExpression(tt.jobLabel))
			if issues.Err() != nil {
				t.Fatalf("%s: %v", JobPodsExpression(tt.jobLabel), issues.Err())
			}
			prg, err := env.Program(ast)
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ml", Labels: tt.labels, Annotations: tt.annotations}}
			object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := prg.Eval(map[string]any{"object": object})
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := out.Value().(bool); !ok || got != tt.want {
				t.Errorf("%s = %v, want %v", JobPodsExpression(tt.jobLabel), out.Value(), tt.want)
			}
		})
	}
}

// TestSwitchJobPods: where a webhook has JobPodsCondition, the switch keeps it at the
// configured expression; it adds it nowhere, and leaves it with no expression configured.
func TestSwitchJobPods(t *testing.T) {
	configured := JobPodsExpression("example.com/job")
	tests := []struct {
		name    string
		has     string // the condition's expression in the first webhook ("": no such condition)
		jobPods string
		want    string // the first webhook's afterwards ("": none)
		updates int
	}{
		{name: "the default label's, for a configured one", has: JobPodsExpression("cps-extender.io/job"), jobPods: configured, want: configured, updates: 1},
		{name: "as configured: only the switch is written", has: configured, jobPods: configured, want: configured, updates: 1},
		{name: "no such condition: none added", jobPods: configured, updates: 1},
		{name: "nothing configured: left as it is", has: "true", want: "true", updates: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := webhookConfiguration(nil)
			if tt.has != "" {
				cfg.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: JobPodsCondition, Expression: tt.has}}
			}
			client := fake.NewSimpleClientset(cfg)
			s, err := NewSwitch(SwitchOptions{Webhooks: client.AdmissionregistrationV1(), Configuration: cfg.Name,
				OffAfter: time.Second, Clock: clocktesting.NewFakeClock(testStart), JobPods: tt.jobPods,
				Contended: func() (bool, bool) { return true, true }})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
			live, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), cfg.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, hook := range live.Webhooks {
				got, want := "", ""
				for _, c := range hook.MatchConditions {
					if c.Name == JobPodsCondition {
						got = c.Expression
					}
				}
				if i == 0 {
					want = tt.want
				}
				if got != want {
					t.Errorf("webhook %s: %s %q, want %q", hook.Name, JobPodsCondition, got, want)
				}
			}
			if got := countVerb(client, "update"); got != tt.updates {
				t.Errorf("%d updates, want %d", got, tt.updates)
			}
		})
	}
}
