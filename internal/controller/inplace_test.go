package controller

import (
	"sync/atomic"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"

	"github.com/everynode/everynode/internal/daemon"
)

// inPlaceAgent runs the DaemonSet agent, with in-place updates and maxUnavailable
// unavailable, converged on n nodes, and returns its hash and pods before a change.
func inPlaceAgent(t *testing.T, n int, unavailable int32) (*harness, []string, *apps.DaemonSet, string, map[types.UID]bool) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", n, nil)
	ds := newDaemonSet("agent")
	ds.Spec.UpdateStrategy = rollingUpdate(unavailable, 0)
	ds.Annotations = map[string]string{daemon.AnnotationInPlace: "true"}
	ds = h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	return h, nodes, ds, h.currentHash(ds), podUIDs(h.podsOf(ds))
}

func TestController_InPlaceUpdateKeepsThePods(t *testing.T) {
	h, nodes, ds, oldHash, before := inPlaceAgent(t, 5, 2)

	h.inv.setLimits(ds.UID, podLimits{perNode: 1, unavailable: 2, nodes: nodes})
	h.changeTemplate("agent", imageV2)
	h.waitFor("the rollout to finish", func() bool { return h.converged("agent", nodes) })
	h.checkRolledOut(ds, oldHash)
	after := podUIDs(h.podsOf(ds))
	for uid := range before {
		if !after[uid] {
			t.Errorf("pod %s was replaced; want every pod updated in place", uid)
		}
	}
	for _, pod := range h.podsOf(ds) {
		if pod.Status.ContainerStatuses[0].RestartCount != 1 {
			t.Errorf("pod %s: restart count %d, want 1 (restarted once for its new image)", pod.Name, pod.Status.ContainerStatuses[0].RestartCount)
		}
	}
	if n := len(h.events(daemon.EventSuccessfulDelete)); n != 0 {
		t.Errorf("%d pods deleted; want none", n)
	}
	if n := len(h.events(daemon.EventInPlaceUpdate)); n != len(nodes) {
		t.Errorf("%d %s events, want one per node (%d)", n, daemon.EventInPlaceUpdate, len(nodes))
	}
	if n := len(h.api.CreatedPods()); n != len(nodes) {
		t.Errorf("%d pods created in all, want %d (the first pods only)", n, len(nodes))
	}
}

func TestController_InPlaceFallsBackForOtherChanges(t *testing.T) {
	h, nodes, ds, oldHash, before := inPlaceAgent(t, 3, 1)

	h.changeTemplate("agent", func(t *v1.PodTemplateSpec) {
		imageV2(t)
		t.Spec.Containers[0].Env = []v1.EnvVar{{Name: "MODE", Value: "new"}}
	})
	h.waitFor("the rollout to finish", func() bool { return h.converged("agent", nodes) })
	h.checkRolledOut(ds, oldHash)
	for uid := range podUIDs(h.podsOf(ds)) {
		if before[uid] {
			t.Errorf("pod %s kept: an env change must replace the pod", uid)
		}
	}
	if n := len(h.events(daemon.EventInPlaceUpdate)); n != 0 {
		t.Errorf("%d pods updated in place; want none", n)
	}
}

func TestController_InPlaceRejectedIsReplaced(t *testing.T) {
	h, nodes, ds, oldHash, before := inPlaceAgent(t, 3, 1)
	var rejected atomic.Int32
	h.prependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.PatchAction).GetPatchType() != types.StrategicMergePatchType {
			return false, nil, nil
		}
		rejected.Add(1)
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "x", field.ErrorList{field.Forbidden(field.NewPath("spec"), "pod updates may not change fields other than ...")})
	})

	h.changeTemplate("agent", imageV2)
	h.waitFor("the rollout to finish", func() bool { return h.converged("agent", nodes) })
	h.checkRolledOut(ds, oldHash)
	for uid := range podUIDs(h.podsOf(ds)) {
		if before[uid] {
			t.Errorf("pod %s kept, though its in-place update was rejected", uid)
		}
	}
	if n := rejected.Load(); n != int32(len(nodes)) {
		t.Errorf("%d in-place patches sent, want one per pod (%d): a rejected pod is not tried again", n, len(nodes))
	}
	if n := len(h.events(daemon.EventFailedInPlaceUpdate)); n == 0 {
		t.Errorf("no %s event for the rejected patches", daemon.EventFailedInPlaceUpdate)
	}
}
