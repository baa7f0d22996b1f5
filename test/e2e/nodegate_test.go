package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/nodesim"
	"github.com/everynode/everynode/internal/sandbox"
)

const (
	gateKey      = "e2e.everynode.dev/agents-not-ready"
	gateMinReady = 3
)

// TestNodeGate: new nodes come up tainted with a gate key; the DaemonSet "agent"
// gates on it (everynode.dev/node-gate, minReadySeconds 3). In full mode and in
// companion mode (where kube-controller-manager places the pods and everynode only
// runs the gate):
//   - on the two nodes where the agent's pod becomes Ready, the taint goes, and at no
//     moment before that pod has been Ready for minReadySeconds (a watch on the nodes
//     checks each taint removal against the pod as it is then);
//   - on a node that cannot pull the agent's image the taint stays, and explain
//     node/NAME says the agent's pod is not Ready and why;
//   - on a node the agent does not select the taint stays, and explain says no
//     gating DaemonSet should run there;
//   - a plain DaemonSet's pods run on the opened nodes only;
//   - a gating DaemonSet that does not tolerate its own key gets the NodeGateFailure
//     condition and a Warning event.
func TestNodeGate(t *testing.T) {
	sideBySide(t, []string{sandbox.ControllerEveryNode, sandbox.ControllerCompanion}, nodeGateScenario)
}

func nodeGateScenario(t *testing.T, mode string) struct{} {
	dir, client, _ := ownSandbox(t, mode, 1)
	ctx := context.Background()
	ns := "gate"
	createNamespace(t, client, ns)
	pool := map[string]string{"e2e/pool": ns}

	agent := daemonSet(ns, "agent", map[string]string{"e2e/pool": ns, "e2e/agent": "yes"})
	agent.Annotations = map[string]string{daemon.AnnotationNodeGate: gateKey}
	agent.Spec.MinReadySeconds = gateMinReady
	agent.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: gateKey, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, agent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, daemonSet(ns, "app", pool), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	image := agent.Spec.Template.Spec.Containers[0].Image
	opened := []string{"gate-ok-0", "gate-ok-1"}
	pull, unselected := "gate-pull", "gate-unselected"
	w := watchGateTaints(t, client, ns, mode)
	for _, name := range append(opened, pull, unselected) {
		labels := map[string]string{nodesim.LabelSimulated: "true", v1.LabelHostname: name, "e2e/pool": ns}
		if name != unselected {
			labels["e2e/agent"] = "yes"
		}
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: gateKey, Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
		if name == pull {
			node.Annotations = map[string]string{nodesim.AnnotationUnpullable: image}
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	pollUntil(t, "the gate taint gone from "+strings.Join(opened, " and "), func(ctx context.Context) (bool, error) {
		for _, name := range opened {
			if n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil || gateTainted(n) {
				return false, nil
			}
		}
		return true, nil
	})
	pollUntil(t, "the plain DaemonSet's pods Ready on the opened nodes", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=app"})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range pods.Items {
			if daemon.IsReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready == len(opened), nil
	})
	// The closed nodes stay closed: the agent on the pull node keeps failing, and
	// nothing gates the unselected node.
	time.Sleep(5 * time.Second)
	for _, name := range []string{pull, unselected} {
		if n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil || !gateTainted(n) {
			t.Errorf("%s: node %s lost its gate taint (err %v)", mode, name, err)
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	pollUntil(t, "explain node/"+pull+" to say the agent's pod cannot pull its image", func(ctx context.Context) (bool, error) {
		out := explainNodeOf(t, kubeconfig, pull)
		return strings.Contains(out, "closed [WaitingForGatingPods]") && strings.Contains(out, "is not Ready (") &&
			strings.Contains(out, "Pull"), nil
	})
	if out := explainNodeOf(t, kubeconfig, unselected); !strings.Contains(out, "closed [NoGatingDaemonSet]") || !strings.Contains(out, "gate/agent: should not run here") {
		t.Errorf("%s: explain node/%s:\n%s\nwant NoGatingDaemonSet, the agent not selecting it", mode, unselected, out)
	}
	t.Logf("%s: explain node/%s:\n%s", mode, pull, explainNodeOf(t, kubeconfig, pull))
	for _, name := range []string{pull, unselected} {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=app", FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
		if err != nil || len(pods.Items) > 0 {
			t.Errorf("%s: the plain DaemonSet has pods on the gated node %s (%v)", mode, name, err)
		}
	}

	blind := daemonSet(ns, "blind", pool)
	blind.Annotations = map[string]string{daemon.AnnotationNodeGate: gateKey}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, blind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the NodeGateFailure condition on a DaemonSet that does not tolerate its gate", func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "blind", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := daemon.Condition(ds.Status.Conditions, daemon.ConditionNodeGate)
		return c != nil && c.Status == v1.ConditionTrue && c.Reason == string(daemon.ReasonNodeGateInvalid), nil
	})
	e := waitEventOf(t, client, ns, "blind", string(daemon.ReasonNodeGateInvalid))
	if e.Type != v1.EventTypeWarning || !strings.Contains(e.Message, "add the toleration") {
		t.Errorf("%s: event %s %q, want a Warning saying the toleration to add", mode, e.Type, e.Message)
	}
	for _, v := range w.stop() {
		t.Errorf("%s: %s", mode, v)
	}
	return struct{}{}
}

func gateTainted(n *v1.Node) bool { return len(daemon.GateTaints(n, gateKey)) > 0 }

func explainNodeOf(t *testing.T, kubeconfig, node string) string {
	t.Helper()
	cmd := exec.Command(env.binary, "explain", "node/"+node)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("everynode explain node/%s: %v\n%s", node, err, out)
	}
	return string(out)
}

