package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// TestMakeImage runs what `make image` runs on a machine without a Docker daemon
// (test/tools/build-image.sh, IMAGE_BUILDER=go), pushing to a registry on loopback, and
// checks the result from the image itself: the config (non-root user, entrypoint, no
// volume, the labels), a filesystem with the binary and no shell, the binary byte for byte
// the one the script built, and that binary, taken out of the image, runs `version` and
// `--help` as the image's user.
func TestMakeImage(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	tag := strings.TrimPrefix(reg.URL, "http://") + "/cps-extender:make-test"
	out := t.TempDir()
	const version, revision = "v0.0.0-maketest", "0123456789abcdef0123456789abcdef01234567"

	cmd := exec.Command("bash", "../build-image.sh")
	cmd.Env = append(os.Environ(), "IMAGE_BUILDER=go", "IMAGE_DIR="+out, "IMAGE="+tag, "PUSH=1",
		"VERSION="+version, "REVISION="+revision)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		t.Fatalf("build-image.sh: %v\n%s", err, log.String())
	}
	t.Logf("build-image.sh:\n%s", log.String())

	img, _, _ := readOutputs(t, filepath.Join(out, "cps-extender.tar"), filepath.Join(out, "oci"), tag)

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/cps-extender" || len(c.Cmd) != 0 || len(c.Volumes) != 0 {
		t.Errorf("config user %q entrypoint %q cmd %q volumes %v: want 65532:65532, [/cps-extender], none, none (nothing to write)",
			c.User, c.Entrypoint, c.Cmd, c.Volumes)
	}
	for key, want := range map[string]string{LabelVersion: version, LabelRevision: revision, LabelSource: "https://github.com/cps-extender/cps-extender"} {
		if c.Labels[key] != want {
			t.Errorf("label %s = %q, want %q", key, c.Labels[key], want)
		}
	}

	files := imageFiles(t, img)
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/env"} {
		if _, ok := files[shell]; ok {
			t.Errorf("the image has /%s: want no shell", shell)
		}
	}
	built, err := os.ReadFile(filepath.Join(out, "cps-extender"))
	if err != nil {
		t.Fatal(err)
	}
	inImage := files["cps-extender"]
	if got, want := sha256Hex(inImage.body), sha256Hex(built); got != want {
		t.Fatalf("/cps-extender in the image has sha256 %s, the built binary %s", got, want)
	}

	// Run the binary from the image, not the built file, from a folder nobody may write to.
	dir, err := os.MkdirTemp("", "image-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700); _ = os.RemoveAll(dir) })
	extracted := filepath.Join(dir, "cps-extender")
	if err := os.WriteFile(extracted, inImage.body, os.FileMode(inImage.header.Mode)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"version"}, {"--help"}} {
		run := exec.Command(extracted, args...)
		run.Dir, run.Env = "/", []string{} // the image sets no environment
		if os.Getuid() == 0 {
			// As the image's user: the binary needs nothing it cannot read.
			run.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		}
		got, err := run.CombinedOutput()
		if err != nil {
			t.Errorf("cps-extender %s from the image: %v\n%s", args[0], err, got)
			continue
		}
		if args[0] == "version" && (!strings.Contains(string(got), version) || !strings.Contains(string(got), revision)) {
			t.Errorf("cps-extender version printed %q: want %s and %s", got, version, revision)
		}
		if args[0] == "--help" && !strings.Contains(string(got), "-config") {
			t.Errorf("cps-extender --help printed %q: want the flags", got)
		}
	}
}
