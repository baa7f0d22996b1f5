package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/component"
)

// TestSandboxRelativeDataDir starts a sandbox with a relative --data-dir that
// points outside its working directory, then uses its kubeconfig from a third
// directory: every component must come up (the scheduler binds the pod, the node
// lifecycle controller lifts the not-ready taint) and stay up, and kubectl must work
// from anywhere.
func TestSandboxRelativeDataDir(t *testing.T) {
	root := t.TempDir()
	startDir := filepath.Join(root, "start")
	otherDir := filepath.Join(root, "other", "place")
	for _, d := range []string{startDir, otherDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port, err := component.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(env.binary, "sandbox", "--data-dir", "../state", "--port", fmt.Sprint(port), "--nodes", "1",
		"--pod-ready-delay", "300ms")
	cmd.Dir = startDir
	sb, err := startSandboxProcess(cmd, "relative sandbox: ", 3*time.Minute)
	if err != nil {
		t.Fatalf("%v; logs in %s", err, filepath.Join(root, "state", "logs"))
	}
	t.Cleanup(sb.stop)

	kubeconfig := filepath.Join(root, "state", "kubeconfig")
	example, err := filepath.Abs(filepath.Join(repoRoot, "docs", "examples", "node-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"kubectl", "--kubeconfig", kubeconfig, "apply", "-f", example},
		{"kubectl", "--kubeconfig", kubeconfig, "rollout", "status", "daemonset/node-agent", "--timeout=2m"},
		{"rollout", "status", "node-agent", "--kubeconfig", kubeconfig},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		c := exec.CommandContext(ctx, env.binary, args...)
		c.Dir = otherDir
		out, err := c.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("everynode %v from another directory: %v\n%s", args, err, out)
		}
	}
	out, err := exec.Command(env.binary, "kubectl", "--kubeconfig", kubeconfig, "get", "pods", "-o", "wide").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get pods: %v\n%s", err, out)
	}
	nodes, err := kubeconfigClient(t, kubeconfig).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("the sandbox has %d nodes, want the 1 of --nodes", len(nodes.Items))
	}
	if !listsRunningPodOn(string(out), nodes.Items[0].Name) {
		t.Errorf("no Running pod on %s:\n%s", nodes.Items[0].Name, out)
	}
	// The components read the kubeconfig too: a few seconds on, all still run.
	time.Sleep(3 * time.Second)
	if !sb.alive() {
		t.Fatalf("the sandbox exited; logs in %s", filepath.Join(root, "state", "logs"))
	}
}
