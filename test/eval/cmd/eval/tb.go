package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// tb lets the evaluation drive the end-to-end framework, whose functions take a
// testing.TB, outside `go test`: one tb per setup, whose cleanups stop that setup's control
// plane. Only the methods the framework and the harness call are implemented; the embedded
// nil testing.TB supplies the unexported one, so any other call panics. Fatal and Fatalf
// panic with fatal, which runSetup recovers.
type tb struct {
	testing.TB

	name string
	log  io.Writer

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// fatal is the panic value of tb.Fatal and tb.Fatalf.
type fatal struct{ msg string }

func (t *tb) Name() string { return t.name }
func (t *tb) Helper()      {}
func (t *tb) Log(args ...any) {
	t.write(fmt.Sprintln(args...))
}
func (t *tb) Logf(format string, args ...any) { t.write(fmt.Sprintf(format, args...) + "\n") }
func (t *tb) Error(args ...any)               { t.fail(fmt.Sprintln(args...)) }
func (t *tb) Errorf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...) + "\n")
}
func (t *tb) Fatal(args ...any) {
	msg := fmt.Sprint(args...)
	t.fail(msg + "\n")
	panic(fatal{msg})
}
func (t *tb) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.fail(msg + "\n")
	panic(fatal{msg})
}
func (t *tb) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}
func (t *tb) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}
func (t *tb) TempDir() string {
	dir, err := os.MkdirTemp("", "cps-eval-")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (t *tb) fail(msg string) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	t.write("ERROR " + msg)
}

func (t *tb) write(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = io.WriteString(t.log, t.name+": "+msg)
}

// runCleanups runs the cleanups, last registered first; a panicking one is logged.
func (t *tb) runCleanups() {
	for {
		t.mu.Lock()
		if len(t.cleanups) == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[len(t.cleanups)-1]
		t.cleanups = t.cleanups[:len(t.cleanups)-1]
		t.mu.Unlock()
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.write(fmt.Sprintf("cleanup: %v\n", v))
				}
			}()
			f()
		}()
	}
}
