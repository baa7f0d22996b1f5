package daemon

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// The healthy-time bake (rollout.everynode.dev/min-healthy): a pod of the current
// revision frees its slot in the update's budget, lets a surged old pod go, finishes
// its wave and counts as progress for the progress deadline only once it has been
// available and Ready, with no container restarted, for min-healthy. The status
// counters do not change: numberAvailable and the rest stay upstream's.

// healthy reports whether a pod has passed the bake at the view's time (any
// available pod when there is no bake).
func (v *view) healthy(pod *v1.Pod) bool {
	if !v.available(pod) || v.inPlacePending(pod) {
		return false
	}
	if v.minHealthy <= 0 {
		return true
	}
	return !v.now.Before(v.healthyAt(pod))
}

// healthyAt is when an available pod passes the bake: min-healthy after its last
// readiness change or container (re)start, and no sooner than it became available.
func (v *view) healthyAt(pod *v1.Pod) time.Time {
	avail, _ := v.availableSince(pod)
	if v.minHealthy <= 0 {
		return avail
	}
	since := time.Time{}
	if c := readyCondition(pod); c != nil {
		since = c.LastTransitionTime.Time
	}
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			if r := s.State.Running; r != nil && r.StartedAt.Time.After(since) {
				since = r.StartedAt.Time
			}
		}
	}
	at := since.Add(v.minHealthy)
	if avail.After(at) {
		at = avail
	}
	return at
}

// waitForBake notes that node n's new pod is available but still baking, until when.
func (n *nodeState) waitForBake(until time.Time) {
	if n.wait != ReasonFailedPodBackoff {
		n.wait, n.waitUntil = ReasonNewPodBaking, until
	}
}
