package daemon

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Node shutdown: while a node shuts down, its kubelet stops every pod there and
// refuses new ones. Recreating a daemon pod it stopped only makes it refuse the next
// (Failed, NodeShutdown), again and again. So placement leaves such a node alone —
// no pod created, none deleted, failed ones kept for people to see — and so does the
// update, until the node is back; then the failed pods are replaced as usual.
//
// A node is shutting down when NodeTrouble says so (the kubelet reports it in its
// Ready condition, the GracefulNodeShutdownInProgress condition is True, or the
// out-of-service taint marks a node shut down), or when the kubelet stopped or
// refused one of the DaemonSet's pods there for a shutdown and the node has not
// been Ready since.

// Pod status reasons the kubelet gives during a graceful node shutdown.
const (
	// PodReasonShutdown: a pod the shutdown stopped (with a DisruptionTarget
	// condition, reason TerminationByKubelet).
	PodReasonShutdown = "Terminated"
	// PodReasonShutdownRejected: a pod the kubelet refused while shutting down.
	PodReasonShutdownRejected = "NodeShutdown"
)

// markShutdowns marks the nodes shutting down, for the update stage alone (in
// companion mode, where another controller places the pods); placement marks them
// as it goes (placeNode).
func (pl *Placement) markShutdowns() {
	for _, n := range pl.nodes {
		n.shuttingDown = n.node != nil && nodeShuttingDown(n)
	}
}

// nodeShuttingDown reports whether node n is shutting down.
func nodeShuttingDown(n *nodeState) bool {
	if cause, _, _ := NodeTrouble(n.node); cause == ReasonNodeShuttingDown {
		return true
	}
	for _, pod := range n.pods {
		if at, ok := stoppedForShutdown(pod); ok && !nodeReadySince(n.node, at) {
			return true
		}
	}
	return false
}

// stoppedForShutdown reports whether the kubelet stopped or refused pod for a
// node shutdown, and when.
func stoppedForShutdown(pod *v1.Pod) (time.Time, bool) {
	if pod.Status.Phase != v1.PodFailed {
		return time.Time{}, false
	}
	switch pod.Status.Reason {
	case PodReasonShutdownRejected:
		return pod.CreationTimestamp.Time, true
	case PodReasonShutdown:
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet {
				return c.LastTransitionTime.Time, true
			}
		}
	}
	return time.Time{}, false
}

// nodeReadySince reports whether node has been Ready since at (or turned Ready after).
func nodeReadySince(node *v1.Node, at time.Time) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue && c.LastTransitionTime.After(at)
		}
	}
	return false
}
