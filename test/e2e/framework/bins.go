package framework

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// BinDirEnv names the environment variable that, when set, points at a folder holding etcd,
// kube-apiserver, kube-scheduler, kwok and kwok-stages/, so that BinDir does not run the build
// script.
const BinDirEnv = "CPS_CONTROLPLANE_BIN"

// modulePath identifies the repository root: the folder whose go.mod declares it.
const modulePath = "github.com/cps-extender/cps-extender"

// buildScript is the script, relative to the repository root, that builds the control plane
// binaries (a no-op when they are cached) and prints their folder on its last line.
const buildScript = "test/tools/build-controlplane.sh"

// bins caches BinDir's answer for the life of the test binary, so that the build script runs
// at most once however many tests start a control plane. Like children, it is package-level
// because it spans tests.
var bins = &binFolder{env: BinDirEnv, script: buildScript, check: checkBinDir}

// BinDir returns the folder holding the control plane binaries: $CPS_CONTROLPLANE_BIN if set,
// else the last line printed by test/tools/build-controlplane.sh, which it runs once per test
// binary. It fails the test, with the script's output, if the folder cannot be had.
func BinDir(t testing.TB) string {
	t.Helper()
	return bins.get(t, "control plane binaries")
}

// binFolder is a folder of binaries found once per test binary: the folder named by the
// environment variable env if set, else the one the build script prints; check reports what
// the folder lacks.
type binFolder struct {
	env, script string
	check       func(dir string) error

	once sync.Once
	dir  string
	err  error
}

// get returns the folder, finding it on the first call; it fails t if it cannot be had.
func (b *binFolder) get(t testing.TB, what string) string {
	t.Helper()
	b.once.Do(func() { b.dir, b.err = b.find() })
	if b.err != nil {
		t.Fatalf("%s: %v", what, b.err)
	}
	return b.dir
}

func (b *binFolder) find() (string, error) {
	if dir := os.Getenv(b.env); dir != "" {
		return dir, b.check(dir)
	}
	dir, err := runBuildScript(b.script)
	if err != nil {
		return "", err
	}
	return dir, b.check(dir)
}

// runBuildScript runs script (relative to the repository root) there and returns the folder
// it printed on its last line; an error carries the script's output.
func runBuildScript(script string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, script))
	cmd.Dir = root
	var stdout, combined bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &combined
	err = cmd.Run()
	combined.Write(stdout.Bytes())
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", script, err, combined.String())
	}
	dir := lastLine(stdout.String())
	if dir == "" {
		return "", fmt.Errorf("%s printed no folder\n%s", script, combined.String())
	}
	return dir, nil
}

// checkBinDir reports any binary or the stage folder missing from dir.
func checkBinDir(dir string) error {
	var missing []string
	for _, name := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kwok", "kwok-stages"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			last = line
		}
	}
	return last
}

// RepoRoot returns the repository root: the nearest folder at or above the working directory
// whose go.mod declares module github.com/cps-extender/cps-extender.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isRepoRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of module " + modulePath + " at or above the working directory")
		}
		dir = parent
	}
}

func isRepoRoot(goMod string) bool {
	b, err := os.ReadFile(goMod)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}
