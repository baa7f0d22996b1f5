package controller

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

func TestController_CountsPodsAvailableAfterMinReadySeconds(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	nodes := h.createNodes("node", 3, nil)
	ds := h.createDaemonSet(func() *apps.DaemonSet {
		ds := newDaemonSet("agent")
		// Long enough that the state "Ready, not yet available" outlasts the pods'
		// creation, a sync and a status write even under the race detector.
		ds.Spec.MinReadySeconds = 3
		return ds
	}())
	h.waitFor("every pod Ready but none available yet", func() bool {
		s := h.daemonSet("agent").Status
		return s.NumberReady == 3 && s.NumberAvailable == 0 && s.NumberUnavailable == 3
	})
	// No pod or node changes from here on: only the controller's own requeue can
	// bring the status up to date.
	h.waitForWithin(6*time.Second, "every pod available", func() bool {
		s := h.daemonSet("agent").Status
		return s.NumberAvailable == 3 && s.NumberUnavailable == 0
	})
	seen := time.Now()
	for _, pod := range h.podsOf(ds) {
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodReady && seen.Before(c.LastTransitionTime.Add(3*time.Second)) {
				t.Errorf("pod %s, Ready since %v, was counted available within minReadySeconds", pod.Name, c.LastTransitionTime)
			}
		}
	}
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
}
