package daemon

import (
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Sick nodes under sick-nodes: exempt, beside the default (count, upstream's
// behaviour). Each row starts from policyCluster: n1..n5 run an available pod of
// the older revision, maxUnavailable 1.

// sick makes the named nodes NotReady since at, and their pods not Ready, as the
// node lifecycle controller marks them.
func sick(ds *apps.DaemonSet, s *Snapshot, at time.Time, names ...string) {
	for _, n := range s.Nodes {
		if slices.Contains(names, n.Name) {
			withNodeCondition(v1.NodeReady, v1.ConditionFalse, at, "")(n)
		}
	}
	for _, name := range names {
		replace(s, newPod(ds, "old-"+name, name, old(), notReady()))
	}
}

// withNodeCondition sets one condition of the node.
func withNodeCondition(t v1.NodeConditionType, status v1.ConditionStatus, since time.Time, message string) nodeOpt {
	return func(n *v1.Node) {
		n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(c v1.NodeCondition) bool { return c.Type == t })
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: t, Status: status, LastTransitionTime: metav1.NewTime(since), Message: message})
	}
}

// onNodes applies opt to the named nodes of s.
func onNodes(s *Snapshot, opt nodeOpt, names ...string) {
	for _, n := range s.Nodes {
		if slices.Contains(names, n.Name) {
			opt(n)
		}
	}
}

func exempt(kv ...string) dsOpt {
	return withAnnotations(append([]string{AnnotationSickNodes, SickNodesExempt}, kv...)...)
}

