package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// maxBinary is the most the controller's binary in the image may weigh.
const maxBinary = 100 << 20

// TestImage builds the image from this repository and reads it back from the layout:
// one index entry under its tag, a non-root user, an entrypoint running the
// controller, and one layer holding nothing but a binary well under 100 MB that
// runs, knows the controller's verbs and none of the sandbox's.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the test runs the image's linux/amd64 binary")
	}
	dir := filepath.Join(t.TempDir(), "layout")
	const tag = "example.com/everynode:test"
	if err := run("../..", dir, tag, "amd64"); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	index, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 || manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tag {
		t.Fatalf("index holds %+v, want one image tagged %s", manifest.Manifests, tag)
	}
	img, err := index.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != user || strings.HasPrefix(cf.Config.User, "0") || cf.Config.User == "" {
		t.Errorf("image user %q, want %s (non-root)", cf.Config.User, user)
	}
	if got := strings.Join(append(cf.Config.Entrypoint, cf.Config.Cmd...), " "); got != "/everynode controller" {
		t.Errorf("image runs %q, want \"/everynode controller\"", got)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("image platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want one", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	binary := filepath.Join(t.TempDir(), "everynode")
	tr := tar.NewReader(rc)
	var files []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, hdr.Name)
		if hdr.Name != "everynode" {
			continue
		}
		if hdr.Size > maxBinary {
			t.Errorf("the binary weighs %d MiB, want under %d", hdr.Size>>20, maxBinary>>20)
		}
		if hdr.Uid != 0 || hdr.Mode&0o222 != 0 {
			t.Errorf("the binary is owned by %d with mode %o, want root's and not writable", hdr.Uid, hdr.Mode)
		}
		f, err := os.OpenFile(binary, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Logf("the binary weighs %.1f MiB", float64(hdr.Size)/(1<<20))
	}
	if len(files) != 1 || files[0] != "everynode" {
		t.Fatalf("the layer holds %v, want the binary alone (no shell, nothing else)", files)
	}
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("the image's binary does not run: %v\n%s", err, out)
	}
	help := string(out)
	for _, verb := range []string{"controller", "rollout", "explain"} {
		if !strings.Contains(help, "  "+verb+" ") {
			t.Errorf("the image's binary lacks the %s verb:\n%s", verb, help)
		}
	}
	for _, verb := range []string{"sandbox", "kubectl", "bench"} {
		if strings.Contains(help, "  "+verb+" ") {
			t.Errorf("the image's binary carries the %s verb:\n%s", verb, help)
		}
	}
}
