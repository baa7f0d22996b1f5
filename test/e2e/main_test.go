// Package e2e runs user scenarios against a sandbox: a real kube-apiserver,
// kube-scheduler and kube-controller-manager with simulated nodes, started once per
// package by TestMain from a freshly built everynode binary. Each scenario works in a
// namespace of its own.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/everynode/everynode/internal/component"
)

// env is the sandbox shared by the package's tests.
var env struct {
	binary     string
	dataDir    string
	kubeconfig string
	client     kubernetes.Interface
	nodes      int
}

const simNodes = 3

func TestMain(m *testing.M) {
	if os.Getenv("EVERYNODE_E2E") == "0" {
		fmt.Println("EVERYNODE_E2E=0: skipping end-to-end tests")
		os.Exit(0)
	}
	stop, err := startSandbox()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// startSandbox builds everynode, starts a sandbox on a free port and waits for it.
func startSandbox() (func(), error) {
	work, err := os.MkdirTemp("", "everynode-e2e-")
	if err != nil {
		return nil, err
	}
	env.binary = filepath.Join(work, "everynode")
	if err := buildEverynode(work); err != nil {
		return nil, err
	}
	port, err := component.FreePort()
	if err != nil {
		return nil, err
	}
	env.dataDir = filepath.Join(work, "sandbox")
	env.nodes = simNodes
	// EVERYNODE_E2E_CONTROLLER=upstream runs the scenarios against
	// kube-controller-manager's own DaemonSet controller, to check the scenarios.
	controller := os.Getenv("EVERYNODE_E2E_CONTROLLER")
	if controller == "" {
		controller = "everynode"
	}
	cmd := exec.Command(env.binary, "sandbox", "--data-dir", env.dataDir, "--port", fmt.Sprint(port), "--controller", controller,
		"--nodes", fmt.Sprint(simNodes), "--pod-ready-delay", "300ms", "--pod-stop-delay", "300ms")
	sandbox, err := startSandboxProcess(cmd, "sandbox: ", 3*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("%w; logs in %s", err, filepath.Join(env.dataDir, "logs"))
	}
	stop := func() {
		sandbox.stop()
		if os.Getenv("EVERYNODE_E2E_KEEP") == "" {
			os.RemoveAll(work)
		}
	}
	env.kubeconfig = filepath.Join(env.dataDir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		stop()
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	env.client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		stop()
		return nil, err
	}
	if err := waitNodesReady(context.Background(), simNodes); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// controllerImageFlags build the controller binary of everynode's image, as `make
// build` and tools/image do: the controller alone, static, stripped.
var controllerImageFlags = []string{"-tags", "nosandbox", "-trimpath", "-ldflags", "-s -w"}

// buildEverynode builds, into dir, what `make build` builds: everynode, reporting the
// Kubernetes version go.mod names, and beside it the static agent real nodes run and
// the static controller binary everynode's own image holds.
func buildEverynode(dir string) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes").Output()
	if err != nil {
		return fmt.Errorf("reading the Kubernetes version from go.mod: %w", err)
	}
	version := strings.TrimSpace(string(out))
	parts := strings.Split(version, ".")
	if len(parts) < 2 {
		return fmt.Errorf("go.mod names k8s.io/kubernetes %q, not a release version", version)
	}
	ldflags := "-X k8s.io/component-base/version.gitVersion=" + version +
		" -X k8s.io/component-base/version.gitMajor=" + strings.TrimPrefix(parts[0], "v") +
		" -X k8s.io/component-base/version.gitMinor=" + parts[1]
	for _, b := range []struct {
		out, pkg string
		env      []string
		flags    []string
	}{
		{"everynode", "github.com/everynode/everynode/cmd/everynode", nil, []string{"-ldflags", ldflags}},
		{"everynode-agent", "github.com/everynode/everynode/cmd/everynode-agent", []string{"CGO_ENABLED=0"}, nil},
		{"everynode-controller", "github.com/everynode/everynode/cmd/everynode", []string{"CGO_ENABLED=0"}, controllerImageFlags},
	} {
		args := append(append([]string{"build"}, b.flags...), "-o", filepath.Join(dir, b.out), b.pkg)
		build := exec.Command("go", args...)
		build.Env = append(os.Environ(), b.env...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building %s: %w", b.out, err)
		}
	}
	return nil
}