func TestSickNodes(t *testing.T) {
	long := t0.Add(-5 * time.Minute)
	runRolloutRows(t, []rolloutRow{
		{name: "count (no annotation): the sick nodes' pods are replaced at once and use up the budget, as upstream",
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { sick(ds, s, long, "n4", "n5") },
			deletes: []string{"old-n4", "old-n5"}},
		{name: "count, said outright: the same", ds: []dsOpt{withAnnotations(AnnotationSickNodes, SickNodesCount)},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { sick(ds, s, long, "n4", "n5") },
			deletes: []string{"old-n4", "old-n5"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "exempt: the sick nodes are left alone and the budget goes to a healthy node", ds: []dsOpt{exempt()},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { sick(ds, s, long, "n4", "n5") },
			deletes: []string{"old-n1"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			waits: with(all(ReasonBudgetFull, "n1", "n4", "n5"), "n4", "NodeNotReady", "n5", "NodeNotReady")},
		{name: "exempt: a node NotReady within the grace still counts, and the sync looks again when the grace ends", ds: []dsOpt{exempt()},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { sick(ds, s, t0.Add(-20*time.Second), "n4", "n5") },
			deletes: []string{"old-n4", "old-n5"}, reason: ReasonRollingOut, status: v1.ConditionTrue,
			requeue: 40*time.Second + time.Millisecond},
		{name: "exempt with a shorter grace: sick after it", ds: []dsOpt{exempt(AnnotationSickNodeGrace, "10s")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { sick(ds, s, t0.Add(-20*time.Second), "n4", "n5") },
			deletes: []string{"old-n1"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "exempt: the unreachable taint makes a node sick at once", ds: []dsOpt{exempt()},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				onNodes(s, withTaint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute), "n1")
				replace(s, newPod(ds, "old-n1", "n1", old(), notReady()))
			},
			deletes: []string{"old-n2"}, waits: with(all(ReasonBudgetFull, "n1", "n2"), "n1", "NodeNotReady")},
		{name: "exempt: a drain under way makes a node sick at once, its Ready pod untouched", ds: []dsOpt{exempt()},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				onNodes(s, withNodeCondition(v1.NodeDrainInProgress, v1.ConditionTrue, t0, ""), "n1")
			},
			deletes: []string{"old-n2"}, waits: with(all(ReasonBudgetFull, "n1", "n2"), "n1", "NodeMaintenance")},
		{name: "exempt: a kubelet shutting down makes its node sick at once", ds: []dsOpt{exempt()},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				onNodes(s, withNodeCondition(v1.NodeReady, v1.ConditionFalse, t0, "container runtime is down, node is shutting down"), "n1")
			},
			deletes: []string{"old-n2"}, waits: with(all(ReasonBudgetFull, "n1", "n2"), "n1", "NodeShuttingDown")},
		{name: "exempt: GracefulNodeShutdownInProgress and out-of-service are shutdowns", ds: []dsOpt{exempt()},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				onNodes(s, withNodeCondition(v1.NodeGracefulNodeShutdownInProgress, v1.ConditionTrue, t0, ""), "n1")
				onNodes(s, withTaint(v1.TaintNodeOutOfService, v1.TaintEffectNoSchedule), "n2")
			},
			deletes: []string{"old-n3"}, waits: with(all(ReasonBudgetFull, "n1", "n2", "n3"), "n1", "NodeShuttingDown", "n2", "NodeShuttingDown")},
		{name: "exempt: a maintenance condition that is False does nothing", ds: []dsOpt{exempt()},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				onNodes(s, withNodeCondition(v1.NodeMaintenanceInProgress, v1.ConditionFalse, t0, ""), "n1")
			},
			deletes: []string{"old-n1"}},
		{name: "exempt: more than half of the nodes sick holds the rollout", ds: []dsOpt{exempt()},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { sick(ds, s, long, "n3", "n4", "n5") },
			reason: ReasonTooManySickNodes, status: v1.ConditionTrue, message: "3 of 5 nodes are sick",
			waits:   with(all(ReasonTooManySickNodes, "n3", "n4", "n5"), "n3", "NodeNotReady", "n4", "NodeNotReady", "n5", "NodeNotReady"),
			requeue: 0},
		{name: "exempt: only sick nodes left on the old revision: the rollout waits for them", ds: []dsOpt{exempt()},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				updated(ds, s, "n1", "n2", "n3")
				sick(ds, s, long, "n4", "n5")
			},
			reason: ReasonSickNodesLeft, status: v1.ConditionTrue, message: "2 sick nodes keep their pods until they recover (rollout.everynode.dev/sick-nodes): n4 (NodeNotReady), n5 (NodeNotReady)",
			waits: map[string]Reason{"n4": "NodeNotReady", "n5": "NodeNotReady"}},
		{name: "exempt: sick nodes tainted not-ready (no new pod placed there) still keep the rollout from being complete", ds: []dsOpt{exempt()},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				updated(ds, s, "n1", "n2", "n3")
				sick(ds, s, long, "n4", "n5")
				onNodes(s, withTaint(v1.TaintNodeNotReady, v1.TaintEffectNoSchedule), "n4", "n5")
			},
			reason: ReasonSickNodesLeft, status: v1.ConditionTrue, message: "n4 (NodeNotReady), n5 (NodeNotReady)"},
		{name: "count: the same nodes' unavailable pods are deleted, and not placed again", ds: []dsOpt{withAnnotations(AnnotationSickNodes, SickNodesCount)},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				updated(ds, s, "n1", "n2", "n3")
				sick(ds, s, long, "n4", "n5")
				onNodes(s, withTaint(v1.TaintNodeNotReady, v1.TaintEffectNoSchedule), "n4", "n5")
			},
			deletes: []string{"old-n4", "old-n5"}, marks: []string{"ds-" + hashOf(newDS("ds")) + " " + MarkAvailable + "="}},
		{name: "exempt: a node that recovered is updated like any other", ds: []dsOpt{exempt()},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				updated(ds, s, "n1", "n2", "n3", "n4")
				onNodes(s, withNodeCondition(v1.NodeReady, v1.ConditionTrue, t0, ""), "n5")
			},
			deletes: []string{"old-n5"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "exempt: a sick node's new pod that is not available fails no progress deadline", ds: []dsOpt{exempt(AnnotationProgressDeadline, "1m"),
			withProgressing(ReasonRollingOut, v1.ConditionTrue, t0.Add(-time.Hour))},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				updated(ds, s, "n1", "n2", "n3", "n4")
				onNodes(s, withNodeCondition(v1.NodeReady, v1.ConditionFalse, long, ""), "n5")
				replace(s, newPod(ds, "new-n5", "n5", notReady(), createdAt(t0.Add(-time.Hour))))
			},
			reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "count: the same pod fails the progress deadline", ds: []dsOpt{withAnnotations(AnnotationProgressDeadline, "1m"),
			withProgressing(ReasonRollingOut, v1.ConditionTrue, t0.Add(-time.Hour))},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				updated(ds, s, "n1", "n2", "n3", "n4")
				onNodes(s, withNodeCondition(v1.NodeReady, v1.ConditionFalse, long, ""), "n5")
				replace(s, newPod(ds, "new-n5", "n5", notReady(), createdAt(t0.Add(-time.Hour))))
			},
			reason: ReasonProgressDeadlineExceeded, status: v1.ConditionFalse,
			marks: []string{"ds-" + hashOf(newDS("ds")) + " " + MarkFailed + "="}},
		{name: "exempt with maxSurge: no surge pod on a sick node", ds: []dsOpt{exempt(), withBudget("1", "0")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { sick(ds, s, long, "n4", "n5") },
			creates: []string{"n1"}, waits: with(all(ReasonBudgetFull, "n1", "n4", "n5"), "n4", "NodeNotReady", "n5", "NodeNotReady")},
		{name: "exempt: a sick node does not hold its wave back", ds: []dsOpt{exempt(AnnotationWaves, "zone")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				zones(s)
				updated(ds, s, "n1")
				sick(ds, s, long, "n3")
			},
			deletes: []string{"old-n2"}},
		{name: "an invalid sick-nodes value holds the rollout", ds: []dsOpt{withAnnotations(AnnotationSickNodes, "ignore")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, message: `want "count"`},
		{name: "a grace without exempt holds the rollout", ds: []dsOpt{withAnnotations(AnnotationSickNodeGrace, "10s")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, message: "needs rollout.everynode.dev/sick-nodes: exempt"},
	})
}

