package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/everynode/everynode/internal/nodesim"
)

// minHealthy is the default bake a DaemonSet with max-restarts gets.
const minHealthy = 10 * time.Second

// TestRollbackObeysTheBudgetAndTheBake: a release that crashes two seconds after it
// starts reaches the two nodes maxUnavailable allows, fails, and is rolled back. The
// rollback replaces those two nodes only, never disturbing more than the budget, and
// is done only once its pods have been Ready, restart-free, for the bake: the
// Progressing condition stays RolledBack until then.
func TestRollbackObeysTheBudgetAndTheBake(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 4, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
	ds.Annotations = map[string]string{annMaxRestarts: "2", annOnFailure: "rollback"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 4)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))

	conds := watchProgressing(t, env.client, ns, "agent")
	w := watchInvariants(t, ns, "app=agent", nodesOffRevision(nodes, rev1, 2), maxNodesWithoutReadyPod(nodes, 2), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationRestartEvery: "2s"}
	})
	waitFor(t, "the rollback to revision 1's template", func(ctx context.Context) (bool, error) {
		return revisionHashes(t, ns, "agent")[3] == rev1, nil
	})
	waitRolledOut(t, ns, "agent", 4)
	done := waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	peaks := w.stop(t)
	if seen := conds.stop(); !slices.Contains(seen, "False/RolledBack") {
		t.Errorf("the Progressing condition went through %v, never False/RolledBack", seen)
	}
	if peaks[0] != 2 {
		t.Errorf("at most %d nodes were disturbed; want the release on the two nodes the budget allows", peaks[0])
	}

	byNode := mustDaemonPods(t, ns, "agent")
	var replaced []string
	var lastReady time.Time
	for node, uid := range before {
		pods := byNode[node]
		if len(pods) != 1 || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != rev1 {
			t.Fatalf("node %s ends with %v, want one pod of revision 1", node, podNames(byNode)[node])
		}
		if pods[0].UID == uid {
			continue
		}
		replaced = append(replaced, node)
		if ready := readySince(&pods[0]); ready.After(lastReady) {
			lastReady = ready
		}
	}
	if len(replaced) != 2 {
		t.Errorf("nodes whose pod was replaced: %v, want the two the release reached", replaced)
	}
	// Both times are stored to the second: allow one second of rounding.
	if baked := done.LastTransitionTime.Sub(lastReady); baked < minHealthy-time.Second {
		t.Errorf("the rollback was done %v after its last pod turned Ready, before the %v bake", baked, minHealthy)
	}
}

// TestRollbackThatFailsHolds: the release fails on one node and is rolled back, but
// that node can no longer pull images, so the restored revision fails there too.
// The rollout holds with RollbackFailed instead of rolling back again, and touches
// no other node; once the node pulls again, `everynode rollout resume` finishes it.
func TestRollbackThatFailsHolds(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 3, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Annotations = map[string]string{annMaxRestarts: "2", annOnFailure: "rollback"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 3)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")

	w := watchInvariants(t, ns, "app=agent", nodesOffRevision(nodes, rev1, 1), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationRestartEvery: "2s"}
	})
	// The node the release reaches first stops pulling images, so that the pod the
	// rollback gives it fails too.
	var broken string
	waitFor(t, "a pod of the release", func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "agent")
		if err != nil {
			return false, err
		}
		for node, pods := range byNode {
			for _, p := range pods {
				if p.Labels[apps.ControllerRevisionHashLabelKey] != rev1 {
					broken = node
				}
			}
		}
		return broken != "", nil
	})
	setNodeAnnotation(t, broken, nodesim.AnnotationFail, "ErrImagePull")
	held := map[string]types.UID{}
	for node, pods := range mustDaemonPods(t, ns, "agent") {
		if node != broken && len(pods) == 1 {
			held[node] = pods[0].UID
		}
	}

	t.Cleanup(func() {
		if t.Failed() {
			logRollout(t, ns, "agent")
		}
	})
	cond := waitProgressing(t, env.client, ns, "agent", v1.ConditionFalse, "RollbackFailed")
	for _, word := range []string{"revision 3, restored by a rollback from failed revision 2, failed too", "on node " + broken, "ErrImagePull"} {
		if !strings.Contains(cond.Message, word) {
			t.Errorf("RollbackFailed message %q does not say %q", cond.Message, word)
		}
	}
	consistently(t, "no second rollback, no other node touched", 4*time.Second, func(ctx context.Context) (bool, error) {
		if len(revisionHashes(t, ns, "agent")) != 2 {
			return false, nil
		}
		byNode, err := daemonPods(ctx, ns, "agent")
		if err != nil {
			return false, err
		}
		for node, uid := range held {
			if pods := byNode[node]; len(pods) != 1 || pods[0].UID != uid {
				return false, nil
			}
		}
		return true, nil
	})
	w.stop(t)

	setNodeAnnotation(t, broken, nodesim.AnnotationFail, "")
	mustEverynode(t, "rollout", "resume", "agent", "-n", ns)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
}

// setNodeAnnotation sets (or, with value "", removes) an annotation of a node.
func setNodeAnnotation(t *testing.T, node, key, value string) {
	t.Helper()
	waitFor(t, "annotating node "+node, func(ctx context.Context) (bool, error) {
		n, err := env.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if value == "" {
			delete(n.Annotations, key)
		} else {
			metav1.SetMetaDataAnnotation(&n.ObjectMeta, key, value)
		}
		_, err = env.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// readySince is when the pod last turned Ready (zero if it is not).
func readySince(pod *v1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// logRollout logs what a failed rollout test needs to be understood: the
// DaemonSet's Progressing condition, its revisions' marks and its pods.
func logRollout(t *testing.T, ns, name string) {
	ctx := context.Background()
	if ds, err := env.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Logf("Progressing: %+v", progressingOf(ds))
	}
	if revs, err := env.client.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, r := range revs.Items {
			t.Logf("revision %d %s: %v", r.Revision, r.Name, r.Annotations)
		}
	}
	if byNode, err := daemonPods(ctx, ns, name); err == nil {
		for node, pods := range byNode {
			for _, p := range pods {
				t.Logf("node %s: pod %s %s ready=%v containers=%+v", node, p.Name, p.Labels[apps.ControllerRevisionHashLabelKey], isPodReady(&p), p.Status.ContainerStatuses)
			}
		}
	}
}
