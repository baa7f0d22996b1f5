package e2e

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/nodesim"
)

// A NoSchedule taint the pods do not tolerate stops new pods on the node but leaves
// the running one alone (counted misscheduled, not desired); a NoExecute taint they
// do not tolerate removes the pod.
func TestUntoleratedNoScheduleTaintKeepsPodButNoExecuteRemovesIt(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 2, map[string]string{"e2e/pool": ns})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{"e2e/pool": ns}))
	waitRolledOut(t, ns, "agent", 2)
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))

	kubectl(t, "taint", "nodes", nodes[0], "e2e/dedicated=other:NoSchedule")
	waitStatus(t, ns, "agent", counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1, misscheduled: 1})
	consistently(t, "both pods keep running", 2*time.Second, samePods(ns, "agent", before))

	// Without its pod, the NoSchedule node gets no new one.
	podOnTainted := mustDaemonPods(t, ns, "agent")[nodes[0]][0].Name
	kubectl(t, "delete", "pod", podOnTainted, "-n", ns)
	waitStatus(t, ns, "agent", counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1})
	consistently(t, "no pod is created on the NoSchedule node", 2*time.Second, samePods(ns, "agent", map[string]types.UID{nodes[1]: before[nodes[1]]}))

	kubectl(t, "taint", "nodes", nodes[1], "e2e/evict=now:NoExecute")
	waitFor(t, "the pod on the NoExecute node to go", func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "agent")
		return err == nil && len(byNode) == 0, err
	})
	waitStatus(t, ns, "agent", counts{})
	out := kubectl(t, "get", "pods", "-n", ns, "-l", "app=agent", "-o", "name")
	if out != "" {
		t.Errorf("kubectl get pods lists %q, want no pods", out)
	}
}

// Daemon pods tolerate node.kubernetes.io/unschedulable, so a cordoned node gets a
// pod, and node.kubernetes.io/not-ready:NoExecute, so a pod stays on a node that
// goes NotReady. The not-ready NoSchedule taint is not tolerated by default: while
// the node is NotReady its pod is misscheduled and a deleted pod is not replaced
// until the node is Ready again.
func TestCordonedNodeGetsPodAndNotReadyNodeKeepsIt(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 2, map[string]string{"e2e/pool": ns})
	cordoned, failing := nodes[0], nodes[1]

	kubectl(t, "cordon", cordoned)
	waitNodeTaints(t, cordoned, true, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{"e2e/pool": ns}))
	waitRolledOut(t, ns, "agent", 2)
	byNode := mustDaemonPods(t, ns, "agent")
	before := onePodPerNode(t, byNode)
	if pod := byNode[cordoned][0]; pod.Spec.NodeName != cordoned || pod.Status.Phase != v1.PodRunning {
		t.Errorf("pod on the cordoned node: bound to %q, phase %s; want bound and Running", pod.Spec.NodeName, pod.Status.Phase)
	}

	kubectl(t, "annotate", "node", failing, nodesim.AnnotationReady+"=false")
	notReady := []v1.Taint{
		{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute},
	}
	waitNodeTaints(t, failing, true, notReady...)
	waitStatus(t, ns, "agent", counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1, misscheduled: 1})
	consistently(t, "the pod on the NotReady node stays", 2*time.Second, samePods(ns, "agent", before))

	kubectl(t, "delete", "pod", mustDaemonPods(t, ns, "agent")[failing][0].Name, "-n", ns)
	waitStatus(t, ns, "agent", counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1})
	consistently(t, "no pod is created on the NotReady node", 2*time.Second, samePods(ns, "agent", map[string]types.UID{cordoned: before[cordoned]}))

	kubectl(t, "annotate", "node", failing, nodesim.AnnotationReady+"-")
	waitNodeTaints(t, failing, false, notReady...)
	waitRolledOut(t, ns, "agent", 2)
	if uid := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))[cordoned]; uid != before[cordoned] {
		t.Errorf("the pod on the cordoned node was replaced")
	}
}
