package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/nodesim"
	"github.com/everynode/everynode/internal/sandbox"
)

// TestSickNodes: six nodes, two of them NotReady for longer than the grace (one
// reporting NotReady, one whose kubelet is down), then a new image, in full mode and
// in companion mode. A DaemonSet with
// rollout.everynode.dev/sick-nodes: exempt (grace 10s, maxUnavailable 1) updates
// the four healthy nodes within four minutes, never more than one of them without a
// Ready pod and never two live pods on a node, and leaves the sick nodes' pods as
// they are; once the nodes recover, it updates them too. Beside it, in the same
// cluster, a DaemonSet without the annotation: in full mode everynode rolls it out,
// in companion mode kube-controller-manager does — and both must end in the same
// state (parity: without the annotation, everynode behaves as upstream).
func TestSickNodes(t *testing.T) {
	// The two sandboxes run side by side: most of each run is waiting for the node
	// lifecycle controller to give up on the stopped kubelet.
	outcomes := sideBySide(t, []string{sandbox.ControllerEveryNode, sandbox.ControllerCompanion}, sickNodesRollout)
	full, upstream := outcomes[sandbox.ControllerEveryNode], outcomes[sandbox.ControllerCompanion]
	if full != "" && upstream != "" && full != upstream {
		t.Errorf("without sick-nodes, everynode's rollout ended as\n%s\nkube-controller-manager's as\n%s", full, upstream)
	}
}

const (
	sickExempt = "sick-exempt"
	sickCount  = "sick-count"
)

