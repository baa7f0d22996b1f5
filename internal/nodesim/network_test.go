package nodesim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A node gated on its network plugin registers NotReady, with the kubelet's
// reason and message, turns Ready once a pod matching the selector is Running
// there, and stays Ready when that pod is replaced.
func TestNodeReadyRequires(t *testing.T) {
	cfg := testConfig(1)
	cfg.NodeReadyRequires = "app=cni"
	h := startSimulator(t, cfg)
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	ready := func() *v1.NodeCondition { return nodeCondition(h.node("sim-node-0").Status, v1.NodeReady) }
	if c := ready(); c == nil || c.Status != v1.ConditionFalse || c.Reason != reasonKubeletNotReady || c.Message != messageNetworkNotReady {
		t.Fatalf("Ready at registration = %+v, want False, network not ready", c)
	}

	h.createPod(boundPod("web", "sim-node-0", nil))
	h.advanceUntil("the plain pod Running", 100*time.Millisecond, func() bool { return phaseIs(h.pod("web"), v1.PodRunning) })
	h.holds("a pod that does not match leaves the node NotReady", 100*time.Millisecond, 5, func() bool { return ready().Status == v1.ConditionFalse })

	cni := boundPod("cni", "sim-node-0", nil)
	cni.Labels = map[string]string{"app": "cni"}
	h.createPod(cni)
	h.advanceUntil("node Ready once the CNI pod runs", 100*time.Millisecond, func() bool { return ready().Status == v1.ConditionTrue })

	if err := h.client.CoreV1().Pods("default").Delete(h.ctx, "cni", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.advanceUntil("the CNI pod gone", 100*time.Millisecond, func() bool { return h.pod("cni") == nil })
	h.holds("the node stays Ready without its agent's pod", 100*time.Millisecond, 5, func() bool { return ready().Status == v1.ConditionTrue })
}

// A node's annotation replaces the configured selector; "" requires nothing.
func TestReadyRequiresAnnotation(t *testing.T) {
	cfg := testConfig(0)
	cfg.NodeReadyRequires = "app=cni"
	h := startSimulator(t, cfg)
	for i, name := range []string{"free", "gated"} {
		ann := map[string]string{"free": "", "gated": "app=other"}[name]
		node := newNode(name, i, t0)
		node.Annotations = map[string]string{AnnotationReadyRequires: ann}
		node.Status = v1.NodeStatus{}
		if _, err := h.client.CoreV1().Nodes().Create(h.ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	status := func(name string) v1.ConditionStatus {
		n := h.node(name)
		if n == nil {
			return ""
		}
		if c := nodeCondition(n.Status, v1.NodeReady); c != nil {
			return c.Status
		}
		return ""
	}
	h.eventually("the node requiring nothing Ready", func() bool { return status("free") == v1.ConditionTrue })
	h.eventually("the gated node NotReady", func() bool { return status("gated") == v1.ConditionFalse })
}

func TestConfigRejectsAnInvalidReadyRequires(t *testing.T) {
	cfg := testConfig(1)
	cfg.NodeReadyRequires = "app in (cni"
	if err := cfg.Validate(); err == nil {
		t.Error("an invalid --node-ready-requires is accepted")
	}
}
