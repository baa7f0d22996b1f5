package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/component"
)

// TestAPIServerRestartMidRollout stops the whole control plane mid-rollout — the
// sandbox, SIGTERM, waited for — and starts it again on the same data directory and
// port, while `everynode controller` keeps running in its own process: the
// controller reconnects and finishes the rollout. A pod watch follows the pods
// across the restart (listing them again when its resourceVersion has expired) and
// checks in every state it sees that no more nodes than the budget lack a Ready pod,
// no node holds two live pods and no node gets a second pod of a revision it already
// ran; at the end every node runs one pod of the new revision and there is one
// ControllerRevision per template.
func TestAPIServerRestartMidRollout(t *testing.T) {
	const nodeCount = 5
	dir := filepath.Join(t.TempDir(), "sandbox")
	port, err := component.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	stop, client := runSandboxNodes(t, dir, port, "none", nodeCount)
	nodes := waitSandboxNodes(t, client, nodeCount)
	ctrl := &controllerProcess{kubeconfig: filepath.Join(dir, "kubeconfig"), logs: filepath.Join(dir, "logs"), args: []string{"--conflict-probe-timeout=0"}}
	ctrl.start(t)
	t.Cleanup(ctrl.kill)

	ns := "restart"
	createNamespace(t, client, ns)
	ds := daemonSet(ns, "agent", nil)
	// One node at a time, each new pod available 3s after it is Ready: the rollout
	// takes well over 15s, and the restart lands in it.
	ds.Spec.MinReadySeconds = 3
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &companionCluster{dir: dir, client: client, nodes: nodes}
	c.waitAllOn(t, ns, 1)

	w := watchInvariantsRelisting(t, client, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1), noRevisionTwiceOnANode())
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	pollUntil(t, "the first node on the new revision", func(ctx context.Context) (bool, error) {
		return rolledOutNodes(ctx, client, ns, 2) >= 1, nil
	})
	stopped := time.Now()
	stop()
	left := nodeCount - 1
	t.Logf("sandbox stopped mid-rollout; starting it again on %s, port %d", dir, port)
	runSandboxNodes(t, dir, port, "none", nodeCount)
	t.Logf("sandbox ready again %v after it was stopped", time.Since(stopped).Round(100*time.Millisecond))
	if got := waitSandboxNodes(t, client, nodeCount); len(got) != len(nodes) {
		t.Fatalf("after the restart the sandbox has nodes %v, want %v", got, nodes)
	}
	if done := rolledOutNodes(context.Background(), client, ns, 2); done >= nodeCount {
		t.Fatalf("the rollout finished before the control plane was back (%d of %d nodes): the restart did not land mid-rollout", done, nodeCount)
	} else {
		left = nodeCount - done
	}

	c.waitAllOnWithin(t, ns, 2, 5*time.Minute)
	w.stop(t)
	c.checkNothingDuplicated(t, ns, 2, 2)
	if !running(ctrl.cmd.Process.Pid) {
		t.Errorf("the controller process exited; it must ride out the restart (logs in %s)", ctrl.logs)
	}
	t.Logf("%d of %d nodes were left to update when the control plane came back; the controller finished them", left, nodeCount)
}

// running reports whether the child process pid is alive: not gone, and not a
// zombie waiting to be reaped.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	_, rest, _ := strings.Cut(string(stat), ") ")
	return rest != "" && rest[0] != 'Z'
}