// gateTaintWatch watches the nodes for the gate taint's removal and, at each, reads
// the agent's pods on the node: the removal is a violation unless one of them has
// been Ready for minReadySeconds by then (or the node is not the agent's).
type gateTaintWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	bad    []string
}

// Its violations are reported when the test ends, whether or not it failed before.
func watchGateTaints(t *testing.T, client kubernetes.Interface, ns, mode string) *gateTaintWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wi, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: "e2e/pool=" + ns})
	if err != nil {
		t.Fatal(err)
	}
	g := &gateTaintWatch{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() {
		for _, v := range g.stop() {
			t.Errorf("%s: %s", mode, v)
		}
	})
	tainted := map[string]bool{}
	go func() {
		defer close(g.done)
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			n, ok := ev.Object.(*v1.Node)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := gateTainted(n)
			if was := tainted[n.Name]; was && !now {
				if why := g.removalTooEarly(ctx, client, ns, n); why != "" {
					g.mu.Lock()
					g.bad = append(g.bad, why)
					g.mu.Unlock()
				}
			}
			tainted[n.Name] = now
		}
	}()
	return g
}

func (g *gateTaintWatch) removalTooEarly(ctx context.Context, client kubernetes.Interface, ns string, n *v1.Node) string {
	if n.Labels["e2e/agent"] != "yes" {
		return fmt.Sprintf("the gate taint went from node %s, which the agent does not select", n.Name)
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=agent",
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
	if err != nil {
		return fmt.Sprintf("reading the agent's pods on %s: %v", n.Name, err)
	}
	for i := range pods.Items {
		if daemon.IsAvailable(&pods.Items[i], gateMinReady, time.Now()) {
			return ""
		}
	}
	return fmt.Sprintf("the gate taint went from node %s before the agent's pod there had been Ready for %ds (pods %d)", n.Name, gateMinReady, len(pods.Items))
}

// stop ends the watch and returns the violations seen, once: a second stop
// returns none.
func (g *gateTaintWatch) stop() []string {
	g.cancel()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	bad := g.bad
	g.bad = nil
	return bad
}
