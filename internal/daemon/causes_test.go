package daemon

import (
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// Every node that should run the pod and has no available one gets one cause.
func TestUnavailableCauses(t *testing.T) {
	tests := []struct {
		name  string
		node  nodeOpt
		pods  func(ds *apps.DaemonSet) []*v1.Pod
		cause string // "" for an available pod
	}{
		{name: "available", pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1")} }},
		{name: "no pod yet", cause: "Starting"},
		{name: "new pod not Ready", pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", notReady())} },
			cause: "Starting"},
		{name: "old pod terminating for the update",
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "p", "n1", old(), notReady(), terminating())}
			}, cause: "Updating"},
		{name: "crash-looping", pods: func(ds *apps.DaemonSet) []*v1.Pod {
			return []*v1.Pod{newPod(ds, "p", "n1", notReady(), waitingIn("CrashLoopBackOff", false))}
		}, cause: "Failing (CrashLoopBackOff)"},
		{name: "image pull failing in an init container", pods: func(ds *apps.DaemonSet) []*v1.Pod {
			return []*v1.Pod{newPod(ds, "p", "n1", notReady(), waitingIn("ImagePullBackOff", true))}
		}, cause: "Failing (ImagePullBackOff)"},
		{name: "failed pod", pods: func(ds *apps.DaemonSet) []*v1.Pod {
			return []*v1.Pod{newPod(ds, "p", "n1", notReady(), withPhase(v1.PodFailed), withStatusReason("DeadlineExceeded"))}
		}, cause: "Failing (DeadlineExceeded)"},
		{name: "evicted by the kubelet", pods: func(ds *apps.DaemonSet) []*v1.Pod {
			return []*v1.Pod{newPod(ds, "p", "n1", notReady(), withPhase(v1.PodFailed), withStatusReason("Evicted"))}
		}, cause: "Evicted"},
		{name: "preempted", pods: func(ds *apps.DaemonSet) []*v1.Pod {
			p := newPod(ds, "p", "n1", withPhase(v1.PodFailed))
			p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
			return []*v1.Pod{p}
		}, cause: "Evicted"},
		{name: "node NotReady, even within a grace", node: withNodeCondition(v1.NodeReady, v1.ConditionFalse, t0.Add(-time.Second), ""),
			pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", notReady())} }, cause: "NodeNotReady"},
		{name: "node drained", node: withNodeCondition(v1.NodeDrainInProgress, v1.ConditionTrue, t0, ""),
			pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", notReady())} }, cause: "NodeMaintenance"},
		{name: "node shutting down", pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", stoppedByShutdown(t0))} },
			cause: "NodeShuttingDown"},
		{name: "old pod not Ready, nothing says why", pods: func(ds *apps.DaemonSet) []*v1.Pod {
			return []*v1.Pod{newPod(ds, "p", "n1", old(), notReady())}
		}, cause: "Unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", withOnDelete()) // nothing is replaced: the state is read as it is
			n1 := newNode("n1")
			if tt.node != nil {
				tt.node(n1)
			}
			var pods []*v1.Pod
			if tt.pods != nil {
				pods = tt.pods(ds)
			}
			s := snap(ds, []*v1.Node{n1, newNode("n2")}, append(pods, newPod(ds, "p2", "n2"))...)
			s.Revisions = []*apps.ControllerRevision{currentRevision(ds, 1)}
			r := Explain(s)
			got := ""
			for _, n := range r.Nodes {
				if n.Node == "n1" && n.Unavailable != nil {
					got = n.Unavailable.String()
				}
			}
			if got != tt.cause {
				t.Errorf("n1 unavailable: %q, want %q", got, tt.cause)
			}
			want := ""
			if tt.cause != "" {
				want = "1 " + tt.cause
			}
			if sum := FormatCauses(r.Unavailable); sum != want {
				t.Errorf("counts %q, want %q", sum, want)
			}
		})
	}
}

func TestFormatCausesMostFirst(t *testing.T) {
	got := FormatCauses([]CauseCount{{Unavailable{Cause: ReasonNodeNotReady}, 2}, {Unavailable{Cause: CauseFailing, Detail: "OOMKilled"}, 1}})
	if got != "2 NodeNotReady, 1 Failing (OOMKilled)" {
		t.Errorf("FormatCauses = %q", got)
	}
}

// The Progressing message names the unavailable pods the rollout does not explain
// (here a crash loop and a NotReady node), and not the routine ones (a new pod
// starting, an old one going).
func TestProgressingMessageNamesUnexplainedCauses(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationProgressDeadline, "10m"), withBudget("", "2"))
	s := policyCluster(ds, "n1", "n2", "n3", "n4")
	replace(s, newPod(ds, "new-n1", "n1", notReady(), waitingIn("CrashLoopBackOff", false)),
		newPod(ds, "new-n2", "n2", notReady()))
	c := Progressing(Decide(s).Status)
	if c == nil || Reason(c.Reason) != ReasonRollingOut || !strings.HasSuffix(c.Message, "; unavailable: 1 Failing (CrashLoopBackOff)") {
		t.Fatalf("Progressing %+v, want RollingOut ending with the crash loop alone", c)
	}
	sick(ds, s, t0.Add(-time.Second), "n3")
	if c := Progressing(Decide(s).Status); c == nil || !strings.Contains(c.Message, "; unavailable: 1 Failing (CrashLoopBackOff), 1 NodeNotReady") {
		t.Fatalf("Progressing %+v, want the crash loop and the NotReady node named", c)
	}
	replace(s, newPod(ds, "new-n1", "n1", notReady()), newPod(ds, "old-n3", "n3", old()))
	onNodes(s, withNodeCondition(v1.NodeReady, v1.ConditionTrue, t0.Add(-time.Second), ""), "n3")
	if c := Progressing(Decide(s).Status); c == nil || strings.Contains(c.Message, "unavailable") {
		t.Fatalf("Progressing %+v, want no causes named while pods only start", c)
	}
}
