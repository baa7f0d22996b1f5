package daemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Sick nodes: under rollout.everynode.dev/sick-nodes: exempt, a node that is down
// or being taken down does not hold a rollout back. Its pod, whatever it is, does not
// count against the budget and is left alone (neither deleted nor replaced) until
// the node recovers, when the update reaches it like any other. A node is sick when:
//
//   - its Ready condition has been False or Unknown for longer than the grace
//     (rollout.everynode.dev/sick-node-grace, a minute by default);
//   - it carries the node.kubernetes.io/unreachable or node.kubernetes.io/out-of-service
//     taint;
//   - one of the node maintenance conditions is True: GracefulNodeShutdownInProgress,
//     DrainInProgress or MaintenanceInProgress.
//
// A rollout cannot tell a broken node from a broken release when most nodes look
// sick: when more than half of the nodes that should run the pod are sick, the
// rollout holds (TooManySickNodes) rather than update the rest.
//
// Under sick-nodes: count (the default) none of this applies: a sick node's pod
// counts as unavailable, as upstream.

// The values of the sick-nodes annotation, and the default grace.
const (
	SickNodesCount       = "count"
	SickNodesExempt      = "exempt"
	DefaultSickNodeGrace = time.Minute
)

// kubeletShuttingDown is in the message of the Ready condition the kubelet reports
// while a graceful node shutdown is under way.
const kubeletShuttingDown = "node is shutting down"

// NodeTrouble says what is wrong with a node, if anything, and since when:
// ReasonNodeShuttingDown (a graceful shutdown under way, or the out-of-service taint
// of a node shut down), ReasonNodeMaintenance (DrainInProgress or
// MaintenanceInProgress), ReasonNodeNotReady (Ready False or Unknown, or the
// unreachable taint); "" for a healthy node. immediate is true when the trouble
// makes the node sick at once, without the grace.
func NodeTrouble(node *v1.Node) (cause Reason, since time.Time, immediate bool) {
	if node == nil {
		return "", time.Time{}, false
	}
	for _, c := range node.Status.Conditions {
		if c.Status != v1.ConditionTrue {
			continue
		}
		switch c.Type {
		case v1.NodeGracefulNodeShutdownInProgress:
			return ReasonNodeShuttingDown, c.LastTransitionTime.Time, true
		case v1.NodeDrainInProgress, v1.NodeMaintenanceInProgress:
			return ReasonNodeMaintenance, c.LastTransitionTime.Time, true
		}
	}
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case v1.TaintNodeOutOfService:
			return ReasonNodeShuttingDown, taintAdded(t), true
		case v1.TaintNodeUnreachable:
			return ReasonNodeNotReady, taintAdded(t), true
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type != v1.NodeReady || c.Status == v1.ConditionTrue {
			continue
		}
		if strings.Contains(c.Message, kubeletShuttingDown) {
			return ReasonNodeShuttingDown, c.LastTransitionTime.Time, true
		}
		return ReasonNodeNotReady, c.LastTransitionTime.Time, false
	}
	return "", time.Time{}, false
}

func taintAdded(t v1.Taint) time.Time {
	if t.TimeAdded == nil {
		return time.Time{}
	}
	return t.TimeAdded.Time
}

// sickness says whether node is sick at now, with the grace a NotReady node gets:
// the cause when it is, and otherwise, for a node NotReady within its grace, when it
// will be.
func sickness(node *v1.Node, now time.Time, grace time.Duration) (cause Reason, at time.Time) {
	cause, since, immediate := NodeTrouble(node)
	switch {
	case cause == "":
		return "", time.Time{}
	case immediate || !now.Before(since.Add(grace)):
		return cause, time.Time{}
	}
	return "", since.Add(grace)
}

// markSick notes which nodes are sick, when the policy exempts them; a node that
// will be sick once its grace ends asks for a look again then.
func (u *updater) markSick() {
	if !u.pol.ExemptSick {
		return
	}
	for i := range u.nodes {
		n := &u.nodes[i]
		cause, at := sickness(n.node, u.pl.now, u.pol.SickGrace)
		n.sick = cause
		if !at.IsZero() {
			u.recheck.within(at.Sub(u.pl.now) + time.Millisecond)
		}
	}
}

// holdSickNodes: under sick-nodes: exempt, more than half of the nodes that should
// run the pod being sick holds everything.
func holdSickNodes(u *updater, r *rollout, _ time.Time) {
	if !u.pol.ExemptSick {
		return
	}
	sick, desired := u.sickCount()
	if 2*sick > desired && r.gate.hold == "" {
		r.gate.hold = ReasonTooManySickNodes
		r.sick, r.sickOf = sick, desired
	}
}

// sickCount counts the sick nodes among those that should run the pod.
func (u *updater) sickCount() (sick, desired int) {
	for i := range u.nodes {
		n := &u.nodes[i]
		if n.node == nil || !n.verdict.Run {
			continue
		}
		desired++
		if n.sick != "" {
			sick++
		}
	}
	return sick, desired
}

// sickLeft lists the sick nodes that still run an older revision, as
// "name (cause)" in name order, when every node left on one is sick; nil otherwise.
// A sick node counts whether or not a new pod could be placed there now.
func (u *updater) sickLeft() []string {
	var out []string
	for i := range u.nodes {
		n := &u.nodes[i]
		if n.node == nil || (n.sick == "" && !n.verdict.Run) {
			continue
		}
		if cur, old, ok := u.podsOnNode(n); !ok || cur != nil || old == nil {
			continue
		}
		if n.sick == "" {
			return nil
		}
		out = append(out, fmt.Sprintf("%s (%s)", n.name, n.sick))
	}
	slices.Sort(out)
	return out
}
