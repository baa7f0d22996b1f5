package e2e

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/everynode/everynode/internal/nodesim"
)

// TestNodeReadinessGatedOnTheCNIAgent plays a real node's start: a node whose
// readiness waits for its CNI agent (sim.everynode.dev/ready-requires) registers
// NotReady, and the node lifecycle controller taints it not-ready. A plain
// DaemonSet's pod does not run there; a CNI-like DaemonSet's, tolerating every
// taint, does.
// Once that pod runs the node turns Ready, the taint is lifted, and the plain
// DaemonSet's pod follows.
func TestNodeReadinessGatedOnTheCNIAgent(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	name := "e2e-node-" + rand.String(5)
	labels := map[string]string{nodesim.LabelSimulated: "true", v1.LabelHostname: name, "e2e/pool": ns}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{nodesim.AnnotationReadyRequires: "app=cni"}}}
	if _, err := env.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	notReady := v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}
	waitNodeTaints(t, name, true, notReady)

	t.Cleanup(func() {
		if t.Failed() {
			n, _ := env.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if n != nil {
				t.Logf("node taints %+v conditions %+v", n.Spec.Taints, n.Status.Conditions)
			}
			for _, ds := range []string{"plain", "cni"} {
				for node, pods := range mustDaemonPods(t, ns, ds) {
					for _, p := range pods {
						t.Logf("%s: node %s pod %s %s created %v", ds, node, p.Name, p.Status.Phase, p.CreationTimestamp)
					}
				}
			}
		}
	})
	// The taint is in the API server; give the controller's and the scheduler's
	// caches a moment to show it too, or a pod decided on the untainted node
	// registered a moment before could be created and bound.
	time.Sleep(time.Second)
	plain := createDaemonSet(t, daemonSet(ns, "plain", pool))
	// everynode places no pod there (a pod created before its cache saw the taint
	// is only never scheduled): none is bound while the node waits.
	consistently(t, "no plain pod bound to the node waiting for its network", 3*time.Second, func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, plain.Name)
		if err != nil {
			return false, err
		}
		for _, p := range byNode[name] {
			if p.Spec.NodeName != "" {
				return false, nil
			}
		}
		return true, nil
	})

	cni := daemonSet(ns, "cni", pool)
	cni.Spec.Template.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	createDaemonSet(t, cni)
	waitFor(t, "the node Ready once the CNI pod runs", func(ctx context.Context) (bool, error) {
		n, err := env.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodesim.Usable(n), nil
	})
	waitFor(t, "the plain DaemonSet's pod Running on the node", func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, plain.Name)
		if err != nil {
			return false, err
		}
		pods := byNode[name]
		return len(pods) == 1 && pods[0].Status.Phase == v1.PodRunning, nil
	})
	if pods := mustDaemonPods(t, ns, "cni")[name]; len(pods) != 1 {
		t.Errorf("the node has %d CNI pods, want 1", len(pods))
	}
}
