package config

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cps-extender/cps-extender/priority"
)

// modelSink records the models it receives.
type modelSink struct {
	got []priority.Model
	aff []priority.Affinity
}

func (s *modelSink) SetModel(m priority.Model, a priority.Affinity) {
	s.got = append(s.got, m)
	s.aff = append(s.aff, a)
}

const baseConfigFile = `
listen: ":8888"
model:
  weights: {user: 0.4, job: 0.2, wait: 0.2, parallelism: 0.2}
  tau: 10m
`

func TestConfigReload(t *testing.T) {
	tests := []struct {
		name string
		// next is the file's new content ("" deletes the file).
		next string
		// overlay stands for the command-line flags.
		overlay     func(Config) Config
		wantApplied bool
		wantWeights priority.Weights
		wantLogs    []string // "level message: key=value" of the reloader's lines
	}{
		{
			name:        "a valid weight change is applied",
			next:        strings.Replace(baseConfigFile, "user: 0.4, job: 0.2", "user: 0.2, job: 0.4", 1),
			wantApplied: true,
			wantWeights: priority.Weights{User: 0.2, Job: 0.4, Wait: 0.2, Parallelism: 0.2},
			wantLogs:    []string{"info config reloaded: changed=[model.weights]"},
		},
		{
			name:        "an invalid file is rejected whole and the old model stays",
			next:        strings.Replace(baseConfigFile, "tau: 10m", "tau: 10m\n  policy: fastest\nbogus: 1", 1),
			wantWeights: priority.Weights{User: 0.4, Job: 0.2, Wait: 0.2, Parallelism: 0.2},
			wantLogs:    []string{`error config reload rejected: the new config file is invalid; the running config stays: problems=unknown field "bogus"; model.policy: "fastest", want one of strict, reserve, besteffort, backfill`},
		},
		{
			name:        "a change that needs a restart is ignored with a warning",
			next:        strings.Replace(baseConfigFile, `":8888"`, `":9999"`, 1) + "gate:\n  holdTimeout: 15s\n",
			wantWeights: priority.Weights{User: 0.4, Job: 0.2, Wait: 0.2, Parallelism: 0.2},
			wantLogs: []string{
				"warn config reload: these keys changed but take effect only after a restart; ignored until then: keys=[listen gate]",
				"info config file changed; nothing to reload",
			},
		},
		{
			name:        "a model change and a restart-only change: the model is applied",
			next:        strings.Replace(strings.Replace(baseConfigFile, `":8888"`, `":9999"`, 1), "tau: 10m", "tau: 20m\naffinity:\n  psAntiAffinity: hard", 1),
			wantApplied: true,
			wantWeights: priority.Weights{User: 0.4, Job: 0.2, Wait: 0.2, Parallelism: 0.2},
			wantLogs: []string{
				"warn config reload: these keys changed but take effect only after a restart; ignored until then: keys=[listen]",
				"info config reloaded: changed=[model.tau affinity.psAntiAffinity]",
			},
		},
		{
			name: "a key a flag overrides does not need a restart",
			next: strings.Replace(baseConfigFile, `":8888"`, `":9999"`, 1),
			overlay: func(c Config) Config {
				c.Listen = ":8888"
				return c
			},
			wantWeights: priority.Weights{User: 0.4, Job: 0.2, Wait: 0.2, Parallelism: 0.2},
			wantLogs:    []string{"info config file changed; nothing to reload"},
		},
		{
			name:        "the same content again is no change",
			next:        baseConfigFile,
			wantWeights: priority.Weights{User: 0.4, Job: 0.2, Wait: 0.2, Parallelism: 0.2},
		},
		{
			name:        "a file gone for a moment keeps the config and says so once",
			wantWeights: priority.Weights{User: 0.4, Job: 0.2, Wait: 0.2, Parallelism: 0.2},
			wantLogs:    []string{"warn config reload: cannot read the config file; the running config stays"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, baseConfigFile)
			start, errs := LoadConfig(path)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if tt.overlay != nil {
				start = tt.overlay(start)
			}
			core, logs := observer.New(zap.DebugLevel)
			sink := &modelSink{}
			r := NewConfigReloader(ConfigReloaderOptions{Log: zap.New(core), Path: path, Current: start, Overlay: tt.overlay, Receivers: []ModelReceiver{sink}})
			if tt.next == "" {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tt.next), 0o600); err != nil {
				t.Fatal(err)
			}
			applied := r.Check()
			if r.Check() {
				t.Error("a second check of the same file applied it again")
			}
			if applied != tt.wantApplied || len(sink.got) != map[bool]int{true: 1}[tt.wantApplied] {
				t.Errorf("applied %v, receiver got %d models; want applied %v", applied, len(sink.got), tt.wantApplied)
			}
			if diff := cmp.Diff(tt.wantWeights, r.current.Model.Weights); diff != "" {
				t.Errorf("weights in effect (-want +got):\n%s", diff)
			}
			if tt.wantApplied && sink.got[0].Weights != tt.wantWeights {
				t.Errorf("receiver got weights %+v, want %+v", sink.got[0].Weights, tt.wantWeights)
			}
			var got []string
			for _, e := range logs.All() {
				line := e.Level.String() + " " + e.Message
				for _, f := range e.Context {
					switch f.Key {
					case "problems":
						line += ": problems=" + f.String
					case "keys", "changed":
						line += ": " + f.Key + "=" + fmt.Sprint(e.ContextMap()[f.Key])
					}
				}
				got = append(got, line)
			}
			if diff := cmp.Diff(tt.wantLogs, got); diff != "" {
				t.Errorf("log lines (-want +got):\n%s", diff)
			}
		})
	}
}

// chanSink passes the models it receives on.
type chanSink chan priority.Model

func (s chanSink) SetModel(m priority.Model, _ priority.Affinity) { s <- m }

// TestConfigReloaderRun: Run checks the file every interval, so a change reaches the
// receivers without a call to Check, and it returns once ctx ends.
func TestConfigReloaderRun(t *testing.T) {
	path := writeConfig(t, baseConfigFile)
	start, errs := LoadConfig(path)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	sink := make(chanSink, 1)
	r := NewConfigReloader(ConfigReloaderOptions{Log: zap.NewNop(), Path: path, Current: start, Receivers: []ModelReceiver{sink}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		r.Run(ctx, 10*time.Millisecond)
		close(done)
	}()
	if err := os.WriteFile(path, []byte(strings.Replace(baseConfigFile, "tau: 10m", "tau: 20m", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sink:
		if m.Tau != 20*time.Minute {
			t.Errorf("tau %v, want 20m", m.Tau)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no model within 10 s")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
}
