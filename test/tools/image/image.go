package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed parts. The user is distroless's nonroot, by number, so that a pod's
// runAsNonRoot can verify it without reading /etc/passwd.
const (
	// BinaryPath is where the binary sits in the image; it is the entrypoint.
	BinaryPath = "/cps-extender"
	// User is the user and group the process runs as.
	User = "65532:65532"
	// Port is the port the extender listens on by default (listen: ":8888").
	Port = "8888/tcp"
)

// The OCI label keys the image carries (the pre-defined annotation keys of the OCI image spec).
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelTitle    = "org.opencontainers.image.title"
	LabelCreated  = "org.opencontainers.image.created"
)

// passwd and group name the image's two users, for tools that look names up (ps, a debug
// container); the process needs neither file. Neither user has a shell or a home.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// Spec is what one image is built from.
type Spec struct {
	// Binary is the path of a statically linked Linux executable.
	Binary   string
	Source   string // the repository URL
	Version  string
	Revision string // the commit
	// Created stamps the config and every file; the commit's time keeps the image's digest
	// the same for the same binary.
	Created time.Time
}

// Build writes the image of spec: one layer holding the binary and the passwd and group
// files, on no base image (no shell, no package manager, nothing else), with the OCI media
// types, the entrypoint, the non-root user and the labels.
func Build(spec Spec) (v1.Image, error) {
	arch, err := staticLinuxArch(spec.Binary)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(spec.Binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := layerFiles(bin, spec.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: spec.Created}, CreatedBy: "test/tools/image: " + BinaryPath + ", /etc/passwd, /etc/group",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: spec.Created}
	cf.Config = v1.Config{
		User:         User,
		Entrypoint:   []string{BinaryPath},
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{Port: {}},
		Labels: map[string]string{
			LabelTitle:    "cps-extender",
			LabelSource:   spec.Source,
			LabelVersion:  spec.Version,
			LabelRevision: spec.Revision,
			LabelCreated:  spec.Created.UTC().Format(time.RFC3339),
		},
	}
	return mutate.ConfigFile(img, cf)
}

// layerFiles is the layer's tar: /etc with passwd and group, and the binary, all owned by
// root and not writable by the image's user.
func layerFiles(bin []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		body []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: BinaryPath[1:], mode: 0o755, body: bin},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// elfArch maps ELF machines to Go's (and OCI's) architecture names.
var elfArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// staticLinuxArch checks that path is a statically linked Linux executable (the image has
// no C library and no loader) and returns its architecture.
func staticLinuxArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s is not a Linux executable: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("%s is an ELF %s, not an executable", path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked (it names a program interpreter): build it with CGO_ENABLED=0", path)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return "", fmt.Errorf("%s needs shared libraries %v: build it with CGO_ENABLED=0", path, libs)
	}
	arch, ok := elfArch[f.Machine]
	if !ok || (f.Machine == elf.EM_PPC64 && f.Data != elf.ELFDATA2LSB) {
		return "", fmt.Errorf("%s is built for %s %s, which this tool does not map to an OCI architecture", path, f.Machine, f.Data)
	}
	return arch, nil
}
