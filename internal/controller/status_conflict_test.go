package controller

import (
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

// Status writes whose answers are lost while the DaemonSet watch is behind: the
// write happened, so the next one, built on the cached DaemonSet, conflicts. The
// controller reads the newer DaemonSet and builds on it, instead of conflicting
// again and again until the watch catches up.
func TestController_LostStatusAnswerCostsOneConflict(t *testing.T) {
	h := newHarness(t, harnessOptions{daemonSetLag: 2 * time.Second})
	var lost, conflicts atomic.Int32
	h.prependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		handled, obj, err := h.api.Handle(a)
		if apierrors.IsConflict(err) {
			conflicts.Add(1)
		}
		if err == nil && lost.Load() < 2 {
			lost.Add(1)
			return true, nil, brokenStream("Put", "/apis/apps/v1/namespaces/default/daemonsets/agent/status")
		}
		return handled, obj, err
	})
	nodes := h.createNodes("node", 3, nil)
	ds := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node, counted in the status", func() bool {
		s := h.daemonSet("agent").Status
		return h.converged("agent", nodes) && s.NumberAvailable == 3 && s.ObservedGeneration == ds.Generation
	})
	if n := lost.Load(); n != 2 {
		t.Errorf("%d status answers lost, want 2", n)
	}
	if n := conflicts.Load(); n > lost.Load() {
		t.Errorf("%d status writes conflicted after %d lost answers, want at most one each", n, lost.Load())
	}
}
