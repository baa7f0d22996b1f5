package daemon

import (
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// withHostPort gives the pod a container asking for a host port.
func withHostPort(port int32) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c", Ports: []v1.ContainerPort{{ContainerPort: port, HostPort: port}}})
	}
}

// unschedulable leaves the pod unscheduled with the scheduler's message.
func unschedulable(msg string) podOpt {
	return func(p *v1.Pod) {
		unbound()(p)
		p.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse,
			Reason: v1.PodReasonUnschedulable, Message: msg}}}
	}
}

const portsMsg = "0/5 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, 4 node(s) didn't match Pod's node affinity/selector."

func TestSurgeHostPortConflict(t *testing.T) {
	surge := withBudget("2", "0")
	watched := withAnnotations(AnnotationMaxRestarts, "3")
	fallback := withAnnotations(AnnotationMaxRestarts, "3", AnnotationSurgeFallback, SurgeDeleteFirst)
	// blockedOn gives each node an old pod holding port 8080 and a surge pod
	// the scheduler cannot place for it.
	blockedOn := func(nodes ...string) func(*apps.DaemonSet, *Snapshot) {
		return func(ds *apps.DaemonSet, s *Snapshot) {
			for _, n := range nodes {
				replace(s, newPod(ds, "old-"+n, n, old(), withHostPort(8080)))
				s.Pods = append(s.Pods, newPod(ds, "new-"+n, n, withHostPort(8080), unschedulable(portsMsg)))
			}
		}
	}
	runRolloutRows(t, []rolloutRow{
		{name: "said, node by node, in the condition and an event; other nodes still surge", ds: []dsOpt{surge, watched},
			setup: blockedOn("n1"), creates: []string{"n2"},
			reason: ReasonSurgeHostPort, status: v1.ConditionFalse, events: []string{string(ReasonSurgeHostPort)},
			message: "the surge pods of revision 2 on nodes n1 cannot be scheduled: the old pods there hold host port 8080/TCP; set " + AnnotationSurgeFallback,
			waits:   with(all(ReasonBudgetFull, "n1", "n2"), "n1", string(ReasonSurgeHostPort))},
		{name: "delete-first: the old pod goes first", ds: []dsOpt{surge, fallback},
			setup: blockedOn("n1"), deletes: []string{"old-n1"}, creates: []string{"n2"},
			reason: ReasonRollingOut, status: v1.ConditionTrue, message: "replaces them old pod first, one node at a time"},
		{name: "delete-first: one node at a time, by name", ds: []dsOpt{surge, fallback},
			setup: blockedOn("n2", "n1"), deletes: []string{"old-n1"}},
		{name: "delete-first: not while another node waits for its replacement", ds: []dsOpt{surge, fallback},
			setup: then(blockedOn("n2"), func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "new-n1", "n1", notReady()))
			}),
			creates: []string{"n3"},
			waits:   with(all(ReasonBudgetFull, "n1", "n2", "n3"), "n1", string(ReasonNewPodUnavailable), "n2", string(ReasonSurgeHostPort))},
		{name: "delete-first: not while paused", ds: []dsOpt{surge, withAnnotations(AnnotationSurgeFallback, SurgeDeleteFirst, AnnotationPaused, "true")},
			setup: blockedOn("n1"), reason: ReasonPaused, status: v1.ConditionUnknown},
		{name: "unschedulable for another reason: only waited for", ds: []dsOpt{surge, fallback},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Pods = append(s.Pods, newPod(ds, "new-n1", "n1", withHostPort(8080), unschedulable("0/5 nodes are available: 1 Insufficient cpu.")))
			},
			creates: []string{"n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue, message: "rolling out revision 2"},
		{name: "another port: not this conflict", ds: []dsOpt{surge, fallback},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "old-n1", "n1", old(), withHostPort(9090)))
				s.Pods = append(s.Pods, newPod(ds, "new-n1", "n1", withHostPort(8080), unschedulable(portsMsg)))
			},
			creates: []string{"n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "without rollout annotations: a Warning event, no condition, no fallback", ds: []dsOpt{surge},
			setup: blockedOn("n1"), creates: []string{"n2"}, events: []string{string(ReasonSurgeHostPort)}},
	})
}

func TestHostPortMessageListsFiveNodes(t *testing.T) {
	var blocks []portBlock
	for _, n := range []string{"g", "f", "e", "d", "c", "b", "a"} {
		blocks = append(blocks, portBlock{node: n, ports: []string{"53/UDP", "8080/TCP"}})
	}
	got := hostPortMessage(blocks, 4, false)
	want := "the surge pods of revision 4 on nodes a, b, c, d, e and 2 more cannot be scheduled: the old pods there hold host port 53/UDP, 8080/TCP"
	if len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("message = %q, want it to start %q", got, want)
	}
}
