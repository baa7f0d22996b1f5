package daemon

import (
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stoppedByShutdown makes the pod one a node shutdown stopped at at.
func stoppedByShutdown(at time.Time) podOpt {
	return func(p *v1.Pod) {
		p.Status.Phase, p.Status.Reason = v1.PodFailed, PodReasonShutdown
		p.Status.Conditions = []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionFalse},
			{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, LastTransitionTime: metav1.NewTime(at)},
		}
	}
}

func withStatusReason(reason string) podOpt {
	return func(p *v1.Pod) { p.Status.Reason = reason }
}

// A node shutting down is left alone: nothing created or deleted there until it is
// back; every other node is placed as usual.
func TestShutdownPlacement(t *testing.T) {
	stopped := t0.Add(-time.Minute)
	everything := withTolerations(v1.Toleration{Operator: v1.TolerationOpExists})
	tests := []struct {
		name    string
		node    *v1.Node
		pods    func(ds *apps.DaemonSet) []*v1.Pod
		creates []string
		deletes []string
		held    bool // n1 waits for the node to come back
	}{
		{name: "the kubelet reports the shutdown: its stopped pod is kept, none created", held: true,
			node: newNode("n1", withNodeCondition(v1.NodeReady, v1.ConditionFalse, stopped, "node is shutting down")),
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "p1", "n1", stoppedByShutdown(stopped))}
			}},
		{name: "a pod stopped for a shutdown, the node not Ready since: held", held: true,
			node: newNode("n1", withNodeCondition(v1.NodeReady, v1.ConditionTrue, stopped.Add(-time.Hour), "")),
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "p1", "n1", stoppedByShutdown(stopped))}
			}},
		{name: "a pod refused while shutting down: held", held: true,
			node: newNode("n1"),
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "p1", "n1", withPhase(v1.PodFailed), withStatusReason(PodReasonShutdownRejected))}
			}},
		{name: "no pod on a node shutting down: none created", held: true,
			node: newNode("n1", withNodeCondition(v1.NodeGracefulNodeShutdownInProgress, v1.ConditionTrue, stopped, ""))},
		{name: "out of service: none created", held: true,
			node: newNode("n1", withTaint(v1.TaintNodeOutOfService, v1.TaintEffectNoExecute))},
		{name: "back: Ready since the shutdown, the stopped pod is replaced",
			node: newNode("n1", withNodeCondition(v1.NodeReady, v1.ConditionTrue, stopped.Add(time.Second), "")),
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "p1", "n1", stoppedByShutdown(stopped))}
			},
			deletes: []string{"p1"}},
		{name: "evicted by the kubelet for pressure, not a shutdown: replaced",
			node: newNode("n1", withNodeCondition(v1.NodeReady, v1.ConditionTrue, stopped.Add(-time.Hour), "")),
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				p := newPod(ds, "p1", "n1", stoppedByShutdown(stopped))
				p.Status.Reason = "Evicted"
				return []*v1.Pod{p}
			},
			deletes: []string{"p1"}},
		{name: "a healthy node without a pod gets one", node: newNode("n1"), creates: []string{"n1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", everything)
			var pods []*v1.Pod
			if tt.pods != nil {
				pods = tt.pods(ds)
			}
			s := snap(ds, []*v1.Node{tt.node, newNode("n2")}, append(pods, newPod(ds, "p2", "n2"))...)
			for _, slim := range []bool{false, true} {
				if slim {
					for i, p := range s.Pods {
						s.Pods[i] = SlimPod(p)
					}
				}
				p := Decide(s)
				if got := createdOn(p); !slices.Equal(got, tt.creates) {
					t.Errorf("slim %v: creates on %v, want %v", slim, got, tt.creates)
				}
				if got := deletedNames(p); !slices.Equal(got, tt.deletes) {
					t.Errorf("slim %v: deletes %v, want %v", slim, got, tt.deletes)
				}
				if got := waits(s)["n1"]; (got == ReasonNodeShuttingDown) != tt.held {
					t.Errorf("slim %v: n1 waits for %q, want NodeShuttingDown: %v", slim, got, tt.held)
				}
			}
		})
	}
}

// In companion mode too, the update does not delete a pod the shutdown stopped (the
// other controller would place another for the kubelet to refuse).
func TestShutdownCompanion(t *testing.T) {
	ds := companionDS("1")
	s := companionCluster(ds)
	onNodes(s, withNodeCondition(v1.NodeReady, v1.ConditionFalse, t0, "node is shutting down"), "n1")
	replace(s, newPod(ds, "old-n1", "n1", old(), stoppedByShutdown(t0)))
	p := DecideUpdate(s)
	if got := deletedNames(p); len(got) != 0 {
		t.Errorf("companion mode deletes %v, want nothing: the shutting-down node's pod counts against the budget and is left alone", got)
	}
	if got := waits(s)["n1"]; got != ReasonNodeShuttingDown {
		t.Errorf("n1 waits for %q, want NodeShuttingDown", got)
	}
}

// The update leaves a node shutting down alone too, and counts it against the
// budget while it has no available pod.
func TestShutdownUpdate(t *testing.T) {
	runRolloutRows(t, []rolloutRow{
		{name: "its old pod, still Ready, is not updated; the budget goes elsewhere",
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				onNodes(s, withNodeCondition(v1.NodeGracefulNodeShutdownInProgress, v1.ConditionTrue, t0, ""), "n1")
			},
			deletes: []string{"old-n2"}},
		{name: "its stopped pod counts against the budget, as any unavailable pod",
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				onNodes(s, withNodeCondition(v1.NodeReady, v1.ConditionFalse, t0, "node is shutting down"), "n1")
				replace(s, newPod(ds, "old-n1", "n1", old(), stoppedByShutdown(t0)))
			},
			waits: map[string]Reason{"n1": ReasonNodeShuttingDown, "n2": ReasonBudgetFull, "n3": ReasonBudgetFull, "n4": ReasonBudgetFull, "n5": ReasonBudgetFull}},
	})
}
