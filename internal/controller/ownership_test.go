package controller

import (
	"reflect"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

func TestController_AdoptsMatchingOrphansAndReleasesMismatches(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 3, nil)
	// An orphan from an earlier owner, of the same template generation: once adopted
	// it counts as up to date and is kept.
	orphan, err := h.client.CoreV1().Pods(testNamespace).Create(h.ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: testNamespace,
			Labels: map[string]string{"app": "agent", daemon.TemplateGenerationLabel: "1"}},
		Spec: v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "agent", Image: "example.com/agent:v1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Running, and seen so by the controller's cache: a DaemonSet synced before its
	// cache shows the orphan would rightly create a pod of its own.
	h.waitFor("the orphan to run", func() bool {
		obj, ok, err := h.ctrl.pods.GetByKey(testNamespace + "/" + orphan.Name)
		pod, _ := obj.(*v1.Pod)
		return err == nil && ok && isRunningReady(pod)
	})

	ds := h.createDaemonSet(newDaemonSet("agent"))
	served := func() bool {
		byNode := h.podsByNode(ds)
		for _, n := range nodes {
			if len(byNode[n]) != 1 || !isRunningReady(&byNode[n][0]) {
				return false
			}
		}
		s := h.daemonSet("agent").Status
		return len(byNode) == 3 && byNode["node-1"][0].UID == orphan.UID &&
			s.DesiredNumberScheduled == 3 && s.NumberAvailable == 3 && s.UpdatedNumberScheduled == 3
	}
	h.waitFor("the orphan adopted and the other nodes served", served)
	h.holdsFor(300*time.Millisecond, "the adopted orphan kept alone on node-1", served)

	adopted, err := h.client.CoreV1().Pods(testNamespace).Get(h.ctx, orphan.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(adopted)
	if ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" || ref.Name != "agent" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("adopted pod's ownerReferences = %+v, want a blocking controller reference to the DaemonSet", adopted.OwnerReferences)
	}
	for _, pod := range h.api.CreatedPods() {
		if node, _ := daemon.TargetNode(pod); node == "node-1" && pod.Name != orphan.Name {
			t.Errorf("pod %s was created for node-1, which had an adoptable pod", pod.Name)
		}
	}

	// A pod whose labels stop matching is released and replaced.
	victim := h.podsByNode(ds)["node-0"][0]
	patch := []byte(`{"metadata":{"labels":{"app":"debugging"}}}`)
	if _, err := h.client.CoreV1().Pods(testNamespace).Patch(h.ctx, victim.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	replacement := h.waitForReplacement(ds, "node-0", victim.UID)
	h.waitFor("the relabelled pod released", func() bool {
		pod, err := h.client.CoreV1().Pods(testNamespace).Get(h.ctx, victim.Name, metav1.GetOptions{})
		return err == nil && len(pod.OwnerReferences) == 0
	})
	if replacement.Labels["app"] != "agent" {
		t.Errorf("replacement %s has labels %v", replacement.Name, replacement.Labels)
	}
}

func TestController_IgnoresSelectorSelectingEverything(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.createNodes("node", 2, nil)
	ds := newDaemonSet("greedy")
	ds.Spec.Selector = &metav1.LabelSelector{}
	ds = h.createDaemonSet(ds)
	h.waitFor("a SelectingAll warning", func() bool {
		events := h.events(daemon.EventSelectingAll)
		return len(events) > 0 && events[0].Type == v1.EventTypeWarning && events[0].InvolvedObject.UID == ds.UID
	})
	h.holdsFor(300*time.Millisecond, "no pods and no revisions", func() bool {
		return len(h.allPods()) == 0 && len(h.revisionsOf(ds)) == 0
	})
}

func TestController_LeavesDaemonSetBeingDeletedAlone(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 3, nil)
	doomed := newDaemonSet("doomed")
	doomed.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	doomed.Finalizers = []string{"example.com/hold"}
	doomed = h.createDaemonSet(doomed)
	// The marker DaemonSet converging shows the controller has been at work.
	h.createDaemonSet(newDaemonSet("marker"))
	h.waitFor("the marker DaemonSet served", func() bool { return h.converged("marker", nodes) })
	nothing := func() bool {
		cur := h.daemonSet("doomed")
		return len(h.podsOf(doomed)) == 0 && len(h.revisionsOf(doomed)) == 0 && reflect.DeepEqual(cur.Status, doomed.Status)
	}
	h.holdsFor(300*time.Millisecond, "nothing done for the DaemonSet being deleted", nothing)

	// A DaemonSet whose deletion starts after it was served: a deleted pod is not
	// replaced.
	ds := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	h.updateDaemonSet("agent", func(ds *apps.DaemonSet) {
		ds.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		ds.Finalizers = []string{"foregroundDeletion"}
	})
	h.waitFor("the controller's cache to show the deletion", func() bool {
		cached, err := h.ctrl.dsLister.DaemonSets(testNamespace).Get("agent")
		return err == nil && cached.DeletionTimestamp != nil
	})
	victim := h.podsByNode(ds)["node-0"][0]
	if err := h.client.CoreV1().Pods(testNamespace).Delete(h.ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.holdsFor(500*time.Millisecond, "node-0 left without a pod", func() bool {
		return len(h.podsByNode(ds)["node-0"]) == 0 && len(h.podsOf(ds)) == 2
	})
}
