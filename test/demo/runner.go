package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// runner lets the demo drive the end-to-end framework, whose functions take a testing.TB,
// outside `go test`. It implements the methods the framework calls (Helper, Log, Logf, Error,
// Errorf, Fatal, Fatalf, Cleanup, TempDir, Failed, Name); the embedded nil testing.TB only
// supplies the interface's unexported method, so a call to any other method panics, which
// the demo reports as a failure.
//
// Messages go to log (a file: the framework's chatter is not for the terminal); errors also
// go to errOut. Fatal and Fatalf panic with a fatalError, which run recovers: like a test,
// the demo stops at the first fatal error and then runs the cleanups.
type runner struct {
	testing.TB

	log    io.Writer
	errOut io.Writer
	began  time.Time

	mu       sync.Mutex
	cleanups []func()
	closed   bool // the cleanups have run; a later Cleanup runs its function at once
	failed   bool
	quiet    bool // errors go to the log only (the demo was interrupted)
}

// fatalError is the panic value of runner.Fatal and Fatalf.
type fatalError struct{ msg string }

// Error returns the fatal message.
func (f fatalError) Error() string { return f.msg }

// newRunner returns a runner that writes messages to log and errors also to errOut.
func newRunner(log, errOut io.Writer) *runner {
	return &runner{log: log, errOut: errOut, began: time.Now()}
}

// Name names the demo in the framework's messages.
func (r *runner) Name() string { return "cps-demo" }

// Helper does nothing: there are no test line numbers to adjust.
func (r *runner) Helper() {}

// Log writes a message to the log file.
func (r *runner) Log(args ...any) { r.write(false, fmt.Sprintln(args...)) }

// Logf writes a formatted message to the log file.
func (r *runner) Logf(format string, args ...any) { r.write(false, fmt.Sprintf(format, args...)) }

// Error marks the run failed and reports the message.
func (r *runner) Error(args ...any) { r.fail(fmt.Sprintln(args...)) }

// Errorf marks the run failed and reports the formatted message.
func (r *runner) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }

// Fatal marks the run failed and stops it (see fatalError).
func (r *runner) Fatal(args ...any) {
	msg := fmt.Sprint(args...)
	r.fail(msg)
	panic(fatalError{msg: msg})
}

// Fatalf marks the run failed and stops it (see fatalError).
func (r *runner) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.fail(msg)
	panic(fatalError{msg: msg})
}

// Failed reports whether an error was reported.
func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Cleanup registers f to run at teardown, after every function registered later (LIFO, as
// in testing). Once the cleanups have run (the demo was interrupted while starting
// something), f runs at once, so nothing started late outlives the demo.
func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		f()
		return
	}
	r.cleanups = append(r.cleanups, f)
	r.mu.Unlock()
}

// TempDir returns a new temporary folder that the cleanups remove.
func (r *runner) TempDir() string {
	dir, err := os.MkdirTemp("", "cps-demo-")
	if err != nil {
		r.Fatalf("TempDir: %v", err)
	}
	r.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// runCleanups runs the registered cleanups, last registered first. A cleanup that panics
// (a fatal error in teardown) is reported and the rest still run.
func (r *runner) runCleanups() {
	for {
		r.mu.Lock()
		if len(r.cleanups) == 0 {
			r.closed = true
			r.mu.Unlock()
			return
		}
		f := r.cleanups[len(r.cleanups)-1]
		r.cleanups = r.cleanups[:len(r.cleanups)-1]
		r.mu.Unlock()
		r.runCleanup(f)
	}
}

// runCleanup runs one cleanup, reporting a panic instead of propagating it.
func (r *runner) runCleanup(f func()) {
	defer func() {
		if v := recover(); v != nil {
			r.fail(fmt.Sprintf("cleanup: %v", v))
		}
	}()
	f()
}

// silence keeps further errors off the terminal: once the demo is interrupted, the failures
// of what it was waiting for are expected.
func (r *runner) silence() {
	r.mu.Lock()
	r.quiet = true
	r.mu.Unlock()
}

// fail records a failure and reports msg to the log and the terminal.
func (r *runner) fail(msg string) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	r.write(true, msg)
}

// write appends a time-stamped line to the log, and to errOut too when toTerminal is set.
func (r *runner) write(toTerminal bool, msg string) {
	msg = strings.TrimRight(msg, "\n")
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = fmt.Fprintf(r.log, "%8.3fs %s\n", time.Since(r.began).Seconds(), msg)
	if toTerminal && !r.quiet {
		_, _ = fmt.Fprintf(r.errOut, "error: %s\n", msg)
	}
}
