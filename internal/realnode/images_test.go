package realnode

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readArchive returns the files of an image archive by name.
func readArchive(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	r := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := r.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = content
		if h.Typeflag == tar.TypeDir {
			files[h.Name] = []byte(h.FileInfo().Mode().String())
		}
	}
}

func TestWriteArchive_EachImageRunsTheAgentFromOneSharedLayer(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(binary, []byte("#!agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	var first, second bytes.Buffer
	if err := WriteArchive(&first, binary, AgentPath, Images()); err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(&second, binary, AgentPath, Images()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatal("two archives of the same binary differ: image IDs would change on every start")
	}
	files := readArchive(t, first.Bytes())
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 3 {
		t.Fatalf("manifest has %d images, want 3", len(manifest))
	}
	configs := map[string]bool{}
	for i, m := range manifest {
		want := Images()[i]
		if len(m.RepoTags) != 1 || m.RepoTags[0] != want.Ref {
			t.Errorf("image %d tagged %v, want %s", i, m.RepoTags, want.Ref)
		}
		config := files[m.Config]
		if m.Config != strings.TrimPrefix(digest(config), "sha256:")+".json" {
			t.Errorf("%s: config %s is not named by its digest", want.Ref, m.Config)
		}
		configs[m.Config] = true
		var c struct {
			Config struct{ Entrypoint, Env []string }
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		}
		if err := json.Unmarshal(config, &c); err != nil {
			t.Fatal(err)
		}
		if strings.Join(c.Config.Entrypoint, " ") != strings.Join(want.Entrypoint, " ") || strings.Join(c.Config.Env, " ") != strings.Join(want.Env, " ") {
			t.Errorf("%s runs %v with %v, want %v with %v", want.Ref, c.Config.Entrypoint, c.Config.Env, want.Entrypoint, want.Env)
		}
		if len(m.Layers) != 1 || len(c.RootFS.DiffIDs) != 1 || c.RootFS.DiffIDs[0] != digest(files[m.Layers[0]]) {
			t.Errorf("%s: layers %v do not match diff IDs %v", want.Ref, m.Layers, c.RootFS.DiffIDs)
		}
		layer := readArchive(t, files[m.Layers[0]])
		if string(layer["tmp/"]) != "dtrwxrwxrwx" {
			t.Errorf("%s: layer's /tmp is %q, want a directory anyone may write to", want.Ref, layer["tmp/"])
		}
		if string(layer["everynode-agent"]) != "#!agent" {
			t.Errorf("%s: layer holds %v, want everynode-agent with the binary", want.Ref, layer)
		}
	}
	if len(configs) != 3 {
		t.Errorf("the three images share configs (%d distinct): they would share an image ID", len(configs))
	}
}

func TestWriteArchive_ControllerImageRunsTheControllerAsNonRoot(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "everynode")
	if err := os.WriteFile(binary, []byte("#!controller"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := ControllerImage("0.1.0")
	if img.Ref != "everynode.local/everynode:0.1.0" {
		t.Fatalf("controller image named %s", img.Ref)
	}
	var b bytes.Buffer
	if err := WriteArchive(&b, binary, ControllerPath, []Image{img}); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, b.Bytes())
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest %s: %v", files["manifest.json"], err)
	}
	var c struct {
		Config struct {
			Entrypoint, Cmd []string
			User            string
		}
	}
	if err := json.Unmarshal(files[manifest[0].Config], &c); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(c.Config.Entrypoint, c.Config.Cmd...), " "); got != "/everynode controller" || c.Config.User != "65532:65532" {
		t.Errorf("the controller image runs %q as %q, want \"/everynode controller\" as 65532:65532", got, c.Config.User)
	}
	if layer := readArchive(t, files[manifest[0].Layers[0]]); string(layer["everynode"]) != "#!controller" {
		t.Errorf("the controller image's layer holds %v, want /everynode with the binary", layer)
	}
}
