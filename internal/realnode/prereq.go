package realnode

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// InstallCommand installs what a real node needs on Debian or Ubuntu.
const InstallCommand = "apt-get install -y containerd runc containernetworking-plugins"

// hostTools are the programs a real node runs from the host.
var hostTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "ip"}

// cniPlugins are the CNI plugins a real node's pod network uses.
var cniPlugins = []string{"bridge", "host-local", "loopback"}

// cniDirs are where distributions install CNI plugins.
var cniDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// CheckHost reports, in one line, what this machine lacks to run real nodes and how
// to install it; nil when nothing is missing.
func CheckHost() error {
	var missing []string
	if os.Geteuid() != 0 {
		return fmt.Errorf("real nodes need root (they create network namespaces, cgroups and mounts): run the sandbox as root, or without --real-nodes")
	}
	for _, tool := range hostTools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := cniBinDir(); err != nil {
		missing = append(missing, "CNI plugins ("+strings.Join(cniPlugins, ", ")+")")
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s, which this machine lacks: install with `%s`", strings.Join(missing, ", "), InstallCommand)
	}
	if !hasFilesystem("overlay") {
		return fmt.Errorf("real nodes need the overlay filesystem, which this kernel lacks: load it with `modprobe overlay`")
	}
	if !cgroupV1() {
		return fmt.Errorf("real nodes need cgroup v1 hierarchies under /sys/fs/cgroup, which this machine does not mount: real nodes on cgroup v2 are not supported yet")
	}
	return nil
}

// cniBinDir is the first directory holding every CNI plugin a node uses.
func cniBinDir() (string, error) {
	for _, dir := range cniDirs {
		found := 0
		for _, p := range cniPlugins {
			if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
				found++
			}
		}
		if found == len(cniPlugins) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no CNI plugin directory (%s) holds %s", strings.Join(cniDirs, ", "), strings.Join(cniPlugins, ", "))
}

// hasFilesystem tells whether the kernel lists fs in /proc/filesystems.
func hasFilesystem(fs string) bool {
	f, err := os.Open("/proc/filesystems")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 0 && fields[len(fields)-1] == fs {
			return true
		}
	}
	return false
}

// AgentBinary is the everynode-agent binary the node images are built from: the one
// next to this binary, as `make build` leaves it.
func AgentBinary() (string, error) { return besideSelf("everynode-agent", "real nodes need") }

// ControllerBinary is the static controller binary everynode's own image is built
// from, which `make build` writes next to this binary.
func ControllerBinary() (string, error) {
	return besideSelf("everynode-controller", "everynode's image needs")
}

// besideSelf is the path of the file name next to this binary; who says what needs
// it when it is missing.
func besideSelf(name, who string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	path := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s %s next to %s, which is missing: build them with `make build`", who, name, self)
	}
	return path, nil
}
