package daemon

import (
	"slices"
	"time"

	apps "k8s.io/api/apps/v1"
)

// counts are the DaemonSet status counters.
type counts struct {
	desired, current, misscheduled, ready, available, updated int32
}

// count computes the status counters over the existing nodes:
//   - desired: nodes where the pod should run (Verdict.Run);
//   - current: of those, nodes with a pod; misscheduled: other nodes with a pod;
//   - ready, available, updated: of the current nodes, those whose oldest pod (bound
//     first) is Ready, available for minReadySeconds, and of the current revision.
//
// It also returns how long until the next Ready pod on an existing node becomes
// available (zero if none is waiting), so the counters can be refreshed and the rollout
// resumed then. Every pod counts, not only the one the counters look at: while
// surging, the new pod beside an older one waits out minReadySeconds before the old
// pod may go, and nothing else would prompt another look.
func (v *view) count() (counts, time.Duration) {
	var c counts
	var wait time.Duration
	for _, n := range v.nodes {
		if d := v.countNode(n, &c); d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	return c, wait
}

// countNode adds one node's share to c and returns how long until a Ready pod on it
// becomes available (zero if none is waiting).
func (v *view) countNode(n *nodeState, c *counts) time.Duration {
	var wait time.Duration
	if n.node == nil {
		return 0
	}
	for _, pod := range n.pods {
		if d, ok := untilAvailable(pod, v.ds.Spec.MinReadySeconds, v.now); ok && (wait == 0 || d < wait) {
			wait = d
		}
	}
	if !n.verdict.Run {
		if len(n.pods) > 0 {
			c.misscheduled++
		}
		return wait
	}
	c.desired++
	if len(n.pods) == 0 {
		return wait
	}
	c.current++
	pod := slices.MinFunc(n.pods, olderFirst)
	if IsReady(pod) {
		c.ready++
		if v.available(pod) {
			c.available++
		}
	}
	if v.updated(pod) {
		c.updated++
	}
	return wait
}

// nextStatus returns the status to store, or nil if the stored one already says the
// same. observed raises observedGeneration to the DaemonSet's generation; it is false
// while the controller's own writes are still in flight. Fields other than the
// counters (conditions among them) are kept as they are.
func nextStatus(ds *apps.DaemonSet, c counts, observed bool, collisionCount *int32) *apps.DaemonSetStatus {
	old := &ds.Status
	next := old.DeepCopy()
	next.DesiredNumberScheduled = c.desired
	next.CurrentNumberScheduled = c.current
	next.NumberMisscheduled = c.misscheduled
	next.NumberReady = c.ready
	next.NumberAvailable = c.available
	next.NumberUnavailable = c.desired - c.available
	next.UpdatedNumberScheduled = c.updated
	if observed {
		next.ObservedGeneration = ds.Generation
	}
	next.CollisionCount = nil
	if collisionCount != nil {
		next.CollisionCount = new(int32)
		*next.CollisionCount = *collisionCount
	}
	unchanged := next.DesiredNumberScheduled == old.DesiredNumberScheduled &&
		next.CurrentNumberScheduled == old.CurrentNumberScheduled &&
		next.NumberMisscheduled == old.NumberMisscheduled &&
		next.NumberReady == old.NumberReady &&
		next.NumberAvailable == old.NumberAvailable &&
		next.NumberUnavailable == old.NumberUnavailable &&
		next.UpdatedNumberScheduled == old.UpdatedNumberScheduled &&
		equalCount(next.CollisionCount, old.CollisionCount) &&
		(old.ObservedGeneration >= ds.Generation || !observed)
	if unchanged {
		return nil
	}
	return next
}

func equalCount(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