// Companion mode applies the same rules over the other controller's placement.
func TestSickNodesCompanion(t *testing.T) {
	ds := companionDS("1", AnnotationSickNodes, SickNodesExempt)
	s := companionCluster(ds)
	sick(ds, s, t0.Add(-5*time.Minute), "n4", "n5")
	p := DecideUpdate(s)
	if got := deletedNames(p); !slices.Equal(got, []string{"old-n1"}) {
		t.Errorf("companion mode deletes %v, want [old-n1]: the sick nodes left alone, the budget spent on a healthy node", got)
	}
	ds = companionDS("1")
	s = companionCluster(ds)
	sick(ds, s, t0.Add(-5*time.Minute), "n4", "n5")
	if got := deletedNames(DecideUpdate(s)); !slices.Equal(got, []string{"old-n4", "old-n5"}) {
		t.Errorf("companion mode without the annotation deletes %v, want the sick nodes' unavailable pods [old-n4 old-n5]", got)
	}
}

func TestNodeTrouble(t *testing.T) {
	tests := []struct {
		name      string
		node      *v1.Node
		cause     Reason
		immediate bool
	}{
		{"no conditions", newNode("n"), "", false},
		{"Ready", newNode("n", withNodeCondition(v1.NodeReady, v1.ConditionTrue, t0, "")), "", false},
		{"Ready False", newNode("n", withNodeCondition(v1.NodeReady, v1.ConditionFalse, t0, "")), ReasonNodeNotReady, false},
		{"Ready Unknown", newNode("n", withNodeCondition(v1.NodeReady, v1.ConditionUnknown, t0, "")), ReasonNodeNotReady, false},
		{"unreachable", newNode("n", withTaint(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule)), ReasonNodeNotReady, true},
		{"out of service", newNode("n", withTaint(v1.TaintNodeOutOfService, v1.TaintEffectNoExecute)), ReasonNodeShuttingDown, true},
		{"kubelet shutting down", newNode("n", withNodeCondition(v1.NodeReady, v1.ConditionFalse, t0, "node is shutting down")), ReasonNodeShuttingDown, true},
		{"shutdown condition", newNode("n", withNodeCondition(v1.NodeGracefulNodeShutdownInProgress, v1.ConditionTrue, t0, "")), ReasonNodeShuttingDown, true},
		{"drain", newNode("n", withNodeCondition(v1.NodeDrainInProgress, v1.ConditionTrue, t0, "")), ReasonNodeMaintenance, true},
		{"maintenance", newNode("n", withNodeCondition(v1.NodeMaintenanceInProgress, v1.ConditionTrue, t0, "")), ReasonNodeMaintenance, true},
		{"maintenance planned only", newNode("n", withNodeCondition(v1.NodeMaintenancePlanned, v1.ConditionTrue, t0, "")), "", false},
		{"cordoned only", newNode("n", withTaint(v1.TaintNodeUnschedulable, v1.TaintEffectNoSchedule)), "", false},
	}
	for _, tt := range tests {
		cause, _, immediate := NodeTrouble(tt.node)
		if cause != tt.cause || immediate != tt.immediate {
			t.Errorf("%s: NodeTrouble = %q, immediate %v; want %q, %v", tt.name, cause, immediate, tt.cause, tt.immediate)
		}
	}
}
