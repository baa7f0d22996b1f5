package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubectlPlugin runs everynode as a kubectl plugin, the way the README says to
// install it: a link named kubectl-everynode on PATH makes `kubectl everynode <verb>`
// run everynode's verbs against kubectl's cluster.
func TestKubectlPlugin(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	newNodes(t, 1, pool)
	createDaemonSet(t, daemonSet(ns, "agent", pool))
	waitRolledOut(t, ns, "agent", 1)

	bin := t.TempDir()
	if err := os.Symlink(env.binary, filepath.Join(bin, "kubectl-everynode")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(env.binary, "kubectl", "everynode", "rollout", "status", "agent", "-n", ns, "--watch=false")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl everynode rollout status: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "daemonset/agent: 1 of 1 updated, 1 of 1 available") {
		t.Errorf("kubectl everynode rollout status said:\n%s", out)
	}
}
