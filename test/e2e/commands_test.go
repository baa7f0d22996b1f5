package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// everynodeCmd runs an everynode command against the sandbox and returns its output
// and whether it exited zero.
func everynodeCmd(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(env.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, exited := err.(*exec.ExitError); !exited {
			t.Fatalf("everynode %s: %v", strings.Join(args, " "), err)
		}
	}
	return string(out), err == nil
}

func mustEverynode(t *testing.T, args ...string) string {
	t.Helper()
	out, ok := everynodeCmd(t, args...)
	if !ok {
		t.Fatalf("everynode %s failed:\n%s", strings.Join(args, " "), out)
	}
	return out
}

// TestCommandsExplainAndRollout drives a DaemonSet with everynode's commands: explain
// names the nodeSelector label that keeps a node out; rollout pause holds an update
// (no pod replaced), resume lets it finish, and rollout status waits for it.
func TestCommandsExplainAndRollout(t *testing.T) {
	ns := newNamespace(t)
	key := "e2e-cmd-" + strings.ToLower(rand.String(5))
	in := newNodes(t, 2, map[string]string{key: "yes"})
	out := newNodes(t, 1, map[string]string{key: "no"})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{key: "yes"}))
	waitRolledOut(t, ns, "agent", 2)

	table := mustEverynode(t, "explain", "agent", "-n", ns)
	for _, node := range in {
		if !strings.Contains(table, node) {
			t.Errorf("explain does not list node %s:\n%s", node, table)
		}
	}
	detail := mustEverynode(t, "explain", "agent", out[0], "-n", ns)
	for _, want := range []string{"NodeSelectorMismatch", fmt.Sprintf("wants %s=yes, the node has %s=no", key, key)} {
		if !strings.Contains(detail, want) {
			t.Errorf("explain of node %s does not say %q:\n%s", out[0], want, detail)
		}
	}

	mustEverynode(t, "rollout", "pause", "agent", "-n", ns)
	ds, err := env.client.AppsV1().DaemonSets(ns).Get(context.Background(), "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Annotations["rollout.everynode.dev/paused"] != "true" {
		t.Fatalf("rollout pause left annotations %v", ds.Annotations)
	}
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/pause:3.9"
	})
	consistently(t, "a paused update replaces no pod", 5*time.Second, samePods(ns, "agent", before))
	waitFor(t, "the Paused condition", func(ctx context.Context) (bool, error) {
		ds, err := env.client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range ds.Status.Conditions {
			if c.Type == "Progressing" && c.Reason == "Paused" && c.Status == v1.ConditionUnknown {
				return true, nil
			}
		}
		return false, nil
	})
	if status, _ := everynodeCmd(t, "rollout", "status", "agent", "-n", ns, "--watch=false"); !strings.Contains(status, "Paused") {
		t.Errorf("rollout status of a paused rollout does not say Paused:\n%s", status)
	}

	mustEverynode(t, "rollout", "resume", "agent", "-n", ns)
	mustEverynode(t, "rollout", "status", "agent", "-n", ns, "--timeout", "90s")
	after := mustDaemonPods(t, ns, "agent")
	for _, node := range in {
		if pods := after[node]; len(pods) != 1 || pods[0].Spec.Containers[0].Image != "registry.k8s.io/pause:3.9" {
			t.Errorf("node %s after the rollout: %d pods, want one of the new image", node, len(pods))
		}
	}
}
