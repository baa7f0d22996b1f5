package controller

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// progressingReason returns the reason of ds's Progressing condition, or "".
func progressingReason(ds *apps.DaemonSet) string {
	for _, c := range ds.Status.Conditions {
		if c.Type == daemon.ConditionProgressing {
			return c.Reason
		}
	}
	return ""
}

func neverReady(t *v1.PodTemplateSpec) {
	t.Spec.Containers[0].Image = "example.com/agent:broken"
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[annotationNeverReady] = "true"
}

// A release whose pods never become Ready exceeds its progress deadline; the
// controller marks its revision failed and restores the previous template, having
// taken down at most maxUnavailable nodes, and every pod ends on the first revision.
func TestController_FailedRolloutRollsBack(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 4, nil)
	ds := newDaemonSet("agent")
	ds.Annotations[daemon.AnnotationProgressDeadline] = "1s"
	ds.Annotations[daemon.AnnotationOnFailure] = daemon.OnFailureRollback
	ds.Spec.UpdateStrategy = rollingUpdate(1, 0)
	ds = h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	firstHash := h.currentHash(ds)
	h.waitMarkedAvailable(ds, firstHash)

	h.inv.setLimits(ds.UID, podLimits{perNode: 1, unavailable: 1, nodes: nodes})
	h.changeTemplate("agent", neverReady)
	// The RolledBack condition lasts only until the restored revision is back on
	// every node, which can be quicker than a poll; the event is the lasting record.
	h.waitFor("the rollback", func() bool {
		return len(h.events(string(daemon.ReasonRolledBack))) > 0 && h.currentHash(h.daemonSet("agent")) == firstHash
	})
	h.waitFor("every pod back on the first revision", func() bool { return h.converged("agent", nodes) })

	final := h.daemonSet("agent")
	if img := final.Spec.Template.Spec.Containers[0].Image; img != "example.com/agent:v1" {
		t.Errorf("template image after rollback = %s, want the first release's", img)
	}
	failed := 0
	for _, r := range h.revisionsOf(final) {
		if r.Annotations[daemon.MarkFailed] != "" {
			failed++
			if r.Labels[daemon.HashLabel] == firstHash {
				t.Errorf("the restored revision %s is marked failed", r.Name)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d revisions are marked failed, want the broken one", failed)
	}
	h.waitFor("the condition to say the restored revision is available", func() bool {
		return progressingReason(h.daemonSet("agent")) == string(daemon.ReasonNewRevisionAvailable)
	})
}

// Relabelling a node into the canary selector wakes the DaemonSet even though its
// placement does not change: the node is updated; nodes outside the canary keep
// their pods.
func TestController_CanaryFollowsNodeLabels(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 3, nil)
	h.updateNode(nodes[0], func(n *v1.Node) { n.Labels["canary"] = "true" })
	ds := newDaemonSet("agent")
	ds.Annotations[daemon.AnnotationCanary] = "canary=true"
	ds.Spec.UpdateStrategy = rollingUpdate(3, 0)
	ds = h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	before := h.podsByNode(ds)

	h.changeTemplate("agent", imageV2)
	newHash := func() string { return h.currentHash(h.daemonSet("agent")) }
	onNew := func(node string) bool {
		pods := h.podsByNode(ds)[node]
		return len(pods) == 1 && isRunningReady(&pods[0]) && pods[0].Labels[daemon.HashLabel] == newHash()
	}
	h.waitFor("the canary node updated and the rollout waiting for promotion", func() bool {
		return onNew(nodes[0]) && progressingReason(h.daemonSet("agent")) == string(daemon.ReasonCanaryHeld)
	})
	h.holdsFor(300*time.Millisecond, "nodes outside the canary keep their pods", func() bool {
		now := h.podsByNode(ds)
		return now[nodes[1]][0].UID == before[nodes[1]][0].UID && now[nodes[2]][0].UID == before[nodes[2]][0].UID
	})

	h.updateNode(nodes[1], func(n *v1.Node) { n.Labels["canary"] = "true" })
	h.waitFor("the relabelled node updated", func() bool { return onNew(nodes[1]) })
	if got := h.podsByNode(ds)[nodes[2]]; len(got) != 1 || got[0].UID != before[nodes[2]][0].UID {
		t.Errorf("node %s outside the canary lost its pod: %v", nodes[2], got)
	}
}
