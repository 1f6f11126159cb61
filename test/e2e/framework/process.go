package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// StopGracePeriod is how long Stop waits after SIGTERM before it sends SIGKILL.
	StopGracePeriod = 5 * time.Second

	groupGoneTimeout = 2 * time.Second
)

// Process is a child process started by this package: a control plane component or a binary
// under test. Its stdout and stderr go to the file LogPath. It runs in its own process group,
// which Stop and Kill signal as a whole, and it receives SIGKILL if the test binary dies.
type Process struct {
	// Name names the process in logs and failure messages; it is also the log file's base name.
	Name string

	cmd      *exec.Cmd
	logPath  string
	logStart int64         // where this run's output begins in the log; a restart appends to it
	done     chan struct{} // closed once the process has exited and been reaped
	exitErr  error         // the result of cmd.Wait; set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// Pid is the process id of the child, which is also its process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file that receives the process's stdout and stderr. A process started again
// under the same name appends to the same file.
func (p *Process) LogPath() string { return p.logPath }

// Output returns what this process (not an earlier one under the same name) has written to
// its log so far, after a first line that shows its command line.
func (p *Process) Output() ([]byte, error) {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < p.logStart {
		return nil, fmt.Errorf("log %s was truncated", p.logPath)
	}
	return b[p.logStart:], nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr is the process's exit status as exec.Cmd.Wait reports it: nil for exit code 0,
// an *exec.ExitError otherwise. It is nil while the process runs.
func (p *Process) ExitErr() error {
	if !p.Exited() {
		return nil
	}
	return p.exitErr
}

// Wait waits up to timeout for the process to exit by itself and returns its exit status
// (see ExitErr), or an error if it is still running after timeout.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.exitErr
	case <-time.After(timeout):
		return fmt.Errorf("%s (pid %d) still running after %v", p.Name, p.Pid(), timeout)
	}
}

// Signal sends sig to the process's whole process group.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to %s (pgid %d): %w", sig, p.Name, p.Pid(), err)
	}
	return nil
}

// Stop ends the process: SIGTERM to its process group, then SIGKILL if it has not exited after
// StopGracePeriod. Whatever else is left in the group is killed too. It returns an error only
// if SIGKILL was needed. Stop is idempotent and safe to call after the process exited.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		defer p.reapGroup()
		if p.Exited() {
			return
		}
		_ = p.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopGracePeriod):
			_ = p.Signal(syscall.SIGKILL)
			<-p.done
			p.stopErr = fmt.Errorf("%s (pid %d) ignored SIGTERM for %v and was killed", p.Name, p.Pid(), StopGracePeriod)
		}
	})
	return p.stopErr
}

// Kill sends SIGKILL to the process group at once and waits until the process is gone; use it
// to simulate a crash. A later Stop does nothing.
func (p *Process) Kill() {
	p.stopOnce.Do(func() {
		defer p.reapGroup()
		_ = p.Signal(syscall.SIGKILL)
		<-p.done
	})
}

// reapGroup kills whatever is left of the process group (children the process may have
// forked, now orphans) and waits up to groupGoneTimeout until the group is gone: orphans are
// reaped by init, not by us, so their exit is only visible a moment later. Then it forgets
// the process.
func (p *Process) reapGroup() {
	defer children.remove(p)
	deadline := time.Now().Add(groupGoneTimeout)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-p.Pid(), syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitForLog waits up to timeout until the process's output (see Output) contains substr. It
// fails the test if the timeout passes or the process exits first.
func (p *Process) WaitForLog(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, fmt.Sprintf("%s to log %q", p.Name, substr), func() (bool, error) {
		b, err := p.Output()
		if err != nil {
			return false, err
		}
		if strings.Contains(string(b), substr) {
			return true, nil
		}
		if p.Exited() {
			return false, StopPolling(fmt.Errorf("%s exited: %v", p.Name, p.exitErr))
		}
		return false, nil
	})
}

// startProcess starts path with args and env (appended to this process's environment) in a new
// process group, with stdout and stderr going to dir/<name>.log, and registers it in children.
func startProcess(dir, name, path string, args, env []string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own copy of the descriptor
	info, err := logFile.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat log of %s: %w", name, err)
	}

	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: Stop can signal the child and anything it forks, and a Ctrl-C
		// in the terminal does not reach it before our handler decides what to do.
		Setpgid: true,
		// The kernel sends SIGKILL to the child when the thread that forked it exits.
		// children.spawn forks from a thread that lives as long as the test binary.
		Pdeathsig: syscall.SIGKILL,
	}
	fmt.Fprintf(logFile, "=== %s %s\n", path, strings.Join(args, " "))
	p := &Process{Name: name, cmd: cmd, logPath: logPath, logStart: info.Size(), done: make(chan struct{})}
	if err := children.spawn(p); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// children is the registry of live child processes and scratch folders.
