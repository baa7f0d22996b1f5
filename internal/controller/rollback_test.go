package controller

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/everynode/everynode/internal/daemon"
)

// failingRollout creates a DaemonSet that rolls back a release failing its progress
// deadline, rolls it out on three nodes, and changes its template to a release whose
// pods never become Ready. It returns the nodes and the first revision's hash.
func failingRollout(h *harness) ([]string, string) {
	h.t.Helper()
	nodes := h.createNodes("node", 3, nil)
	ds := newDaemonSet("agent")
	ds.Annotations[daemon.AnnotationProgressDeadline] = "1s"
	ds.Annotations[daemon.AnnotationOnFailure] = daemon.OnFailureRollback
	ds = h.createDaemonSet(ds)
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	first := h.currentHash(ds)
	h.waitMarkedAvailable(ds, first)
	h.changeTemplate("agent", neverReady)
	return nodes, first
}

// waitMarkedAvailable waits until ds's revision of the given hash is marked
// available.
func (h *harness) waitMarkedAvailable(ds *apps.DaemonSet, hash string) {
	h.t.Helper()
	h.waitFor("revision "+hash+" marked available", func() bool {
		for _, r := range h.revisionsOf(ds) {
			if r.Labels[daemon.HashLabel] == hash && r.Annotations[daemon.MarkAvailable] != "" {
				return true
			}
		}
		return false
	})
}

// countTemplatePatches counts the patches of DaemonSets themselves (not their
// status) from now on: the controller's rollbacks. Each calls before, if given,
// before the patch is served.
func (h *harness) countTemplatePatches(before func(n int32)) *atomic.Int32 {
	var n atomic.Int32
	h.prependReactor("patch", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" {
			count := n.Add(1)
			if before != nil {
				before(count)
			}
		}
		return false, nil, nil
	})
	return &n
}

// The controller decides a rollback from its cache, which may be behind the API
// server (its DaemonSet watch cut, relisting). The syncs that follow the rollback
// while the cache still shows the failed template decide from the DaemonSet the
// rollback returned: the rollback is written once.
func TestController_RollbackWrittenOnceWhileTheCacheLags(t *testing.T) {
	h := newHarness(t, harnessOptions{daemonSetLag: time.Second})
	patches := h.countTemplatePatches(nil)
	nodes, first := failingRollout(h)
	h.waitFor("the rollback", func() bool { return patches.Load() > 0 })
	// Pod events bring syncs at any time; here the test brings them, within the lag.
	for range 5 {
		h.ctrl.queue.Add(testNamespace + "/agent")
		time.Sleep(100 * time.Millisecond)
	}
	h.waitFor("every pod back on the first revision", func() bool {
		return h.currentHash(h.daemonSet("agent")) == first && h.converged("agent", nodes)
	})
	if n := patches.Load(); n != 1 {
		t.Errorf("the rollback was written %d times, want once", n)
	}
}

// A rollback decided from a cache that has not seen the user's newer template yet
// leaves that template alone: the rollback carries the resourceVersion it was decided
// from, and the API server refuses it. The user's release is then rolled out.
func TestController_StaleRollbackLeavesANewerTemplate(t *testing.T) {
	h := newHarness(t, harnessOptions{daemonSetLag: time.Second})
	const fixed = "example.com/agent:v3"
	h.countTemplatePatches(func(n int32) {
		if n != 1 {
			return
		}
		// Just before the first rollback is served, the user applies a fixed
		// release; the controller's cache has not seen it. (Through the store: the
		// fake clientset serves one request at a time.)
		obj, err := h.client.Tracker().Get(daemonSetsResource, testNamespace, "agent")
		if err != nil {
			t.Error(err)
			return
		}
		ds := obj.(*apps.DaemonSet).DeepCopy()
		ds.Spec.Template.Spec.Containers[0].Image = fixed
		delete(ds.Spec.Template.Annotations, annotationNeverReady)
		ds.Generation++
		ds.Annotations[daemon.TemplateGenerationAnnotation] = strconv.FormatInt(ds.Generation, 10)
		ds.ResourceVersion = h.api.NextResourceVersion()
		if err := h.client.Tracker().Update(daemonSetsResource, ds, testNamespace); err != nil {
			t.Error(err)
		}
	})
	nodes, first := failingRollout(h)
	h.waitForWithin(20*time.Second, "the user's release on every node", func() bool {
		ds := h.daemonSet("agent")
		return ds.Spec.Template.Spec.Containers[0].Image == fixed && h.currentHash(ds) != first && h.converged("agent", nodes)
	})
	for _, pods := range h.podsByNode(h.daemonSet("agent")) {
		if img := pods[0].Spec.Containers[0].Image; img != fixed {
			t.Errorf("pod %s runs %s, want the user's %s", pods[0].Name, img, fixed)
		}
	}
}
