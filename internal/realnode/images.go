package realnode

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Image is an image the sandbox builds offline and imports into every real node's
// containerd: no registry is reachable from a sandbox.
type Image struct {
	// Ref is the image's name, as pods name it (everynode.local/agent:1).
	Ref string
	// Entrypoint and Cmd are the command it runs, Env its environment and User the
	// user it runs as (empty: root).
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
}

// The images every real node holds. The agent's share one layer, the agent binary at
// /everynode-agent; they differ in their configs, so each has its own image ID.
const (
	PauseImage  = "everynode.local/pause:1"
	AgentImage1 = "everynode.local/agent:1"
	AgentImage2 = "everynode.local/agent:2"
	// ControllerRepository is the repository of everynode's own image, built from
	// the static controller binary; its tag is the chart's appVersion.
	ControllerRepository = "everynode.local/everynode"
)

// Where the binaries live in the images.
const (
	AgentPath      = "/everynode-agent"
	ControllerPath = "/everynode"
)

// Images are the images built from the agent binary.
func Images() []Image {
	return []Image{
		{Ref: PauseImage, Entrypoint: []string{AgentPath, "pause"}},
		{Ref: AgentImage1, Entrypoint: []string{AgentPath}, Env: []string{"AGENT_VERSION=1"}},
		{Ref: AgentImage2, Entrypoint: []string{AgentPath}, Env: []string{"AGENT_VERSION=2"}},
	}
}

// ControllerImage is everynode's controller image tagged tag, as the project's image
// builder (tools/image) makes it: the controller as a non-root user, no shell.
func ControllerImage(tag string) Image {
	return Image{Ref: ControllerRepository + ":" + tag, Entrypoint: []string{ControllerPath}, Cmd: []string{"controller"}, User: "65532:65532"}
}

// imageEpoch is the time recorded in every image, so that the same binary makes the
// same image IDs on every start.
var imageEpoch = time.Unix(0, 0).UTC()

// WriteArchive writes images, each with one layer holding the file at binary as
// path, as one image archive in the format `docker save` writes (a manifest.json
// naming each image's config and layers), which `ctr images import` reads.
func WriteArchive(w io.Writer, binary, path string, images []Image) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading the binary of the node images: %w", err)
	}
	layer, err := layerTar(strings.TrimPrefix(path, "/"), bin)
	if err != nil {
		return err
	}
	layerDigest := digest(layer)
	layerName := hex.EncodeToString(sha256Sum(layer)) + "/layer.tar"
	out := tar.NewWriter(w)
	if err := addFile(out, layerName, layer); err != nil {
		return err
	}
	type entry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifest []entry
	for _, img := range images {
		config, err := imageConfig(img, layerDigest)
		if err != nil {
			return err
		}
		name := hex.EncodeToString(sha256Sum(config)) + ".json"
		if err := addFile(out, name, config); err != nil {
			return err
		}
		manifest = append(manifest, entry{Config: name, RepoTags: []string{img.Ref}, Layers: []string{layerName}})
	}
	m, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := addFile(out, "manifest.json", m); err != nil {
		return err
	}
	return out.Close()
}

// imageConfig is an image's config: what it runs, over the one layer.
func imageConfig(img Image, layerDigest string) ([]byte, error) {
	type runConfig struct {
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd,omitempty"`
		Env        []string `json:"Env,omitempty"`
		User       string   `json:"User,omitempty"`
	}
	type rootfs struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	}
	return json.Marshal(struct {
		Architecture string    `json:"architecture"`
		OS           string    `json:"os"`
		Created      time.Time `json:"created"`
		Config       runConfig `json:"config"`
		RootFS       rootfs    `json:"rootfs"`
	}{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      imageEpoch,
		Config:       runConfig{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env, User: img.User},
		RootFS:       rootfs{Type: "layers", DiffIDs: []string{layerDigest}},
	})
}

// layerTar is a layer holding one executable file at name, and /tmp, where the
// agent writes its ready file.
func layerTar(name string, content []byte) ([]byte, error) {
	var b bytes.Buffer
	t := tar.NewWriter(&b)
	if err := t.WriteHeader(&tar.Header{Name: "tmp/", Mode: 0o1777, ModTime: imageEpoch, Typeflag: tar.TypeDir}); err != nil {
		return nil, err
	}
	if err := t.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), ModTime: imageEpoch, Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := t.Write(content); err != nil {
		return nil, err
	}
	if err := t.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func addFile(t *tar.Writer, name string, content []byte) error {
	if err := t.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: imageEpoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := t.Write(content)
	return err
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func digest(b []byte) string { return "sha256:" + hex.EncodeToString(sha256Sum(b)) }
