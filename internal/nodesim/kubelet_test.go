package nodesim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A node whose kubelet is stopped renews no Lease and writes nothing of itself or
// its pods: a pod deleted there stays, a new one is never started. Started again,
// the kubelet reports the node and finishes both.
func TestKubeletStopped(t *testing.T) {
	cfg := testConfig(1)
	cfg.LeaseInterval = 10 * time.Second
	cfg.PodStopDelay = time.Second
	h := startSimulator(t, cfg)
	h.eventually("sim-node-0", func() bool { return h.node("sim-node-0") != nil })
	h.createPod(boundPod("old", "sim-node-0", nil))
	h.advanceUntil("pod Ready", 100*time.Millisecond, func() bool { return readyIs(h.pod("old"), true) })
	renewTime := func() time.Time {
		l, err := h.client.CoordinationV1().Leases(LeaseNamespace).Get(h.ctx, "sim-node-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Spec.RenewTime.Time
	}

	setKubelet := func(value string) {
		node := h.node("sim-node-0").DeepCopy()
		node.Annotations = map[string]string{AnnotationKubelet: value}
		if _, err := h.client.CoreV1().Nodes().Update(h.ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setKubelet("stopped")
	h.simSees("sim-node-0", func(n *v1.Node) bool { return n.Annotations[AnnotationKubelet] == "stopped" })
	before := renewTime()
	p := h.pod("old")
	p.DeletionTimestamp = &metav1.Time{Time: h.clock.Now().Add(30 * time.Second)}
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	h.updatePod(p)
	h.createPod(boundPod("new", "sim-node-0", nil))
	h.holds("nothing written while the kubelet is stopped", time.Second, 25, func() bool {
		return renewTime().Equal(before) && h.pod("old") != nil && h.pod("new").Status.Phase == ""
	})

	// A node controller's verdict on the silent node stays until the kubelet is back.
	node := h.node("sim-node-0").DeepCopy()
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == v1.NodeReady {
			node.Status.Conditions[i].Status = v1.ConditionUnknown
		}
	}
	if _, err := h.client.CoreV1().Nodes().UpdateStatus(h.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setKubelet("running")
	h.advanceUntil("the old pod removed and the new one Ready", 100*time.Millisecond, func() bool {
		_, err := h.client.CoreV1().Pods("default").Get(h.ctx, "old", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && readyIs(h.pod("new"), true)
	})
	h.advanceUntil("the Lease renewed", time.Second, func() bool { return renewTime().After(before) })
	h.eventually("the node Ready again", func() bool {
		for _, c := range h.node("sim-node-0").Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue
			}
		}
		return false
	})
}

func TestKubeletStoppedKnob(t *testing.T) {
	for value, want := range map[string]bool{"stopped": true, "running": false, "": false, "off": false} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationKubelet: value}}}
		got, err := kubeletStopped(node)
		if got != want || (err != nil) != (value == "" || value == "off") {
			t.Errorf("kubeletStopped(%q) = %v, %v; want %v", value, got, err, want)
		}
	}
}
