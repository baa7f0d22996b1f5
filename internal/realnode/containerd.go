package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/everynode/everynode/internal/component"
)

// nodeRunDir is the node's /run: a tmpfs of its own in its mount namespace, as a
// machine's /run is its own and empty at boot. It holds what lives only while the
// node runs: containerd's state and sockets, the pods' network namespaces, the
// kubelet's root directory (whose plugin sockets need a path shorter than a unix
// socket's 108 bytes, which a data dir may not give) and the pods' IP allocations.
const nodeRunDir = "/run"

// containerdRunDir is containerd's state directory and the home of its sockets, at
// their defaults.
const containerdRunDir = nodeRunDir + "/containerd"

// kubeletRootDir is the kubelet's root directory.
const kubeletRootDir = nodeRunDir + "/kubelet"

// cniIPAMDir is where the pod network's address allocations are kept.
const cniIPAMDir = nodeRunDir + "/cni-ipam"

// containerdSocket is where containerd serves CRI, in the node's mount namespace.
const containerdSocket = containerdRunDir + "/containerd.sock"

// containerdConfig is containerd's configuration for a node: its content under the
// node's directory, the CRI plugin with the overlay snapshotter and runc, the pause
// image the sandbox imports, and the node's CNI network.
//
// restrict_oom_score_adj keeps containers' OOM score adjustments at or above
// containerd's own, as when it runs unprivileged: without CAP_SYS_RESOURCE (which
// sandboxes in containers often lack) runc cannot lower a score and every container
// would fail to start.
func containerdConfig(root, cniBin, cniConf string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version = 2\nroot = %q\nstate = %q\n", root, containerdRunDir)
	b.WriteString(`disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]` + "\n")
	fmt.Fprintf(&b, "[grpc]\n  address = %q\n", containerdSocket)
	fmt.Fprintf(&b, "[ttrpc]\n  address = %q\n", containerdRunDir+"/containerd-ttrpc.sock")
	b.WriteString("[debug]\n  address = \"\"\n[metrics]\n  address = \"\"\n")
	b.WriteString("[plugins.\"io.containerd.grpc.v1.cri\"]\n")
	fmt.Fprintf(&b, "  sandbox_image = %q\n  restrict_oom_score_adj = true\n", PauseImage)
	b.WriteString("  [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n    snapshotter = \"overlayfs\"\n    default_runtime_name = \"runc\"\n")
	b.WriteString("    [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n      runtime_type = \"io.containerd.runc.v2\"\n")
	fmt.Fprintf(&b, "  [plugins.\"io.containerd.grpc.v1.cri\".cni]\n    bin_dir = %q\n    conf_dir = %q\n", cniBin, cniConf)
	return b.String()
}

// cniConfig is the node's pod network: a bridge in the node's namespace with
// addresses from a /24 of its own, and a default route to the node. Pods reach the
// node (and the API server at the kubernetes Service's IP on it) and each other;
// the node has no route on, so nothing else.
func cniConfig(index int, ipamDir string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"everynode","plugins":[`+
		`{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.%d.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":%q}},`+
		`{"type":"loopback"}]}`, index, ipamDir)
}

// startContainerd writes the node's containerd and CNI configuration and starts
// containerd in a new mount namespace, inside the node's network namespace and
// runtime cgroup.
func (n *Node) startContainerd(ctx context.Context) error {
	cniBin, err := cniBinDir()
	if err != nil {
		return err
	}
	cniConf := n.path("cni", "net.d")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-everynode.conflist"), []byte(cniConfig(n.index, cniIPAMDir)), 0o644); err != nil {
		return err
	}
	config := n.path("containerd.toml")
	if err := os.WriteFile(config, []byte(containerdConfig(n.path("containerd"), cniBin, cniConf)), 0o644); err != nil {
		return err
	}
	self, err := component.Self()
	if err != nil {
		return err
	}
	cmd := exec.Command("nsenter", "--net="+n.link.NamespacePath(), "--",
		self, component.Command, InitCommand, "--cgroup", n.cgroup("runtime"),
		"--tmpfs", nodeRunDir, "--",
		"containerd", "--config", config)
	// Mounts made by containerd, kubelet and the pods stay in this namespace, which
	// ends with its last process. The node's processes have a process group of their
	// own: Ctrl-C stops the sandbox, which stops its nodes in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true}
	c, err := component.StartCommand(ctx, n.Name+"/containerd", cmd, n.log("containerd"))
	if err != nil {
		return err
	}
	n.containerd = c
	return n.waitContainerd(ctx)
}

// inNode runs a program in the node's mount and network namespaces.
func (n *Node) inNode(ctx context.Context, program string, args ...string) error {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(n.containerd.Pid()), "--mount", "--net", "--", program}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", program, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// waitContainerd waits until containerd answers on its socket.
func (n *Node) waitContainerd(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-n.containerd.Exited():
			return fmt.Errorf("containerd of %s exited (%v); see %s", n.Name, n.containerd.Err(), n.log("containerd"))
		default:
		}
		err := n.inNode(ctx, "ctr", "--address", containerdSocket, "version")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("containerd of %s did not answer within 30s: %w", n.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// importImages imports the image archive into containerd's k8s.io namespace, where
// the CRI plugin finds images.
func (n *Node) importImages(ctx context.Context, archive string) error {
	if err := n.inNode(ctx, "ctr", "--address", containerdSocket, "--namespace", "k8s.io", "images", "import", archive); err != nil {
		return fmt.Errorf("importing the node images into %s: %w", n.Name, err)
	}
	return nil
}
