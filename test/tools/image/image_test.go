package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	tinyOnce sync.Once
	tinyBin  string
	tinyErr  error
)

// tinyStatic builds, once, a small static Go program that prints its arguments.
func tinyStatic(t *testing.T) string {
	t.Helper()
	tinyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "image-tiny-")
		if err != nil {
			tinyErr = err
			return
		}
		src := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() { fmt.Println(os.Args[1:]) }\n"
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err == nil {
			err = os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644)
		}
		tinyBin = filepath.Join(dir, "tiny")
		cmd := exec.Command("go", "build", "-trimpath", "-o", tinyBin, ".")
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			tinyErr = &buildError{err: err, out: out}
		}
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyBin
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// imageFiles reads the image's flattened filesystem: path -> header and content.
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "/")] = imageFile{header: h, body: body}
	}
}

type imageFile struct {
	header *tar.Header
	body   []byte
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestBuild(t *testing.T) {
	bin := tinyStatic(t)
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	spec := Spec{Binary: bin, Source: "https://example.com/src", Version: "v1.2.3", Revision: "abc123", Created: created}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := v1.Config{
		User: "65532:65532", Entrypoint: []string{"/cps-extender"}, WorkingDir: "/",
		ExposedPorts: map[string]struct{}{"8888/tcp": {}},
		Labels: map[string]string{
			LabelTitle: "cps-extender", LabelSource: "https://example.com/src", LabelVersion: "v1.2.3", LabelRevision: "abc123",
			LabelCreated: "2026-11-30T12:00:00Z",
		},
	}
	if diff := cmp.Diff(want, cf.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(created) {
		t.Errorf("platform %s/%s created %v: want linux/%s at %v", cf.OS, cf.Architecture, cf.Created, runtime.GOARCH, created)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", mt)
	}
	files := imageFiles(t, img)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	if diff := cmp.Diff([]string{"cps-extender", "etc", "etc/group", "etc/passwd"}, names); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	built, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got := files["cps-extender"]; sha256Hex(got.body) != sha256Hex(built) || got.header.Mode != 0o755 || got.header.Uid != 0 {
		t.Errorf("/cps-extender: sha256 %s mode %o uid %d; want the built binary's %s, 0755, root", sha256Hex(got.body), got.header.Mode, got.header.Uid, sha256Hex(built))
	}
	if !strings.Contains(string(files["etc/passwd"].body), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd %q names no nonroot user 65532", files["etc/passwd"].body)
	}

	// The same inputs give the same digest; another time gives another.
	again, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Created = created.Add(time.Second)
	later, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	d3, _ := later.Digest()
	if d1 != d2 || d1 == d3 {
		t.Errorf("digests %s, %s (same inputs), %s (one second later): want the first two equal, the third different", d1, d2, d3)
	}
}

func TestBuildRejects(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, binary, want string
	}{
		{name: "missing", binary: filepath.Join(dir, "nope"), want: "is not a Linux executable"},
		{name: "a shell script", binary: script, want: "is not a Linux executable"},
		// Debian's coreutils are linked against the C library, which the image does not have.
		{name: "dynamically linked", binary: "/bin/ls", want: "dynamically linked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(Spec{Binary: tc.binary})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build(%s) = %v, want an error saying %q", tc.binary, err, tc.want)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "nothing", args: nil, want: []string{"-binary is required", "nothing to do"}},
		{name: "bad time", args: []string{"-binary", "b", "-tarball", "t", "-created", "yesterday"}, want: []string{"-created"}},
		{name: "stray argument", args: []string{"-binary", "b", "-layout", "l", "extra"}, want: []string{"unexpected arguments [extra]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestRunWritesAndPushes runs the command into a tarball, a layout (twice: the second
// replaces the first) and a registry on loopback, and reads the same image back from each.
func TestRunWritesAndPushes(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	tag := strings.TrimPrefix(reg.URL, "http://") + "/cps-extender:test"
	dir := t.TempDir()
	tarPath, layoutDir := filepath.Join(dir, "img.tar"), filepath.Join(dir, "oci")
	args := []string{"-binary", tinyStatic(t), "-tag", tag, "-tarball", tarPath, "-layout", layoutDir, "-push", "-version", "v0"}
	var out bytes.Buffer
	for range 2 {
		out.Reset()
		if err := run(context.Background(), args, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	fromLayout, entry, pushed := readOutputs(t, tarPath, layoutDir, tag)
	ref, _ := name.ParseReference(tag)
	if got := entry.Annotations["io.containerd.image.name"]; got != ref.Name() {
		t.Errorf("layout image name %q, want %q", got, ref.Name())
	}
	dPushed, _ := pushed.Digest()
	if cf, err := fromLayout.ConfigFile(); err != nil || cf.Config.Labels[LabelVersion] != "v0" {
		t.Errorf("layout image config %+v (%v): want version label v0", cf, err)
	}
	if !strings.Contains(out.String(), "pushed "+ref.Context().Name()+"@"+dPushed.String()) {
		t.Errorf("output %q does not name the pushed digest", out.String())
	}

	notLayout := t.TempDir()
	err := run(context.Background(), []string{"-binary", tinyStatic(t), "-layout", notLayout}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is no OCI layout") {
		t.Errorf("writing a layout over a plain folder: %v, want a refusal", err)
	}
}

func TestContainerdName(t *testing.T) {
	for ref, want := range map[string]string{
		"cps-extender:dev":                       "docker.io/library/cps-extender:dev",
		"acme/cps-extender:v1":                   "docker.io/acme/cps-extender:v1",
		"registry.example.com/ml/cps-extender:1": "registry.example.com/ml/cps-extender:1",
		"127.0.0.1:5000/cps-extender@sha256:" + strings.Repeat("a", 64): "127.0.0.1:5000/cps-extender@sha256:" + strings.Repeat("a", 64),
	} {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := containerdName(r); got != want {
			t.Errorf("containerdName(%s) = %s, want %s", ref, got, want)
		}
	}
}

// readOutputs reads back what one run wrote and pushed: the layout's one image (and its
// index entry) and the registry's image, which must be the same image, and the tarball, which
// must hold the same config and layer (a `docker save` tarball keeps no manifest).
func readOutputs(t *testing.T, tarPath, layoutDir, tag string) (fromLayout v1.Image, entry v1.Descriptor, pushed v1.Image) {
	t.Helper()
	index, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("layout index %+v (%v): want one image", im, err)
	}
	entry = im.Manifests[0]
	if fromLayout, err = index.Image(entry.Digest); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(tag)
	if err != nil {
		t.Fatal(err)
	}
	if pushed, err = remote.Image(ref); err != nil {
		t.Fatalf("the pushed image: %v", err)
	}
	fromTar, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := hash(t, pushed.Digest); d != entry.Digest {
		t.Errorf("digests: layout %s, registry %s: want one image", entry.Digest, d)
	}
	lTar, err1 := fromTar.Layers()
	lPushed, err2 := pushed.Layers()
	if err1 != nil || err2 != nil || len(lTar) != 1 || len(lPushed) != 1 {
		t.Fatalf("layers: tarball %d (%v), registry %d (%v): want one each", len(lTar), err1, len(lPushed), err2)
	}
	if c1, c2 := hash(t, fromTar.ConfigName), hash(t, pushed.ConfigName); c1 != c2 {
		t.Errorf("configs: tarball %s, registry %s: want the same", c1, c2)
	}
	if d1, d2 := hash(t, lTar[0].Digest), hash(t, lPushed[0].Digest); d1 != d2 {
		t.Errorf("layers: tarball %s, registry %s: want the same", d1, d2)
	}
	return fromLayout, entry, pushed
}

// hash calls f, failing the test on an error.
func hash(t *testing.T, f func() (v1.Hash, error)) v1.Hash {
	t.Helper()
	h, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
