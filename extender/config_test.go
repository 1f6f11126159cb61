package extender

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
				c.Listen, c.URLPrefix, c.WriteTimeout = "127.0.0.1:9999", "/x", Duration{45 * time.Second}
				c.Log = LogConfig{Format: "console", Level: "debug"}
			},
		},
		{
			name:     "every unknown key is listed, nested ones by path",
			body:     "listen: :1\nlisten_addr: x\nlog:\n  colour: red\nbogus: 1\n",
			want:     func(c *Config) { c.Listen = ":1" },
			wantErrs: []string{`unknown key "bogus"`, `unknown key "listen_addr"`, `unknown key "log.colour"`},
		},
		{
			name:     "a bad duration names the value",
			body:     "readTimeout: soon\n",
			wantErrs: []string{`want a duration string such as "20s", got "soon"`},
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
	c.WriteTimeout = Duration{0}
	c.ClientQPS = 0
	c.Log = LogConfig{Format: "xml", Level: "loud"}
	c.Events.WaitingInterval = Duration{-time.Second}
	c.Reload.Interval = Duration{-time.Second}
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
	short.Gate.MaxHold = Duration{10 * time.Second}
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
