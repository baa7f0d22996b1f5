package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// The rollout state and the nodes waiting, by reason, follow the DaemonSet: a
// canary rollout holding two nodes, then promoted and done.
func TestMetricsFollowTheRollout(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 3, nil)
	h.updateNode(nodes[0], func(n *v1.Node) { n.Labels["canary"] = "true" })
	ds := newDaemonSet("agent")
	ds.Annotations[daemon.AnnotationCanary] = "canary=true"
	ds.Annotations[daemon.AnnotationMinHealthy] = "0s" // a policy, and so a condition, once the canary goes
	ds.Spec.UpdateStrategy = rollingUpdate(3, 0)
	h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	m := h.ctrl.metrics
	state := func(status, reason string) float64 {
		return testutil.ToFloat64(m.progressing.vec.WithLabelValues(testNamespace, "agent", status, reason))
	}
	waiting := func(reason daemon.Reason) float64 {
		return testutil.ToFloat64(m.waiting.vec.WithLabelValues(testNamespace, "agent", string(reason)))
	}
	h.waitFor("the rollout state NewRevisionAvailable", func() bool { return state("True", "NewRevisionAvailable") == 1 })

	h.changeTemplate("agent", imageV2)
	h.waitFor("the state WaitingForPromotion, two nodes waiting for it", func() bool {
		return state("True", string(daemon.ReasonCanaryHeld)) == 1 && waiting(daemon.ReasonCanaryHeld) == 2
	})
	if n := testutil.CollectAndCount(m.progressing.vec); n != 1 {
		t.Errorf("%d rollout state series for one DaemonSet, want 1", n)
	}

	h.updateDaemonSet("agent", func(ds *apps.DaemonSet) { delete(ds.Annotations, daemon.AnnotationCanary) })
	h.waitFor("done: available again, nothing waiting", func() bool {
		return state("True", "NewRevisionAvailable") == 1 && testutil.CollectAndCount(m.waiting.vec) == 0
	})
}
