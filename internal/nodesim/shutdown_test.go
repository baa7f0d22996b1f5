package nodesim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A graceful shutdown: the node reports NotReady, shutting down; its running pod
// ends Failed with DisruptionTarget, a pod bound meanwhile is rejected; a
// maintenance condition set by someone else is kept through the simulator's
// writes. Booted again, the node is Ready and runs new pods.
func TestGracefulShutdown(t *testing.T) {
	h := startSimulator(t, testConfig(1))
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("web", "sim-node-0", nil))
	h.advanceUntil("pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("web"), true) })

	node := h.node("sim-node-0").DeepCopy()
	node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: v1.NodeGracefulNodeShutdownInProgress, Status: v1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(t0)})
	if _, err := h.client.CoreV1().Nodes().UpdateStatus(h.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node = h.node("sim-node-0").DeepCopy()
	node.Annotations = map[string]string{AnnotationShutdown: "true"}
	if _, err := h.client.CoreV1().Nodes().Update(h.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.simSees("sim-node-0", func(n *v1.Node) bool { return n.Annotations[AnnotationShutdown] == "true" })
	h.eventually("the node NotReady, shutting down", func() bool {
		c := nodeCondition(h.node("sim-node-0").Status, v1.NodeReady)
		return c != nil && c.Status == v1.ConditionFalse && c.Message == messageShuttingDown
	})
	h.eventually("the running pod stopped by the shutdown", func() bool { return phaseIs(h.pod("web"), v1.PodFailed) })
	web := h.pod("web")
	if web.Status.Reason != reasonShutdownTerminated || !hasPodCondition(web, v1.DisruptionTarget, v1.PodReasonTerminationByKubelet) || readyIs(web, true) {
		t.Errorf("the stopped pod's status = reason %q, conditions %+v; want Terminated, DisruptionTarget by the kubelet, not Ready", web.Status.Reason, web.Status.Conditions)
	}
	h.createPod(boundPod("late", "sim-node-0", nil))
	h.eventually("a pod bound meanwhile rejected", func() bool { return phaseIs(h.pod("late"), v1.PodFailed) })
	if late := h.pod("late"); late.Status.Reason != reasonShutdownRejected || hasPodCondition(late, v1.DisruptionTarget, "") {
		t.Errorf("the rejected pod's status = %+v, want reason NodeShutdown and no DisruptionTarget", late.Status)
	}
	if c := nodeCondition(h.node("sim-node-0").Status, v1.NodeGracefulNodeShutdownInProgress); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("the maintenance condition set by someone else = %+v, want it kept", c)
	}

	node = h.node("sim-node-0").DeepCopy()
	node.Annotations = nil
	if _, err := h.client.CoreV1().Nodes().Update(h.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the node Ready again", func() bool {
		c := nodeCondition(h.node("sim-node-0").Status, v1.NodeReady)
		return c != nil && c.Status == v1.ConditionTrue
	})
	h.createPod(boundPod("after", "sim-node-0", nil))
	h.advanceUntil("a new pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("after"), true) })
	if !phaseIs(h.pod("web"), v1.PodFailed) {
		t.Errorf("the pod the shutdown stopped came back: %+v", h.pod("web").Status)
	}
}

// hasPodCondition reports whether the pod has condition t True, with reason when
// reason is not empty.
func hasPodCondition(pod *v1.Pod, t v1.PodConditionType, reason string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == v1.ConditionTrue && (reason == "" || c.Reason == reason) {
			return true
		}
	}
	return false
}
