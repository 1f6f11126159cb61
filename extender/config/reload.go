package config

import (
	"context"
	"crypto/sha256"
	"os"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/priority"
)

// ModelReceiver takes a reloaded model and affinity.
type ModelReceiver interface {
	SetModel(model priority.Model, affinity priority.Affinity)
}

// reloadableKeys are the config sections a running extender takes over from a changed
// file; every other change needs a restart.
var reloadableKeys = map[string]bool{"model": true, "affinity": true}

// ConfigReloader applies changes of the config file's model and affinity sections while
// running. It polls the file's content (a mounted ConfigMap changes by swapping a symlink,
// which content polling sees and file events may not). A changed file is decoded and
// validated whole first: an invalid file is rejected with one log line and the running
// configuration stays.
type ConfigReloader struct {
	log       *zap.Logger
	path      string
	overlay   func(Config) Config
	receivers []ModelReceiver
	metrics   *metrics.Metrics

	current Config
	hash    [sha256.Size]byte
	readErr string
}

// ConfigReloaderOptions are the dependencies of a ConfigReloader.
type ConfigReloaderOptions struct {
	Log  *zap.Logger
	Path string
	// Current is the configuration running now, as loaded from Path with the flags applied.
	Current Config
	// Overlay applies the command-line flags over a freshly loaded file (nil: none), so a
	// flag keeps overriding the file after a reload.
	Overlay func(Config) Config
	// Receivers get the new model and affinity.
	Receivers []ModelReceiver
	Metrics   *metrics.Metrics
}

// NewConfigReloader builds the reloader; the file's current content is the baseline.
func NewConfigReloader(o ConfigReloaderOptions) *ConfigReloader {
	r := &ConfigReloader{log: o.Log, path: o.Path, overlay: o.Overlay, receivers: o.Receivers, metrics: o.Metrics, current: o.Current}
	if r.overlay == nil {
		r.overlay = func(c Config) Config { return c }
	}
	if data, err := os.ReadFile(o.Path); err == nil {
		r.hash = sha256.Sum256(data)
	}
	return r
}

// Run checks the file every interval until ctx ends.
func (r *ConfigReloader) Run(ctx context.Context, interval time.Duration) {
	_ = wait.PollUntilContextCancel(ctx, interval, false, func(context.Context) (bool, error) { // ends with ctx only
		r.Check()
		return false, nil
	})
}

// Check reads the file once and applies a valid change of its model or affinity; it
// reports whether it applied one. It is not safe for concurrent use (Run calls it).
func (r *ConfigReloader) Check() bool {
	data, err := os.ReadFile(r.path)
	if err != nil {
		// A ConfigMap update swaps the file for a moment; say so once, not every poll.
		if msg := err.Error(); msg != r.readErr {
			r.readErr = msg
			r.log.Warn("config reload: cannot read the config file; the running config stays", zap.String("path", r.path), zap.Error(err))
		}
		return false
	}
	r.readErr = ""
	hash := sha256.Sum256(data)
	if hash == r.hash {
		return false
	}
	r.hash = hash

	next := DefaultConfig()
	errs := decodeConfig(data, &next)
	next = r.overlay(next)
	if errs = append(errs, next.Validate()...); len(errs) > 0 {
		r.metrics.ConfigReload(false)
		r.log.Error("config reload rejected: the new config file is invalid; the running config stays",
			zap.String("path", r.path), zap.String("problems", joinErrors(errs)))
		return false
	}
	var restart, changed []string
	for _, key := range changedFields(r.current, next, "") {
		if reloadableKeys[key] {
			continue
		}
		restart = append(restart, key)
	}
	changed = append(changedFields(r.current.Model, next.Model, "model."), changedFields(r.current.Affinity, next.Affinity, "affinity.")...)
	if len(restart) > 0 {
		r.log.Warn("config reload: these keys changed but take effect only after a restart; ignored until then",
			zap.String("path", r.path), zap.Strings("keys", restart))
	}
	if len(changed) == 0 {
		r.log.Info("config file changed; nothing to reload", zap.String("path", r.path))
		return false
	}
	r.current.Model, r.current.Affinity = next.Model, next.Affinity
	model := r.current.Model.PriorityModel()
	for _, rc := range r.receivers {
		rc.SetModel(model, r.current.Affinity)
	}
	r.metrics.ConfigReload(true)
	r.log.Info("config reloaded", zap.String("path", r.path), zap.Strings("changed", changed))
	return true
}

// joinErrors writes errs on one line, separated by "; ".
func joinErrors(errs []error) string {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// changedFields lists the json names (after prefix) of the fields of two structs of the same
// type that differ.
func changedFields(a, b any, prefix string) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := 0; i < va.NumField(); i++ {
		name := strings.Split(va.Type().Field(i).Tag.Get("json"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, prefix+name)
		}
	}
	return out
}
