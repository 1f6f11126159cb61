package framework

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{name: "fewer lines than n", in: "a\nb\n", n: 3, want: "a\nb"},
		{name: "exactly n", in: "a\nb\nc", n: 3, want: "a\nb\nc"},
		{name: "more lines than n", in: "a\nb\nc\nd\n", n: 2, want: "c\nd"},
		{name: "empty", in: "", n: 2, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, string(tail([]byte(tt.in), tt.n))); diff != "" {
				t.Errorf("tail (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckUsers(t *testing.T) {
	tests := []struct {
		name  string
		users []User
		want  []string // substrings of the error; nil for no error
	}{
		{name: "valid", users: []User{{Name: "alice", Groups: []string{"team-a", "system:authenticated"}}, {Name: "bob", Token: "t"}}},
		{name: "all problems at once", users: []User{{}, {Name: "admin"}, {Name: "bo,b"}, {Name: "carol", Groups: []string{`"x"`}}},
			want: []string{"user 0 has no name", `"admin" is used twice`, `"bo,b" holds`, `"\"x\"" holds`}},
		{name: "repeated", users: []User{{Name: "a"}, {Name: "a"}}, want: []string{`"a" is used twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkUsers(tt.users)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("checkUsers: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkUsers: no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestWriteTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	users := []User{
		{Name: "admin", Token: "t0", Groups: []string{"system:masters"}},
		{Name: "alice", Token: "t1", Groups: []string{"a", "b"}},
		{Name: "bob", Token: "t2"},
	}
	if err := writeTokenFile(path, users); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "t0,admin,admin,\"system:masters\"\nt1,alice,alice,\"a,b\"\nt2,bob,bob,\"\"\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("token file (-want +got):\n%s", diff)
	}
}

func TestNodeSpecNode(t *testing.T) {
	spec := Nodes("n", 2, "4", "8Gi")[1]
	spec.Labels = map[string]string{"zone": "z1"}
	spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	node := spec.node()
	if node.Name != "n-1" {
		t.Errorf("name %q, want n-1", node.Name)
	}
	if diff := cmp.Diff(spec.Taints, node.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	wantLabels := map[string]string{
		"kubernetes.io/hostname": "n-1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "zone": "z1",
	}
	if diff := cmp.Diff(wantLabels, node.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if got := node.Annotations[KwokNodeAnnotation]; got != KwokNodeAnnotationValue {
		t.Errorf("kwok annotation %q", got)
	}
	want := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for _, got := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		for name, q := range want {
			if g := got[name]; g.Cmp(q) != 0 {
				t.Errorf("%s = %v, want %v", name, g.String(), q.String())
			}
		}
	}

	spec.Capacity[corev1.ResourcePods] = resource.MustParse("5")
	if got := spec.node().Status.Capacity[corev1.ResourcePods]; got.Value() != 5 {
		t.Errorf("explicit pods capacity %v, want 5", got.String())
	}
}

func TestLastLine(t *testing.T) {
	if got := lastLine("building...\n/a/b/c\n\n"); got != "/a/b/c" {
		t.Errorf("lastLine = %q", got)
	}
}

func TestIsRepoRoot(t *testing.T) {
	dir := t.TempDir()
	goMod := filepath.Join(dir, "go.mod")
	if isRepoRoot(goMod) {
		t.Error("missing go.mod is a root")
	}
	if err := os.WriteFile(goMod, []byte("// x\nmodule github.com/cps-extender/cps-extender\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !isRepoRoot(goMod) {
		t.Error("the project's go.mod is not a root")
	}
	if err := os.WriteFile(goMod, []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if isRepoRoot(goMod) {
		t.Error("another module's go.mod is a root")
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	if err := poll(time.Second, func() (bool, error) { calls++; return calls == 3, errors.New("not yet") }); err != nil {
		t.Errorf("poll: %v", err)
	}
	err := poll(150*time.Millisecond, func() (bool, error) { return false, errors.New("still not") })
	if err == nil || !strings.Contains(err.Error(), "still not") {
		t.Errorf("poll timeout error %v lacks the last condition error", err)
	}
	began := time.Now()
	err = poll(time.Minute, func() (bool, error) { return false, StopPolling(errors.New("gone")) })
	if err == nil || err.Error() != "gone" || time.Since(began) > time.Second {
		t.Errorf("poll with StopPolling: %v after %v", err, time.Since(began))
	}
}

// TestProcessStopKillsGroup runs the process machinery without a control plane: a shell that
// forks a sleeper is stopped through its process group, and a process that ignores SIGTERM is
// killed.
func TestProcessStopKillsGroup(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(dir, "forker", "/bin/sh", []string{"-c", "sleep 300 & echo started; wait"}, []string{"HOME=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	p.WaitForLog(t, "started", 5*time.Second)
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d survives Stop: %v", p.Pid(), err)
	}
	if len(children.snapshot()) != 0 {
		t.Errorf("registry still holds %d processes", len(children.snapshot()))
	}
}

func TestProcessKill(t *testing.T) {
	p, err := startProcess(t.TempDir(), "stubborn", "/bin/sh", []string{"-c", "trap '' TERM; echo started; sleep 300"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.WaitForLog(t, "started", 5*time.Second)
	p.Kill()
	var exit interface{ Sys() any }
	if !errors.As(p.ExitErr(), &exit) {
		t.Fatalf("exit status %v, want a signal", p.ExitErr())
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("exit status %v, want killed by SIGKILL", p.ExitErr())
	}
	if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d survives Kill: %v", p.Pid(), err)
	}
}

// TestStartWithRetry checks that a component that lost the race for its port is started again,
// and that the cleanup stops the attempt that succeeded.
func TestStartWithRetry(t *testing.T) {
	cp := &ControlPlane{Dir: t.TempDir()}
	attempts := 0
	var last *Process
	cp.startWithRetry(t, "racer", func() (*Process, error) {
		attempts++
		// printf, so that the log's command line does not hold the message itself.
		script := "printf 'listen tcp 127.0.0.1:1: bind: address already in %s\\n' use; exit 1"
		if attempts == startAttempts {
			script = "echo up; sleep 300"
		}
		p, err := cp.startChild(t, "racer", "/bin/sh", []string{"-c", script}, nil)
		if err != nil {
			return nil, err
		}
		last = p
		return p, waitUntil(p, 5*time.Second, func() (bool, error) { return outputContains(p, "\nup\n"), nil })
	})
	if attempts != startAttempts {
		t.Errorf("%d attempts, want %d", attempts, startAttempts)
	}
	if last.Exited() {
		t.Errorf("the last attempt exited: %v", last.ExitErr())
	}
	if got := len(cp.Processes()); got != startAttempts {
		t.Errorf("%d processes recorded, want %d", got, startAttempts)
	}
}
