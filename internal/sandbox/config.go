package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/everynode/everynode/internal/nodesim"
	"github.com/everynode/everynode/internal/realnode"
	"github.com/everynode/everynode/internal/sandboxpath"
)

// Which DaemonSet controller the sandbox runs.
const (
	ControllerEveryNode = "everynode"
	ControllerUpstream  = "upstream" // kube-controller-manager's own
	// ControllerCompanion runs kube-controller-manager's own DaemonSet controller and
	// everynode in companion mode beside it: a managed cluster.
	ControllerCompanion = "companion"
	ControllerNone      = "none"
	// ControllerChart installs everynode from its own chart and image as a pod on
	// the real nodes, in full mode: the cluster's own DaemonSet controller is off.
	ControllerChart = "chart"
	// ControllerChartCompanion installs everynode the same way in companion mode,
	// beside kube-controller-manager's own DaemonSet controller.
	ControllerChartCompanion = "chart-companion"
)

// controllers are the values --controller takes.
var controllers = []string{ControllerEveryNode, ControllerUpstream, ControllerCompanion, ControllerNone, ControllerChart, ControllerChartCompanion}

// Config configures a sandbox.
type Config struct {
	DataDir    string
	Port       int
	Controller string
	// ControllerWorkers is the everynode controller's --workers.
	ControllerWorkers int
	// RealNodes is how many real nodes (a kubelet and a containerd each) run beside
	// the simulated ones.
	RealNodes int
	Sim       nodesim.Config
}

// DefaultConfig is a three-node sandbox on port 6443 running everynode.
func DefaultConfig() Config {
	return Config{
		DataDir:           sandboxpath.DefaultDataDir,
		Port:              6443,
		Controller:        ControllerEveryNode,
		ControllerWorkers: 2,
		Sim:               nodesim.DefaultConfig(),
	}
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "Directory holding the sandbox's state (etcd data, certificates, kubeconfig, logs). Restarting on the same directory keeps the cluster.")
	fs.IntVar(&c.Port, "port", c.Port, "Port of the API server on 127.0.0.1.")
	fs.StringVar(&c.Controller, "controller", c.Controller, `DaemonSet controller to run: "everynode", "upstream" (kube-controller-manager's own), "companion" (kube-controller-manager's own with everynode in companion mode beside it, as on a managed cluster), "none", or everynode installed from its own Helm chart and image as a Deployment of 2 replicas on the real nodes (needs --real-nodes): "chart" (full mode) or "chart-companion" (companion mode, beside kube-controller-manager's own).`)
	fs.IntVar(&c.ControllerWorkers, "workers", c.ControllerWorkers, "Workers of the everynode controller.")
	fs.IntVar(&c.RealNodes, "real-nodes", c.RealNodes, fmt.Sprintf("Real nodes to run beside the simulated ones (--nodes): each a kubelet and a containerd from the host, running real containers from images the sandbox builds (everynode.local/agent:1, :2). Needs root and, on Debian or Ubuntu, %q.", realnode.InstallCommand))
	c.Sim.AddFlags(fs)
}

// Validate reports the first invalid setting, saying how to fix it.
func (c *Config) Validate() error {
	switch {
	case c.DataDir == "":
		return fmt.Errorf("--data-dir must not be empty")
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("--port must be between 1 and 65535, got %d", c.Port)
	case !slices.Contains(controllers, c.Controller):
		return fmt.Errorf("--controller must be one of %s, got %q", strings.Join(controllers, ", "), c.Controller)
	case chartMode(c.Controller) != "" && c.RealNodes == 0:
		return fmt.Errorf("--controller %s runs everynode as a pod on a real node: add --real-nodes 1", c.Controller)
	case c.ControllerWorkers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", c.ControllerWorkers)
	case c.RealNodes < 0 || c.RealNodes > realnode.MaxNodes:
		return fmt.Errorf("--real-nodes must be between 0 and %d, got %d", realnode.MaxNodes, c.RealNodes)
	}
	return c.Sim.Validate()
}

// paths are the files of a sandbox's data directory.
type paths struct{ dir string }

func (p paths) join(elem ...string) string { return filepath.Join(append([]string{p.dir}, elem...)...) }
func (p paths) lock() string               { return p.join("sandbox.lock") }
func (p paths) etcd() string               { return p.join("etcd") }
func (p paths) pki(name string) string     { return p.join("pki", name) }
func (p paths) logs(name string) string    { return p.join("logs", name+".log") }
func (p paths) state() string              { return p.join("ports.json") }

// Kubeconfig is where the admin kubeconfig of a sandbox in dir is written.
func Kubeconfig(dir string) string { return sandboxpath.Kubeconfig(dir) }
