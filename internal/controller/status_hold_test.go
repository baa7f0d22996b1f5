package controller

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
)

// While a DaemonSet's creates wait in the write queue behind the rate limit, the
// status writes that would only move its counters are held; a new observedGeneration
// is written at once all the same; once the creates have drained the status is
// written promptly, and shows every pod.
func TestController_CountersOnlyStatusHeldWhilePodWritesQueued(t *testing.T) {
	g := newGate()
	h := newHarness(t, harnessOptions{limiter: g, writers: 1, statusInterval: 100 * time.Millisecond, statusHold: time.Minute})
	nodes := h.createNodes("node", 6, nil)
	ds := h.createDaemonSet(newDaemonSet("agent"))
	// Its first status observes the generation, and is written at once.
	h.waitFor("the first status", func() bool { return h.daemonSet("agent").Status.ObservedGeneration == ds.Generation })
	h.waitQueued(6)
	time.Sleep(200 * time.Millisecond) // past the interval of that write
	writes := h.countStatusWrites()

	g.release(3)
	h.waitFor("3 pods created and Running", func() bool { return countRunning(h, ds) == 3 })
	h.holdsFor(time.Second, "no status write while 3 creates are queued", func() bool {
		return writes.Load() == 0 && h.ctrl.writes.busy(h.key(ds))
	})
	if s := h.daemonSet("agent").Status; s.CurrentNumberScheduled != 0 {
		t.Errorf("the status shows %d pods scheduled; want the held 0", s.CurrentNumberScheduled)
	}

	next := h.updateDaemonSet("agent", func(ds *apps.DaemonSet) { ds.Spec.MinReadySeconds = 1 })
	h.waitForWithin(5*time.Second, "the new generation observed while the creates are queued", func() bool {
		return h.daemonSet("agent").Status.ObservedGeneration == next.Generation
	})
	if !h.ctrl.writes.busy(h.key(ds)) {
		t.Error("the creates drained before the new generation was written; the test shows nothing")
	}

	g.open.Store(true)
	h.waitForWithin(5*time.Second, "the status written once the creates drained", func() bool { return h.converged("agent", nodes) })
}

func (h *harness) key(ds *apps.DaemonSet) string { return ds.Namespace + "/" + ds.Name }

func countRunning(h *harness, ds *apps.DaemonSet) int {
	n := 0
	for _, pod := range h.podsOf(ds) {
		if isRunningReady(&pod) {
			n++
		}
	}
	return n
}
