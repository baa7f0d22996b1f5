package controller

import (
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

func imageV2(t *v1.PodTemplateSpec) { t.Spec.Containers[0].Image = "example.com/agent:v2" }

// checkRolledOut checks that every pod of ds runs the current template and that the
// old and new revisions are both kept.
func (h *harness) checkRolledOut(ds *apps.DaemonSet, oldHash string) {
	h.t.Helper()
	ds = h.daemonSet(ds.Name)
	newHash := h.currentHash(ds)
	if newHash == "" || newHash == oldHash {
		h.t.Fatalf("current hash %q after the template change, old %q", newHash, oldHash)
	}
	for _, pod := range h.podsOf(ds) {
		if pod.Labels[daemon.HashLabel] != newHash || pod.Labels[daemon.TemplateGenerationLabel] != "2" {
			h.t.Errorf("pod %s has labels %v, want hash %s and template generation 2", pod.Name, pod.Labels, newHash)
		}
		if pod.Spec.Containers[0].Image != "example.com/agent:v2" {
			h.t.Errorf("pod %s runs %s, want the new image", pod.Name, pod.Spec.Containers[0].Image)
		}
	}
	var hashes []string
	for _, r := range h.revisionsOf(ds) {
		hashes = append(hashes, r.Labels[daemon.HashLabel])
	}
	slices.Sort(hashes)
	want := []string{oldHash, newHash}
	slices.Sort(want)
	if !slices.Equal(hashes, want) {
		h.t.Errorf("revision hashes %v, want %v", hashes, want)
	}
}

func TestController_RollingUpdateKeepsWithinMaxUnavailable(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 6, nil)
	ds := newDaemonSet("agent")
	ds.Spec.UpdateStrategy = rollingUpdate(2, 0)
	ds = h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	oldHash := h.currentHash(ds)

	h.inv.setLimits(ds.UID, podLimits{perNode: 1, unavailable: 2, nodes: nodes})
	h.changeTemplate("agent", imageV2)
	h.waitFor("the rollout to finish", func() bool { return h.converged("agent", nodes) })
	h.checkRolledOut(ds, oldHash)
	// The invariant watcher failed the test if more than 2 nodes were ever without
	// a Ready pod; check the rollout did use its budget.
	if peak := h.inv.peakUnavailable(ds.UID); peak != 2 {
		t.Errorf("at most %d nodes were without a Ready pod at once; want the update to use maxUnavailable=2", peak)
	}
	if n := len(h.events(daemon.EventSuccessfulDelete)); n == 0 {
		t.Errorf("no SuccessfulDelete event was recorded for the replaced pods")
	}
}

func TestController_SurgeUpdateKeepsWithinMaxSurge(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 5, nil)
	ds := newDaemonSet("agent")
	ds.Spec.UpdateStrategy = rollingUpdate(0, 1)
	ds = h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	oldHash := h.currentHash(ds)
	before := podUIDs(h.podsOf(ds))

	// Surging: at most one node with two pods, and no node ever without a Ready pod.
	h.inv.setLimits(ds.UID, podLimits{perNode: 2, doubled: 1, unavailable: 0, nodes: nodes})
	h.changeTemplate("agent", imageV2)
	h.waitFor("the rollout to finish", func() bool { return h.converged("agent", nodes) })
	h.checkRolledOut(ds, oldHash)
	if peak := h.inv.peakDoubled(ds.UID); peak != 1 {
		t.Errorf("at most %d nodes had two pods at once; want the update to surge on one node at a time", peak)
	}
	for uid := range podUIDs(h.podsOf(ds)) {
		if before[uid] {
			t.Errorf("pod %s survived the rollout", uid)
		}
	}
}

func podUIDs(pods []v1.Pod) map[types.UID]bool {
	out := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		out[pod.UID] = true
	}
	return out
}

func TestController_OnDeleteReplacesOnlyDeletedPods(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 3, nil)
	ds := newDaemonSet("agent")
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	ds = h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	oldHash := h.currentHash(ds)
	before := h.podsByNode(ds)

	h.changeTemplate("agent", imageV2)
	untouched := func() bool {
		cur := h.daemonSet("agent")
		byNode := h.podsByNode(ds)
		for _, n := range nodes {
			if len(byNode[n]) != 1 || byNode[n][0].UID != before[n][0].UID {
				return false
			}
		}
		return cur.Status.ObservedGeneration == 2 && cur.Status.UpdatedNumberScheduled == 0 &&
			cur.Status.NumberAvailable == 3 && h.currentHash(cur) != ""
	}
	h.waitFor("the new generation observed with no pod updated", untouched)
	h.holdsFor(300*time.Millisecond, "no pod replaced", untouched)

	victim := before["node-1"][0]
	if err := h.client.CoreV1().Pods(testNamespace).Delete(h.ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	replacement := h.waitForReplacement(ds, "node-1", victim.UID)
	newHash := h.currentHash(h.daemonSet("agent"))
	if got := replacement.Labels[daemon.HashLabel]; got != newHash || got == oldHash {
		t.Errorf("replacement %s has hash %q, want the new template's %q", replacement.Name, got, newHash)
	}
	h.waitFor("one pod updated", func() bool {
		s := h.daemonSet("agent").Status
		return s.UpdatedNumberScheduled == 1 && s.NumberAvailable == 3
	})
	byNode := h.podsByNode(ds)
	for _, n := range []string{"node-0", "node-2"} {
		if len(byNode[n]) != 1 || byNode[n][0].UID != before[n][0].UID {
			t.Errorf("node %s: pods %v, want the old pod %s left alone", n, podNames(byNode[n]), before[n][0].Name)
		}
	}
}

func podNames(pods []v1.Pod) []string {
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = pods[i].Name
	}
	return out
}
