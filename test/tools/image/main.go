// Command image writes cps-extender's container image without a Docker daemon: one layer
// on no base image, holding the static binary (test/tools/build-image.sh builds it), run as
// uid 65532 with the binary as entrypoint and the OCI labels source, version and revision.
// It writes a tarball in `docker save` format (docker load, kind load image-archive,
// ctr images import, crane push) and/or an OCI image layout, and can push the image.
//
//	go run . -binary BIN -tag cps-extender:dev -tarball out.tar -layout out-oci [-push]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	spec    Spec
	tag     string
	tarball string
	layout  string
	push    bool
	created string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.spec.Binary, "binary", "", "the statically linked cps-extender binary (required)")
	fs.StringVar(&o.tag, "tag", "cps-extender:dev", "the image reference: its name in the tarball and the layout, and where -push sends it")
	fs.StringVar(&o.tarball, "tarball", "", "write the image here, in `docker save` format")
	fs.StringVar(&o.layout, "layout", "", "write the image into this folder as an OCI image layout (an existing layout there is replaced)")
	fs.BoolVar(&o.push, "push", false, "push the image to the registry that -tag names (credentials from ~/.docker/config.json; plain HTTP only to a registry on loopback)")
	fs.StringVar(&o.spec.Source, "source", "", "label "+LabelSource)
	fs.StringVar(&o.spec.Version, "version", "dev", "label "+LabelVersion)
	fs.StringVar(&o.spec.Revision, "revision", "", "label "+LabelRevision)
	fs.StringVar(&o.created, "created", "", "the image's creation time, RFC 3339 (default: the Unix epoch, for a reproducible digest); pass the commit's time")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var problems []error
	if o.spec.Binary == "" {
		problems = append(problems, errors.New("-binary is required"))
	}
	if o.tarball == "" && o.layout == "" && !o.push {
		problems = append(problems, errors.New("nothing to do: give -tarball, -layout or -push"))
	}
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %v", fs.Args()))
	}
	o.spec.Created = time.Unix(0, 0).UTC()
	if o.created != "" {
		t, err := time.Parse(time.RFC3339, o.created)
		if err != nil {
			problems = append(problems, fmt.Errorf("-created: %w", err))
		}
		o.spec.Created = t.UTC()
	}
	return o, errors.Join(problems...)
}

// run builds the image and writes or pushes it, then prints its digest.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(o.tag)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	img, err := Build(o.spec)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if o.tarball != "" {
		if err := writeTarball(o.tarball, ref, img); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s (%s, %s)\n", o.tarball, ref.Name(), digest)
	}
	if o.layout != "" {
		if err := writeLayout(o.layout, ref, img); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote OCI layout %s (%s, %s)\n", o.layout, ref.Name(), digest)
	}
	if o.push {
		if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref.Name(), err)
		}
		fmt.Fprintf(stdout, "pushed %s@%s\n", ref.Context().Name(), digest)
	}
	return nil
}

// writeTarball writes the image in `docker save` format, through a temporary file so that
// a failed write leaves no half tarball behind.
func writeTarball(path string, ref name.Reference, img v1.Image) error {
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// writeLayout writes the image as the only one of an OCI layout at dir, named by ref (the
// annotations OCI tools and containerd read). dir must be absent or an OCI layout.
func writeLayout(dir string, ref name.Reference, img v1.Image) error {
	if _, err := os.Stat(dir); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("-layout %s exists and is no OCI layout: not replacing it", dir)
		}
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	annotations := map[string]string{
		"org.opencontainers.image.ref.name": ref.Identifier(),
		"io.containerd.image.name":          containerdName(ref),
	}
	if err := p.AppendImage(img, layout.WithAnnotations(annotations)); err != nil {
		return fmt.Errorf("writing %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// containerdName is ref as containerd and the kubelet spell it: Docker Hub is docker.io
// there (go-containerregistry says index.docker.io), so that a pod's `image: cps-extender:dev`
// finds the imported image.
func containerdName(ref name.Reference) string {
	if ref.Context().RegistryStr() == name.DefaultRegistry {
		return "docker.io/" + ref.Context().RepositoryStr() + strings.TrimPrefix(ref.Name(), ref.Context().Name())
	}
	return ref.Name()
}
