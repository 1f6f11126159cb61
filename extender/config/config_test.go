package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cps-extender/cps-extender/priority"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func errStrings(errs []error) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		want     func(c *Config)
		wantErrs []string
	}{
		{
			name: "empty file gives the defaults",
			body: "",
			want: func(*Config) {},
		},
		{
			name: "values override the defaults",
			body: "listen: 127.0.0.1:9999\nurlPrefix: /x\nwriteTimeout: 45s\nlog:\n  format: console\n  level: debug\n",
			want: func(c *Config) {
				c.Listen, c.URLPrefix, c.WriteTimeout = "127.0.0.1:9999", "/x", metav1.Duration{Duration: 45 * time.Second}
				c.Log = LogConfig{Format: "console", Level: "debug"}
			},
		},
		{
			name:     "every unknown key is listed, nested ones by path",
			body:     "listen: :1\nlisten_addr: x\nlog:\n  colour: red\nbogus: 1\n",
			want:     func(c *Config) { c.Listen = ":1" },
			wantErrs: []string{`unknown field "bogus"`, `unknown field "listen_addr"`, `unknown field "log.colour"`},
		},
		{
			name:     "a bad duration names the value",
			body:     "readTimeout: soon\n",
			wantErrs: []string{`readTimeout: time: invalid duration "soon"`},
		},
		{
			name:     "a key given twice is an error, not a silent override",
			body:     "listen: :1\nlisten: :2\n",
			wantErrs: []string{`"listen" already set in map`},
		},
		{
			name: "preemption left empty keeps the default, as the other keys do",
			body: "model:\n  preemption:\n  policy:\n",
			want: func(c *Config) {},
		},
		{
			name: "preemption: off, which YAML reads as false, is off",
			body: "model:\n  preemption: off\n",
			want: func(c *Config) { c.Model.Preemption = PreemptionSetting(priority.PreemptOff) },
		},
		{
			name: "preemption: priority",
			body: "model:\n  preemption: priority\n",
			want: func(c *Config) { c.Model.Preemption = PreemptionSetting(priority.PreemptPriority) },
		},
		{
			name:     "preemption: on names no mode",
			body:     "model:\n  preemption: on\n",
			wantErrs: []string{"model.preemption: true, want off, urgent or priority"},
		},
		{
			name:     "an unknown key and a bad value are listed together",
			body:     "gate:\n  holdTimeout: 1m\n  hold: 3\nreadTimeout: soon\n",
			wantErrs: []string{`unknown field "gate.hold"`, `invalid duration "soon"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := LoadConfig(writeConfig(t, tt.body))
			gotErrs := errStrings(errs)
			if len(gotErrs) != len(tt.wantErrs) {
				t.Fatalf("errors %q, want %d errors containing %q", gotErrs, len(tt.wantErrs), tt.wantErrs)
			}
			for i := range tt.wantErrs {
				if !strings.Contains(gotErrs[i], tt.wantErrs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, gotErrs[i], tt.wantErrs[i])
				}
			}
			if tt.want == nil {
				return
			}
			want := DefaultConfig()
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	c := DefaultConfig()
	c.Listen = "nope"
	c.URLPrefix = "scheduler/"
	c.MaxRequestBytes = 10
	c.WriteTimeout = metav1.Duration{Duration: 0}
	c.ClientQPS = 0
	c.Log = LogConfig{Format: "xml", Level: "loud"}
	c.Events.WaitingInterval = metav1.Duration{Duration: -time.Second}
	c.Reload.Interval = metav1.Duration{Duration: -time.Second}
	c.TLS = TLSConfig{CertFile: "tls.crt"}
	got := errStrings(c.Validate())
	wantPrefixes := []string{"listen:", "urlPrefix:", "maxRequestBytes:", "writeTimeout:", "clientQPS", "gate.maxHold:",
		"events.waitingInterval:", "reload.interval:", "tls: certFile \"tls.crt\" and keyFile \"\" must be given both or neither", "log.format:", "log.level:"}
	if len(got) != len(wantPrefixes) {
		t.Fatalf("got %d errors %q, want %d", len(got), got, len(wantPrefixes))
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(got[i], p) {
			t.Errorf("error %d = %q, want prefix %q", i, got[i], p)
		}
	}
	if errs := DefaultConfig().Validate(); len(errs) != 0 {
		t.Errorf("defaults are invalid: %v", errs)
	}
	short := DefaultConfig()
	short.Gate.MaxHold = metav1.Duration{Duration: 10 * time.Second}
	if got := errStrings(short.Validate()); len(got) != 1 || !strings.HasPrefix(got[0], "gate.maxHold: 10s is below gate.holdTimeout 20s") {
		t.Errorf("maxHold below holdTimeout: %q", got)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, errs := LoadConfig(filepath.Join(t.TempDir(), "absent.yaml"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "reading config") {
		t.Errorf("errors %v, want one reading error", errs)
	}
}

// TestVolcanoConfig: defaults, validation and the constructors' checks.
func TestVolcanoConfig(t *testing.T) {
	def := DefaultConfig()
	if diff := cmp.Diff(VolcanoConfig{URLPrefix: "/volcano", SessionTTL: metav1.Duration{Duration: 30 * time.Second}}, def.Volcano); diff != "" {
		t.Errorf("default (-want +got):\n%s", diff)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"no prefix", func(c *Config) { c.Volcano.URLPrefix = "" }, []string{`volcano.urlPrefix: "" must start with /`}},
		{"trailing slash", func(c *Config) { c.Volcano.URLPrefix = "/volcano/" }, []string{`volcano.urlPrefix: "/volcano/" must start with /`}},
		{"a router wildcard", func(c *Config) { c.Volcano.URLPrefix = "/:v" }, []string{`volcano.urlPrefix: "/:v" must start with /`}},
		{"the kube-scheduler prefix", func(c *Config) { c.Volcano.URLPrefix = "/scheduler" }, []string{`volcano.urlPrefix: "/scheduler" is also urlPrefix`}},
		{"no TTL", func(c *Config) { c.Volcano.SessionTTL = metav1.Duration{} }, []string{"volcano.sessionTTL: 0s must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			wantErrPrefixes(t, c.Validate(), tt.want)
		})
	}
	t.Run("loaded from YAML", func(t *testing.T) {
		got, errs := LoadConfig(writeConfig(t, "volcano:\n  urlPrefix: /vc\n  sessionTTL: 5s\n"))
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if diff := cmp.Diff(VolcanoConfig{URLPrefix: "/vc", SessionTTL: metav1.Duration{Duration: 5 * time.Second}}, got.Volcano); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestWebhookConfig: off by default; on, every problem of the section is named.
func TestWebhookConfig(t *testing.T) {
	if def := DefaultConfig().Webhook; def.Listen != "" || def.SelfSigned() || def.OffAfter.Duration != 10*time.Second {
		t.Errorf("default webhook %+v, want no listener, calls switched off after 10s", def)
	}
	on := func(c *Config) { c.Webhook.Listen = ":9443" }
	tests := []struct {
		name       string
		edit       func(*Config)
		selfSigned bool
		want       []string
	}{
		{"self-kept certificate", on, true, nil},
		{"certificate files", func(c *Config) { on(c); c.Webhook.CertFile, c.Webhook.KeyFile = "tls.crt", "tls.key" }, false, nil},
		{"off ignores the rest", func(c *Config) { c.Webhook.Secret, c.Webhook.Configuration = "nons", "" }, false, nil},
		{"extra hosts", func(c *Config) { on(c); c.Webhook.Hosts = []string{"127.0.0.1", "::1", "hook.example.com"} }, true, nil},
		{"bad listen", func(c *Config) { c.Webhook.Listen = "9443" }, true, []string{`webhook.listen: "9443" is not host:port`}},
		{"key without certificate", func(c *Config) { on(c); c.Webhook.KeyFile = "tls.key" }, true, []string{`webhook: certFile "" and keyFile "tls.key"`}},
		{"every self-kept problem", func(c *Config) {
			on(c)
			c.Webhook.Secret, c.Webhook.Service, c.Webhook.Configuration = "no-namespace", "a/b/c", ""
			c.Webhook.Hosts = []string{"", "http://x"}
		}, true, []string{"webhook.configuration: must name", `webhook.secret: "no-namespace" is not namespace/name`,
			`webhook.service: "a/b/c" is not namespace/name`, `webhook.hosts: "" is neither`, `webhook.hosts: "http://x" is neither`}},
		{"negative offAfter", func(c *Config) { on(c); c.Webhook.OffAfter.Duration = -time.Second }, true,
			[]string{"webhook.offAfter: -1s is neither 0"}},
		{"offAfter under a second", func(c *Config) { on(c); c.Webhook.OffAfter.Duration = time.Millisecond }, true,
			[]string{"webhook.offAfter: 1ms is neither 0"}},
		{"offAfter 0: calls always on", func(c *Config) { on(c); c.Webhook.OffAfter.Duration = 0 }, true, nil},
		{"own certificate, switched: needs the configuration", func(c *Config) {
			on(c)
			c.Webhook.CertFile, c.Webhook.KeyFile, c.Webhook.Configuration = "tls.crt", "tls.key", ""
		}, false, []string{"webhook.configuration: must name"}},
		{"own certificate, never switched off: no configuration needed", func(c *Config) {
			on(c)
			c.Webhook.CertFile, c.Webhook.KeyFile, c.Webhook.Configuration = "tls.crt", "tls.key", ""
			c.Webhook.OffAfter.Duration = 0
		}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			if got := c.Webhook.SelfSigned(); got != tt.selfSigned {
				t.Errorf("SelfSigned() = %v, want %v", got, tt.selfSigned)
			}
			wantErrPrefixes(t, c.Validate(), tt.want)
		})
	}
}

// wantErrPrefixes checks that errs are as many as want, each starting with its want.
func wantErrPrefixes(t *testing.T, errs []error, want []string) {
	t.Helper()
	got := errStrings(errs)
	if len(got) != len(want) {
		t.Fatalf("errors %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %q, want prefix %q", got[i], want[i])
		}
	}
}

// TestValidateAccessAndGang: the access modes, the client certificate settings and the
// new gang keys are checked, every problem named.
func TestValidateAccessAndGang(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want []string // error prefixes, in order; none for a valid config
	}{
		{name: "defaults", edit: func(*Config) {}},
		{name: "an unknown way", edit: func(c *Config) { c.Access.Scheduler = []string{"password"} },
			want: []string{`access.scheduler: "password" is not one of loopback, clientCertificate, anyone`}},
		{name: "tokens are no way for the scheduler; nobody at all for the admin endpoints", edit: func(c *Config) {
			c.Access.Scheduler, c.Access.Admin = []string{AccessToken}, nil
		}, want: []string{`access.scheduler: "token" is not one of`, "access.admin: empty: nobody could call"}},
		{name: "Volcano's plugin has no client certificate", edit: func(c *Config) { c.Access.Volcano = []string{AccessClientCertificate} },
			want: []string{`access.volcano: "clientCertificate" is not one of loopback, anyone`}},
		{name: "clientCertificate without a CA", edit: func(c *Config) { c.Access.Scheduler = []string{AccessClientCertificate} },
			want: []string{"access.scheduler: clientCertificate needs tls.clientCAFile"}},
		{name: "a client CA without TLS", edit: func(c *Config) {
			c.Access.Scheduler, c.TLS.ClientCAFile = []string{AccessClientCertificate}, "ca.crt"
		}, want: []string{"tls.clientCAFile: client certificates need TLS"}},
		{name: "client certificates over the self-kept certificate", edit: func(c *Config) {
			c.Access.Scheduler = []string{AccessClientCertificate}
			c.TLS = TLSConfig{ClientCAFile: "ca.crt", SelfKept: true, ClientNames: []string{"system:kube-scheduler"}}
			c.Webhook.Listen = ":9443"
		}},
		{name: "selfKept without a webhook certificate to serve", edit: func(c *Config) { c.TLS.SelfKept = true },
			want: []string{"tls.selfKept: serves the webhook's self-kept certificate"}},
		{name: "in-flight bounds and header timeout", edit: func(c *Config) {
			c.MaxInFlight, c.ReadHeaderTimeout = 0, metav1.Duration{}
		}, want: []string{"maxInFlight (0) and maxInFlightBinds", "readHeaderTimeout:"}},
		{name: "gang keys", edit: func(c *Config) {
			c.Gang.SizeUnknown, c.Gang.DiscoveryInterval = "guess", metav1.Duration{Duration: time.Millisecond}
		}, want: []string{`gang.sizeUnknown: "guess" is not wait or podsSeen`, "gang.discoveryInterval: 1ms is below 1s"}},
		{name: "urgency keys", edit: func(c *Config) {
			c.Gang.UrgentPriorityClasses, c.Gang.UrgentNamespaceLabel = []string{"ml-urgent", ""}, ""
			c.Model.UrgentMinRunTime, c.Model.ArrivalWindow = metav1.Duration{Duration: -time.Second}, metav1.Duration{Duration: -time.Second}
		}, want: []string{"gang.urgentNamespaceLabel: must not be empty", "gang.urgentPriorityClasses[1]: must not be empty", "model.urgentMinRunTime", "model.arrivalWindow"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			got := errStrings(c.Validate())
			if len(got) != len(tt.want) {
				t.Fatalf("errors %q, want %d: %q", got, len(tt.want), tt.want)
			}
			for i, p := range tt.want {
				if !strings.HasPrefix(got[i], p) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], p)
				}
			}
		})
	}
}