// sickNodesRollout runs the scenario in a sandbox whose controller is mode and
// returns how the DaemonSet without the annotation ended, node by node.
func sickNodesRollout(t *testing.T, mode string) string {
	_, client, nodes := ownSandbox(t, mode, 6)
	healthy, ill := nodes[:4], nodes[4:]
	ctx := context.Background()
	for _, ns := range []string{sickExempt, sickCount} {
		createNamespace(t, client, ns)
		ds := daemonSet(ns, "agent", nil)
		if ns == sickExempt {
			ds.Annotations = map[string]string{daemon.AnnotationSickNodes: daemon.SickNodesExempt, daemon.AnnotationSickNodeGrace: "10s"}
			if mode == sandbox.ControllerCompanion {
				ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
				ds.Annotations[daemon.AnnotationMaxUnavailable] = "1"
			}
		}
		if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := &companionCluster{client: client, nodes: nodes}
	c.waitAllOn(t, sickExempt, 1)
	c.waitAllOn(t, sickCount, 1)
	countBefore := livePodUIDs(t, client, sickCount)

	// Two nodes turn NotReady, and stay so for longer than the grace: one whose
	// kubelet reports NotReady (its runtime or network down), and one whose kubelet
	// is down, which the node lifecycle controller marks Unknown and unreachable
	// after its grace period: a pod deleted there stays terminating.
	annotateNode(t, client, ill[0], nodesim.AnnotationReady, "false")
	annotateNode(t, client, ill[1], nodesim.AnnotationKubelet, "stopped")
	notReadySince := waitNodesNotReady(t, client, ill)
	time.Sleep(time.Until(notReadySince.Add(12 * time.Second)))
	sickPods := livePodUIDs(t, client, sickExempt)

	w := watchInvariantsOf(t, client, sickExempt, "app=agent", maxNodesWithoutReadyPod(healthy, 1), maxLivePodsPerNode(1))
	start := time.Now()
	for _, ns := range []string{sickExempt, sickCount} {
		mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	}
	waitNodesOnRevision(t, client, sickExempt, 2, healthy, 4*time.Minute)
	t.Logf("%s: the %d healthy nodes run revision 2 %v after the template changed", mode, len(healthy), time.Since(start).Round(time.Second))
	for node, uid := range livePodUIDs(t, client, sickExempt) {
		if slices.Contains(ill, node) && uid != sickPods[node] {
			t.Errorf("the pod on sick node %s was replaced (%s, was %s): sick-nodes: exempt leaves it alone", node, uid, sickPods[node])
		}
	}
	for _, node := range ill {
		if _, ok := livePodUIDs(t, client, sickExempt)[node]; !ok {
			t.Errorf("sick node %s lost its pod: sick-nodes: exempt leaves it alone", node)
		}
	}
	cond := progressingIn(t, client, sickExempt)
	if cond == nil || daemon.Reason(cond.Reason) != daemon.ReasonSickNodesLeft || !strings.Contains(cond.Message, ill[0]) {
		t.Errorf("Progressing with only sick nodes left = %+v, want %s naming them", cond, daemon.ReasonSickNodesLeft)
	}
	outcome := settledOutcome(t, client, sickCount, nodes, countBefore)
	t.Logf("%s: without the annotation the rollout ended as:\n%s", mode, outcome)

	// The sick nodes recover: the update reaches them.
	annotateNode(t, client, ill[0], nodesim.AnnotationReady, "")
	annotateNode(t, client, ill[1], nodesim.AnnotationKubelet, "")
	waitNodesOnRevision(t, client, sickExempt, 2, nodes, 2*time.Minute)
	if got := livePodUIDs(t, client, sickExempt); got[ill[0]] == sickPods[ill[0]] || got[ill[1]] == sickPods[ill[1]] {
		t.Errorf("recovered nodes kept their old pods: %v", got)
	}
	w.stop(t)
	return outcome
}

// annotateNode sets (or, with value "", removes) an annotation of a node.
func annotateNode(t *testing.T, client kubernetes.Interface, node, key, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, v)
	if _, err := client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitNodesNotReady waits until every node named is NotReady and returns when the
// last of them turned so.
func waitNodesNotReady(t *testing.T, client kubernetes.Interface, names []string) time.Time {
	t.Helper()
	var last time.Time
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = time.Time{}
		for _, name := range names {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			ready := false
			for _, c := range node.Status.Conditions {
				if c.Type == v1.NodeReady {
					ready = c.Status == v1.ConditionTrue
					if c.LastTransitionTime.After(last) {
						last = c.LastTransitionTime.Time
					}
				}
			}
			if ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for nodes %v to be NotReady: %v", names, err)
	}
	return last
}

// livePodUIDs maps each node to the UID of the live pod on it in ns.
func livePodUIDs(t *testing.T, client kubernetes.Interface, ns string) map[string]types.UID {
	t.Helper()
	byNode, err := podsByNode(context.Background(), client, ns)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for node, pods := range byNode {
		for i := range pods {
			if isLive(&pods[i]) {
				out[node] = pods[i].UID
			}
		}
	}
	return out
}

// waitNodesOnRevision waits until each node named runs one live, Ready pod of the
// revision numbered rev in ns, and returns that revision's hash.
func waitNodesOnRevision(t *testing.T, client kubernetes.Interface, ns string, rev int64, names []string, timeout time.Duration) string {
	t.Helper()
	c := &companionCluster{client: client}
	var hash string
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if hash = c.revisionHashNow(ctx, ns, rev); hash == "" {
			return false, nil
		}
		byNode, err := podsByNode(ctx, client, ns)
		if err != nil {
			return false, nil
		}
		for _, node := range names {
			pods := byNode[node]
			if len(pods) != 1 || !isLive(&pods[0]) || !isPodReady(&pods[0]) || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != hash {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for nodes %v to run revision %d of %s: %v", names, rev, ns, err)
	}
	return hash
}

// progressingIn is the Progressing condition of DaemonSet agent in ns.
func progressingIn(t *testing.T, client kubernetes.Interface, ns string) *apps.DaemonSetCondition {
	t.Helper()
	ds, err := client.AppsV1().DaemonSets(ns).Get(context.Background(), "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return progressingOf(ds)
}

// settledOutcome waits until the pods of ns have not changed for 10 seconds and
// describes each node: its pods' revisions (1 or 2) and readiness, and whether
// the pod it ran before (before) is still there.
func settledOutcome(t *testing.T, client kubernetes.Interface, ns string, nodes []string, before map[string]types.UID) string {
	t.Helper()
	c := &companionCluster{client: client}
	var last string
	var since time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		byNode, err := podsByNode(ctx, client, ns)
		if err != nil {
			return false, nil
		}
		hashes := map[string]string{c.revisionHashNow(ctx, ns, 1): "1", c.revisionHashNow(ctx, ns, 2): "2"}
		var lines []string
		for _, node := range nodes {
			var pods []string
			kept := false
			for _, p := range byNode[node] {
				if !isLive(&p) {
					continue
				}
				pods = append(pods, fmt.Sprintf("revision %s ready=%v", hashes[p.Labels[apps.ControllerRevisionHashLabelKey]], isPodReady(&p)))
				kept = kept || p.UID == before[node]
			}
			slices.Sort(pods)
			lines = append(lines, fmt.Sprintf("%s: %v, first pod kept=%v", node, pods, kept))
		}
		now := strings.Join(lines, "\n")
		if now != last {
			last, since = now, time.Now()
			return false, nil
		}
		return time.Since(since) >= 10*time.Second, nil
	})
	if err != nil {
		t.Fatalf("waiting for the pods of %s to settle: %v; last:\n%s", ns, err, last)
	}
	return last
}
