package dashboard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/inspect"
)

var (
	eligible = daemon.Verdict{Run: true, KeepRunning: true, Reason: daemon.ReasonEligible}
	current  = daemon.PodReport{Name: "new", Updated: true, Phase: v1.PodRunning, Ready: true, Available: true}
	old      = daemon.PodReport{Name: "old", Phase: v1.PodRunning, Ready: true, Available: true}
)

func TestCellOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		node daemon.NodeReport
		want Cell
	}{
		{"available pod of the current revision",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{current}},
			Cell{State: StateCurrent}},
		{"not eligible, no pod",
			daemon.NodeReport{Verdict: daemon.Verdict{Reason: daemon.ReasonNodeSelectorMismatch}},
			Cell{State: StateIneligible, Why: "NodeSelectorMismatch"}},
		{"not eligible, but its pod may stay",
			daemon.NodeReport{Verdict: daemon.Verdict{KeepRunning: true, Reason: daemon.ReasonUntoleratedTaint}, Pods: []daemon.PodReport{current}},
			Cell{State: StateCurrent}},
		{"old pod, its turn has not come",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.ReasonBudgetFull},
			Cell{State: StateWaiting, Why: "budget"}},
		{"old pod, paused",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.ReasonPaused},
			Cell{State: StateWaiting, Why: "paused"}},
		{"old pod, partition",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.ReasonPartitionHeld},
			Cell{State: StateWaiting, Why: "partition"}},
		{"old pod, not a canary",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.ReasonCanaryHeld},
			Cell{State: StateWaiting, Why: "canary"}},
		{"old pod, a later wave",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.ReasonLaterWave},
			Cell{State: StateWaiting, Why: "wave"}},
		{"old pod, the pause between waves",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.ReasonWavePause},
			Cell{State: StateWaiting, Why: "wave pause"}},
		{"old pod, OnDelete: nothing moves it",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}},
			Cell{State: StateWaiting, Why: "on delete"}},
		{"old pod, the next sync replaces it",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Next: []string{"delete pod old (RollingUpdate)"}},
			Cell{State: StateUpdating}},
		{"old pod terminating",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{{Name: "old", Phase: v1.PodRunning, Deleting: true}}},
			Cell{State: StateUpdating}},
		{"new pod starting",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{{Name: "new", Updated: true, Phase: v1.PodPending}},
				Waiting: daemon.ReasonNewPodUnavailable},
			Cell{State: StateUpdating, Why: "starting"}},
		{"new pod baking",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{current}, Waiting: daemon.ReasonNewPodBaking},
			Cell{State: StateUpdating, Why: "bake"}},
		{"updated in place, restarting",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{{Name: "p", Updated: true, Phase: v1.PodRunning}},
				Waiting: daemon.ReasonInPlaceUpdating},
			Cell{State: StateUpdating, Why: "in place"}},
		{"eligible, no pod yet, its create planned",
			daemon.NodeReport{Verdict: eligible, Next: []string{"create a pod of the current revision (MissingPod)"}},
			Cell{State: StateUpdating}},
		{"eligible, no pod and nothing planned (a create in flight)",
			daemon.NodeReport{Verdict: eligible},
			Cell{State: StateUpdating, Why: "starting"}},
		{"failed pod backing off",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{{Name: "p", Updated: true, Phase: v1.PodFailed}},
				Waiting: daemon.ReasonFailedPodBackoff, Failures: 2},
			Cell{State: StateFailing, Why: "back-off"}},
		{"failed pod, its replacement planned",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{{Name: "p", Updated: true, Phase: v1.PodFailed}},
				Next: []string{"delete pod p (FailedPod)"}},
			Cell{State: StateFailing}},
		{"the rollout failed: its deadline passed",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.ReasonProgressDeadlineExceeded},
			Cell{State: StateFailing, Why: "deadline"}},
		{"the rollout failed: restarts",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.ReasonRestartLimitExceeded},
			Cell{State: StateFailing, Why: "restarts"}},
		{"a reason the grid has no word for is shown as it is",
			daemon.NodeReport{Verdict: eligible, Pods: []daemon.PodReport{old}, Waiting: daemon.Reason("SomethingNew")},
			Cell{State: StateWaiting, Why: "SomethingNew"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.node.Node, tc.want.Node = "n1", "n1"
			if got := CellOf(tc.node); got != tc.want {
				t.Errorf("CellOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func node(name string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func explanation(annotations map[string]string, waveKey string, nodes ...daemon.NodeReport) *inspect.Explanation {
	ds := &apps.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ds", Annotations: annotations}}
	return &inspect.Explanation{DaemonSet: ds, WaveKey: waveKey, Report: daemon.Report{Nodes: nodes, Policy: daemon.PolicyOf(ds)}}
}

func report(name, wave string) daemon.NodeReport {
	return daemon.NodeReport{Node: name, Wave: wave, Verdict: eligible, Pods: []daemon.PodReport{current}}
}

func cells(names ...string) []Cell {
	var out []Cell
	for _, n := range names {
		out = append(out, Cell{Node: n, State: StateCurrent})
	}
	return out
}

func TestGridOf(t *testing.T) {
	zone := func(z string) map[string]string { return map[string]string{ZoneLabel: z} }
	for _, tc := range []struct {
		name  string
		e     *inspect.Explanation
		nodes map[string]*v1.Node
		want  Grid
	}{
		{"waves in the rollout's order, unlabelled last",
			explanation(map[string]string{daemon.AnnotationWaves: "wave", daemon.AnnotationWaveOrder: "b"}, "wave",
				report("n1", "a"), report("n2", "b"), report("n3", ""), report("n4", "a")),
			map[string]*v1.Node{"n1": node("n1", zone("z")), "n2": node("n2", nil), "n3": node("n3", nil), "n4": node("n4", nil)},
			Grid{GroupBy: "wave", Groups: []Group{{"b", cells("n2")}, {"a", cells("n1", "n4")}, {"", cells("n3")}}}},
		{"no waves: by zone, the nodes without one last, a vanished node with them",
			explanation(nil, "", report("n1", ""), report("n2", ""), report("n3", ""), report("gone", "")),
			map[string]*v1.Node{"n1": node("n1", zone("z2")), "n2": node("n2", zone("z1")), "n3": node("n3", nil)},
			Grid{GroupBy: ZoneLabel, Groups: []Group{{"z1", cells("n2")}, {"z2", cells("n1")}, {"", cells("n3", "gone")}}}},
		{"no waves, no zones: one group",
			explanation(nil, "", report("n1", ""), report("n2", "")),
			map[string]*v1.Node{"n1": node("n1", nil), "n2": node("n2", nil)},
			Grid{Groups: []Group{{"", cells("n1", "n2")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, GridOf(tc.e, tc.nodes)); diff != "" {
				t.Errorf("GridOf (-want +got):\n%s", diff)
			}
		})
	}
}
