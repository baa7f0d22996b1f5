package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/everynode/everynode/internal/daemon"
)

// companionDaemonSet is an OnDelete DaemonSet that companion mode manages, with
// max-unavailable and any other annotations.
func companionDaemonSet(name, maxUnavailable string, kv ...string) *apps.DaemonSet {
	ds := newDaemonSet(name)
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	ds.Annotations[daemon.AnnotationMaxUnavailable] = maxUnavailable
	for i := 0; i+1 < len(kv); i += 2 {
		ds.Annotations[kv[i]] = kv[i+1]
	}
	return ds
}

// companionWrites are the writes everynode made in companion mode, told apart from
// the stand-in's by what the stand-in counted.
type companionWrites struct {
	podCreates, podDeletes, statusUpdates int
	// statusPatches are the bodies of its status patches.
	statusPatches []map[string]any
}

func (h *harness) companionWrites() companionWrites {
	var w companionWrites
	for _, a := range h.client.Actions() {
		switch {
		case a.Matches("create", "pods"):
			w.podCreates++
		case a.Matches("delete", "pods"):
			w.podDeletes++
		case a.Matches("update", "daemonsets") && a.GetSubresource() == "status":
			w.statusUpdates++
		case a.Matches("patch", "daemonsets") && a.GetSubresource() == "status":
			var body map[string]any
			if err := json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &body); err != nil {
				h.t.Fatalf("status patch: %v", err)
			}
			w.statusPatches = append(w.statusPatches, body)
		}
	}
	w.podCreates -= h.builtin.podCreates
	w.statusUpdates -= h.builtin.statusUpdates
	return w
}

// checkOnlyConditionPatches fails the test unless every status write of everynode's
// was a patch of the Progressing condition alone.
func (h *harness) checkOnlyConditionPatches(w companionWrites) {
	h.t.Helper()
	if w.podCreates != 0 || w.statusUpdates != 0 {
		h.t.Errorf("companion mode created %d pods and updated the status %d times; both are the other controller's", w.podCreates, w.statusUpdates)
	}
	want := []string{string(daemon.ConditionProgressing), string(daemon.ConditionReconciling), string(daemon.ConditionStalled)}
	for _, body := range w.statusPatches {
		status, _ := body["status"].(map[string]any)
		conds, _ := status["conditions"].([]any)
		var types []string
		for _, c := range conds {
			types = append(types, fmt.Sprint(c.(map[string]any)["type"]))
		}
		if len(body) != 1 || len(status) != 1 || !slices.Equal(types, want) {
			h.t.Errorf("companion mode patched the status with %v; want the rollout's conditions %v alone", body, want)
		}
	}
}

// TestController_CompanionRollsOutWithinMaxUnavailable: beside the cluster's own
// controller, an OnDelete DaemonSet with max-unavailable 2 is rolled out by deleting
// old pods, never more than 2 nodes without a Ready pod, and everynode writes only
// pod deletes and its condition.
func TestController_CompanionRollsOutWithinMaxUnavailable(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: ModeCompanion})
	nodes := h.createNodes("node", 6, nil)
	ds := h.createDaemonSet(companionDaemonSet("agent", "2"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	oldHash := h.currentHash(ds)

	h.inv.setLimits(ds.UID, podLimits{perNode: 1, unavailable: 2, nodes: nodes})
	h.changeTemplate("agent", imageV2)
	h.waitFor("the rollout to finish", func() bool { return h.converged("agent", nodes) })
	h.checkRolledOut(ds, oldHash)
	if peak := h.inv.peakUnavailable(ds.UID); peak != 2 {
		t.Errorf("at most %d nodes were without a Ready pod at once; want the update to use max-unavailable 2", peak)
	}
	h.waitFor("the NewRevisionAvailable condition", func() bool {
		c := progressingCondition(h.daemonSet("agent"))
		return c != nil && daemon.Reason(c.Reason) == daemon.ReasonNewRevisionAvailable
	})
	w := h.companionWrites()
	if w.podDeletes != len(nodes) {
		t.Errorf("companion mode deleted %d pods; want one per node, %d", w.podDeletes, len(nodes))
	}
	h.checkOnlyConditionPatches(w)
	if len(w.statusPatches) == 0 {
		t.Error("companion mode never wrote its Progressing condition")
	}
}

// TestController_CompanionLeavesOtherDaemonSetsAlone: a plain OnDelete DaemonSet keeps
// upstream's OnDelete behaviour — nothing replaced — and gets no write at all.
func TestController_CompanionLeavesOtherDaemonSetsAlone(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: ModeCompanion})
	nodes := h.createNodes("node", 3, nil)
	ds := newDaemonSet("plain")
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	ds = h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("plain", nodes) })
	before := podUIDs(h.podsOf(ds))
	h.changeTemplate("plain", imageV2)
	h.holdsFor(2*time.Second, "the old pods", func() bool { return sameUIDs(podUIDs(h.podsOf(ds)), before) })
	w := h.companionWrites()
	if w.podDeletes != 0 || len(w.statusPatches) != 0 {
		t.Errorf("companion mode wrote to a DaemonSet it does not manage: %d deletes, %d status patches", w.podDeletes, len(w.statusPatches))
	}
	h.checkOnlyConditionPatches(w)
}

// TestController_CompanionPausedDeletesNothing: paused, no old pod goes and the
// condition says so; resumed, the rollout finishes.
func TestController_CompanionPausedDeletesNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{mode: ModeCompanion})
	nodes := h.createNodes("node", 3, nil)
	ds := h.createDaemonSet(companionDaemonSet("agent", "1", daemon.AnnotationPaused, "true"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	before := podUIDs(h.podsOf(ds))
	h.changeTemplate("agent", imageV2)
	h.waitFor("the Paused condition", func() bool {
		c := progressingCondition(h.daemonSet("agent"))
		return c != nil && daemon.Reason(c.Reason) == daemon.ReasonPaused
	})
	h.holdsFor(time.Second, "the old pods", func() bool { return sameUIDs(podUIDs(h.podsOf(ds)), before) })
	h.updateDaemonSet("agent", func(ds *apps.DaemonSet) { delete(ds.Annotations, daemon.AnnotationPaused) })
	h.waitFor("the rollout to finish", func() bool { return h.converged("agent", nodes) })
	h.checkOnlyConditionPatches(h.companionWrites())
}

func progressingCondition(ds *apps.DaemonSet) *apps.DaemonSetCondition {
	for i := range ds.Status.Conditions {
		if ds.Status.Conditions[i].Type == daemon.ConditionProgressing {
			return &ds.Status.Conditions[i]
		}
	}
	return nil
}

func sameUIDs(a, b map[types.UID]bool) bool { return maps.Equal(a, b) }
