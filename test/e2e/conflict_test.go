package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/bench"
)

// TestFullModeStandsDownBesideTheBuiltInController runs everynode in full mode where
// kube-controller-manager's DaemonSet controller is still on — the misconfiguration
// full mode must survive. The built-in controller answers everynode's probe at start,
// so everynode writes to no DaemonSet: it says why in a ControllerConflict condition,
// a Warning event and one error line naming the fix, and leaves the rollout that
// follows to the built-in controller alone: no pod is created or deleted by
// everynode, no node ever holds two pods, and the budget holds.
func TestFullModeStandsDownBesideTheBuiltInController(t *testing.T) {
	dir, client, nodes := ownSandbox(t, "upstream", 3)
	ns := "conflict"
	createNamespace(t, client, ns)
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), daemonSet(ns, "agent", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &companionCluster{dir: dir, client: client, nodes: nodes}
	c.waitAllOn(t, ns, 1)

	proxyKubeconfig := filepath.Join(filepath.Dir(dir), "everynode.kubeconfig")
	proxy, err := bench.StartProxy(dir, proxyKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	ctrl := &controllerProcess{kubeconfig: proxyKubeconfig, logs: filepath.Join(dir, "logs"), args: []string{"--mode", "full",
		// A loaded machine's kube-controller-manager may answer the probe later than
		// the default 3s allows.
		"--conflict-probe-timeout=15s"}}
	start := time.Now()
	ctrl.start(t)
	t.Cleanup(ctrl.kill)
	w := watchInvariantsOf(t, client, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	var cond *apps.DaemonSetCondition
	pollUntil(t, "the ControllerConflict condition", func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for i := range ds.Status.Conditions {
			if ds.Status.Conditions[i].Type == "ControllerConflict" {
				cond = &ds.Status.Conditions[i]
			}
		}
		return cond != nil, nil
	})
	noticed := time.Since(start)
	if noticed > time.Minute {
		t.Errorf("everynode noticed the other controller after %v, want within a minute", noticed)
	}
	for _, want := range []string{`"kube-controller-manager"`, "--controllers=*,-daemonset-controller", "--mode companion"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("the condition's message %q does not say %q", cond.Message, want)
		}
	}
	if ev := waitEventOf(t, client, ns, "agent", "ControllerConflict"); ev.Type != v1.EventTypeWarning {
		t.Errorf("ControllerConflict event of type %s, want Warning", ev.Type)
	}

	// The rollout that follows is the built-in controller's alone.
	before := proxy.Snapshot()
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	c.waitAllOn(t, ns, 2)
	w.stop(t)
	all := proxy.Snapshot()
	if d, cr := all.Get("delete", "pods").Requests, all.Get("create", "pods").Requests; d != 0 || cr != 0 {
		t.Errorf("everynode deleted %d and created %d pods beside the built-in controller", d, cr)
	}
	after := writesOf(proxy.Snapshot().Sub(before))
	if after.all != 0 || after.refused != 0 {
		t.Errorf("everynode wrote %+v after standing down", after)
	}
	logs, err := os.ReadFile(filepath.Join(dir, "logs", "everynode-controller-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(logs), "Another DaemonSet controller is writing"); n != 1 {
		t.Errorf("everynode logged the conflict %d times, want one error line", n)
	}
	t.Logf("noticed after %v: %s", noticed.Round(time.Millisecond), cond.Message)
}