//
// It is the package's only mutable package-level state besides the BinDir cache, and it has to
// be: the signal handler installed by KillAllOnSignal and the exit path of Main must find every
// child of every control plane of every test in the binary, and no test object is in reach there.
var children = &registry{live: map[*Process]struct{}{}, dirs: map[string]struct{}{}}

// registry tracks live children and scratch folders, and owns the thread that forks children.
type registry struct {
	mu   sync.Mutex
	live map[*Process]struct{}
	dirs map[string]struct{} // scratch folders to remove if the binary is interrupted

	spawnOnce sync.Once
	requests  chan spawnRequest
}

type spawnRequest struct {
	p    *Process
	errc chan error
}

// spawn starts p.cmd from the spawner goroutine and records p as live.
//
// Pdeathsig is tied to the OS thread that forked the child, not to the process: if a test
// started a child from an ordinary goroutine, the Go runtime could later retire that thread
// (it does so for threads whose goroutine exits while locked) and the kernel would kill the
// child in the middle of the test. So all children are forked by one goroutine that locks
// itself to its thread and never returns: that thread, and with it every child's Pdeathsig,
// lives exactly as long as the test binary.
func (r *registry) spawn(p *Process) error {
	r.spawnOnce.Do(func() {
		r.requests = make(chan spawnRequest)
		go r.spawnLoop()
	})
	errc := make(chan error, 1)
	r.requests <- spawnRequest{p: p, errc: errc}
	return <-errc
}

func (r *registry) spawnLoop() {
	runtime.LockOSThread() // never unlocked, and this goroutine never returns: see spawn
	for req := range r.requests {
		err := req.p.cmd.Start()
		if err == nil {
			r.mu.Lock()
			r.live[req.p] = struct{}{}
			r.mu.Unlock()
		}
		req.errc <- err
	}
}

func (r *registry) remove(p *Process) {
	r.mu.Lock()
	delete(r.live, p)
	r.mu.Unlock()
}

func (r *registry) addDir(dir string) {
	r.mu.Lock()
	r.dirs[dir] = struct{}{}
	r.mu.Unlock()
}

func (r *registry) removeDir(dir string) {
	r.mu.Lock()
	delete(r.dirs, dir)
	r.mu.Unlock()
}

// removeDirs removes every registered scratch folder, unless $CPS_E2E_KEEP is set.
func (r *registry) removeDirs() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for dir := range r.dirs {
		if os.Getenv(KeepDirEnv) != "" {
			fmt.Fprintf(os.Stderr, "framework: kept scratch folder %s\n", dir)
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// snapshot returns the live children.
func (r *registry) snapshot() []*Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	procs := make([]*Process, 0, len(r.live))
	for p := range r.live {
		procs = append(procs, p)
	}
	return procs
}

// killAll sends SIGKILL to the process group of every live child and waits, up to
// groupGoneTimeout, until the groups are gone.
func (r *registry) killAll() {
	procs := r.snapshot()
	for _, p := range procs {
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	}
	deadline := time.Now().Add(groupGoneTimeout)
	for _, p := range procs {
		for time.Now().Before(deadline) && !errors.Is(syscall.Kill(-p.Pid(), 0), syscall.ESRCH) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// KillAllOnSignal installs a handler for SIGINT and SIGTERM that kills the process group of
// every live child, removes the scratch folders (kept if $CPS_E2E_KEEP is set) and exits with
// 128+signal. Children run in their own process groups, so an interrupt of `go test` does not
// reach them by itself; and although Pdeathsig would kill them when the test binary dies,
// anything they forked would survive. Main calls it; call it once.
func KillAllOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		children.killAll()
		children.removeDirs()
		fmt.Fprintf(os.Stderr, "framework: %v: killed all child processes\n", sig)
		code := 1
		if s, ok := sig.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		os.Exit(code)
	}()
}

// Main is the body of an end-to-end package's TestMain: it installs KillAllOnSignal, runs the
// tests, kills any child and removes any scratch folder a test left behind, and exits with the
// tests' result.
//
//	func TestMain(m *testing.M) { framework.Main(m) }
func Main(m *testing.M) {
	KillAllOnSignal()
	code := m.Run()
	children.killAll()
	children.removeDirs()
	os.Exit(code)
}
