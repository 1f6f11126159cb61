package extender

import (
	"fmt"
	"net"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is the extender's whole configuration: a YAML file, overridden by flags.
// Every field has a default (DefaultConfig); Validate lists every problem at once.
type Config struct {
	// Listen is the address the HTTP server listens on.
	Listen string `json:"listen"`
	// URLPrefix is prepended to the kube-scheduler verbs: <urlPrefix>/filter, /prioritize, /bind.
	URLPrefix string `json:"urlPrefix"`
	// Kubeconfig is the path of a kubeconfig file; empty means the in-cluster config.
	Kubeconfig string `json:"kubeconfig"`
	// MaxRequestBytes bounds a request body; larger bodies get 413.
	MaxRequestBytes int64 `json:"maxRequestBytes"`
	// ReadTimeout and WriteTimeout bound one HTTP exchange. WriteTimeout must exceed the
	// bind hold timeout, since a held bind answers only when its gang has gathered.
	ReadTimeout  Duration `json:"readTimeout"`
	WriteTimeout Duration `json:"writeTimeout"`
	// ShutdownTimeout bounds the graceful shutdown on SIGTERM/SIGINT.
	ShutdownTimeout Duration `json:"shutdownTimeout"`
	// ResyncPeriod is the informers' resync period (0 disables resync).
	ResyncPeriod Duration `json:"resyncPeriod"`
	// BindTimeout bounds one Binding call to the API server.
	BindTimeout Duration `json:"bindTimeout"`
	// Log configures logging.
	Log LogConfig `json:"log"`
}

// LogConfig selects the log encoding and level.
type LogConfig struct {
	// Format is "json" (production) or "console" (humans, the demo).
	Format string `json:"format"`
	// Level is one of debug, info, warn, error.
	Level string `json:"level"`
}

// Duration is a time.Duration written as a Go duration string ("20s", "1m30s") in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"20s\", got %s", string(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"20s\", got %q", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%q", d.String())), nil
}

// DefaultConfig returns the configuration used where the file and flags are silent.
func DefaultConfig() Config {
	return Config{
		Listen:          ":8888",
		URLPrefix:       "/scheduler",
		MaxRequestBytes: 64 << 20, // full Node objects: ~1.5 MB per 420 nodes
		ReadTimeout:     Duration{30 * time.Second},
		WriteTimeout:    Duration{60 * time.Second},
		ShutdownTimeout: Duration{10 * time.Second},
		ResyncPeriod:    Duration{0},
		BindTimeout:     Duration{10 * time.Second},
		Log:             LogConfig{Format: "json", Level: "info"},
	}
}

// LoadConfig reads a YAML config file over the defaults. It returns every problem it
// finds, each unknown key and each value that cannot be decoded, so they can be reported
// together with Validate's.
func LoadConfig(path string) (Config, []error) {
	cfg := DefaultConfig()
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, []error{fmt.Errorf("reading config: %w", err)}
	}
	return cfg, decodeConfig(data, &cfg)
}

// decodeConfig decodes YAML into cfg and lists every unknown key. Known keys are decoded
// even when unknown ones are present, so their values can be validated too.
func decodeConfig(data []byte, cfg *Config) []error {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return []error{fmt.Errorf("not valid YAML: %w", err)}
	}
	var errs []error
	for _, k := range unknownKeys(raw, reflect.TypeOf(*cfg), "") {
		errs = append(errs, fmt.Errorf("unknown key %q", k))
	}
	if err := yaml.Unmarshal(data, cfg); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// unknownKeys walks raw against the json tags of t and returns the dotted paths of keys
// that t does not have. Maps with string keys accept any key.
func unknownKeys(raw map[string]any, t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Map {
		var out []string
		for k, v := range raw {
			if sub, ok := v.(map[string]any); ok {
				out = append(out, unknownKeys(sub, t.Elem(), prefix+k+".")...)
			}
		}
		sort.Strings(out)
		return out
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeOf(Duration{}) {
		return nil
	}
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
	}
	var out []string
	for k, v := range raw {
		ft, ok := fields[k]
		if !ok {
			out = append(out, prefix+k)
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			out = append(out, unknownKeys(sub, ft, prefix+k+".")...)
		}
	}
	sort.Strings(out)
	return out
}

// Validate returns every problem of the configuration, one error per problem.
func (c Config) Validate() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen: %q is not host:port: %v", c.Listen, err)
	}
	if c.URLPrefix != "" && (!strings.HasPrefix(c.URLPrefix, "/") || strings.HasSuffix(c.URLPrefix, "/")) {
		bad("urlPrefix: %q must be empty or start with / and not end with / (e.g. /scheduler)", c.URLPrefix)
	}
	if c.MaxRequestBytes < 1024 {
		bad("maxRequestBytes: %d is below 1024", c.MaxRequestBytes)
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"readTimeout", c.ReadTimeout}, {"writeTimeout", c.WriteTimeout}, {"shutdownTimeout", c.ShutdownTimeout}, {"bindTimeout", c.BindTimeout}} {
		if d.v.Duration <= 0 {
			bad("%s: %v must be positive", d.key, d.v.Duration)
		}
	}
	if c.ResyncPeriod.Duration < 0 {
		bad("resyncPeriod: %v must not be negative", c.ResyncPeriod.Duration)
	}
	switch c.Log.Format {
	case "json", "console":
	default:
		bad("log.format: %q is not json or console", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level: %q is not debug, info, warn or error", c.Log.Level)
	}
	return errs
}
