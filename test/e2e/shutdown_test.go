package e2e

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/nodesim"
	"github.com/everynode/everynode/internal/sandbox"
)

// TestGracefulShutdown: a simulated node shuts down gracefully under a DaemonSet that
// tolerates every taint, as node agents do. Its kubelet stops the daemon pod
// (Failed, DisruptionTarget) and refuses any new one. everynode creates no pod there
// while it shuts down, and replaces the stopped pod once the node is back;
// kube-controller-manager, in the same scenario beside it, keeps recreating pods for
// the kubelet to refuse (counted, to show the scenario is the fight of
// kubernetes/kubernetes#122912).
func TestGracefulShutdown(t *testing.T) {
	creates := sideBySide(t, []string{sandbox.ControllerEveryNode, sandbox.ControllerUpstream}, shutdownCreates)
	if n, ok := creates[sandbox.ControllerEveryNode]; ok && n != 0 {
		t.Errorf("everynode created %d pods on the node while it shut down, want none", n)
	}
	if n, ok := creates[sandbox.ControllerUpstream]; ok && n == 0 {
		t.Errorf("kube-controller-manager created no pod on the node while it shut down: the scenario does not reproduce the fight")
	}
}

// shutdownObserve is how long a node stays shutting down in the scenario.
const shutdownObserve = 20 * time.Second

// shutdownCreates runs the scenario in a sandbox whose DaemonSet controller is
// controller and returns how many pods it created on the node while it shut down.
func shutdownCreates(t *testing.T, controller string) int {
	_, client, nodes := ownSandbox(t, controller, 3)
	ns, node := "shutdown", nodes[2]
	createNamespace(t, client, ns)
	ds := daemonSet(ns, "agent", nil)
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	ctx := context.Background()
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	(&companionCluster{client: client, nodes: nodes}).waitAllOn(t, ns, 1)
	first := livePodUIDs(t, client, ns)[node]

	annotateNode(t, client, node, nodesim.AnnotationShutdown, "true")
	// Stopped: Failed, or already deleted by a controller that replaces failed pods.
	pollUntil(t, "the node's pod stopped by the shutdown", func(ctx context.Context) (bool, error) {
		pod, err := podByUID(ctx, client, ns, string(first))
		return err == nil && (pod == nil || pod.Status.Phase == v1.PodFailed), nil
	})
	counted := countCreatesOn(t, client, ns, node, shutdownObserve)
	t.Logf("%s: %d pods created on %s in the %v it was shutting down", controller, counted, node, shutdownObserve)
	if controller == sandbox.ControllerEveryNode {
		if pod, err := podByUID(ctx, client, ns, string(first)); err != nil || pod == nil {
			t.Errorf("the pod the shutdown stopped is gone (%v): everynode leaves it while the node shuts down", err)
		}
	}

	// The node boots again: it gets a Ready pod back.
	annotateNode(t, client, node, nodesim.AnnotationShutdown, "")
	waitNodesOnRevision(t, client, ns, 1, nodes, 2*time.Minute)
	return counted
}

// podByUID finds the pod of ns with that UID; nil when there is none.
func podByUID(ctx context.Context, client kubernetes.Interface, ns, uid string) (*v1.Pod, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if string(pods.Items[i].UID) == uid {
			return &pods.Items[i], nil
		}
	}
	return nil, nil
}

// countCreatesOn watches the pods of ns for d and counts those created for node
// (bound to it, or pinned to it by the DaemonSet's node affinity).
func countCreatesOn(t *testing.T, client kubernetes.Interface, ns, node string, d time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	n := 0
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*v1.Pod)
		if ev.Type == watch.Added && ok && targetNode(pod) == node {
			n++
		}
	}
	return n
}
