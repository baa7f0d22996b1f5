package charts_test

import (
	"fmt"
	"io/fs"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/charts"
	"github.com/everynode/everynode/internal/gitops"
)

// The chart's Argo CD health check (files/argocd-health.lua), run as Argo CD runs a
// health check from argocd-cm by default (see internal/gitops).

type health = gitops.Health

func healthOf(status, message string) health { return health{Status: status, Message: message} }

func argoHealth(t *testing.T, ds *apps.DaemonSet) health {
	t.Helper()
	h, err := gitops.ArgoCDHealth(ds)
	if err != nil {
		t.Fatalf("the health check failed in Argo CD's sandbox: %v", err)
	}
	return h
}

// argoBuiltin is Argo CD's built-in DaemonSet health (gitops-engine,
// pkg/health/health_daemonset.go), the verdict the script must give for every
// DaemonSet whose rollout everynode does not drive.
func argoBuiltin(ds *apps.DaemonSet) health {
	s := ds.Status
	switch {
	case ds.Generation > s.ObservedGeneration:
		return healthOf("Progressing", "Waiting for rollout to finish: observed daemon set generation less than desired generation")
	case ds.Spec.UpdateStrategy.Type == apps.OnDeleteDaemonSetStrategyType:
		return healthOf("Healthy", fmt.Sprintf("daemon set %d out of %d new pods have been updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled))
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		return healthOf("Progressing", fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d out of %d new pods have been updated...", ds.Name, s.UpdatedNumberScheduled, s.DesiredNumberScheduled))
	case s.NumberAvailable < s.DesiredNumberScheduled:
		return healthOf("Progressing", fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d of %d updated pods are available...", ds.Name, s.NumberAvailable, s.DesiredNumberScheduled))
	}
	return health{Status: "Healthy"}
}

func daemonSet(strategy apps.DaemonSetUpdateStrategyType, generation, observed int64, desired, updated, available int32, conds ...apps.DaemonSetCondition) *apps.DaemonSet {
	ds := &apps.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Namespace: "kube-system", Generation: generation},
		Spec:       apps.DaemonSetSpec{UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: strategy}},
		Status: apps.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired, CurrentNumberScheduled: desired,
			UpdatedNumberScheduled: updated, NumberAvailable: available, NumberReady: available, Conditions: conds},
	}
	return ds
}

// Every DaemonSet everynode does not drive — no rollout annotations, or a
// Progressing condition alone as an older everynode left it — gets Argo CD's own
// verdict, status and message alike, across strategies, generations and counters.
func TestArgoHealth_UnmanagedIsArgosOwn(t *testing.T) {
	older := apps.DaemonSetCondition{Type: "Progressing", Status: v1.ConditionTrue, Reason: "RollingOut", Message: "rolling out revision 2"}
	n := 0
	for _, strategy := range []apps.DaemonSetUpdateStrategyType{apps.RollingUpdateDaemonSetStrategyType, apps.OnDeleteDaemonSetStrategyType} {
		for _, gen := range [][2]int64{{1, 1}, {3, 2}, {1, 0}} {
			for _, c := range [][3]int32{{0, 0, 0}, {5, 5, 5}, {5, 2, 5}, {5, 5, 3}, {5, 1, 2}, {5, 0, 0}} {
				for _, conds := range [][]apps.DaemonSetCondition{nil, {older}} {
					ds := daemonSet(strategy, gen[0], gen[1], c[0], c[1], c[2], conds...)
					got, want := argoHealth(t, ds), argoBuiltin(ds)
					if got != want {
						t.Errorf("%s, generation %v, counters %v, conditions %d: got %+v, want Argo CD's %+v", strategy, gen, c, len(conds), got, want)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d DaemonSets compared", n)
}

// rollout is the three conditions everynode keeps, for a Progressing condition of
// that status and reason (the mapping internal/daemon/conditions.go makes).
func rollout(status v1.ConditionStatus, reason, message string) []apps.DaemonSetCondition {
	reconciling, stalled := v1.ConditionFalse, v1.ConditionFalse
	switch {
	case status == v1.ConditionFalse:
		stalled = v1.ConditionTrue
	case reason != "NewRevisionAvailable":
		reconciling = v1.ConditionTrue
	}
	return []apps.DaemonSetCondition{
		{Type: "Progressing", Status: status, Reason: reason, Message: message},
		{Type: "Reconciling", Status: reconciling, Reason: reason, Message: message},
		{Type: "Stalled", Status: stalled, Reason: reason, Message: message},
	}
}

// A DaemonSet everynode drives is read from its conditions, in both strategies
// (RollingUpdate in full mode, OnDelete in companion mode).
func TestArgoHealth_Managed(t *testing.T) {
	T, F, U := v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown
	failed := "revision 3 failed: ProgressDeadlineExceeded: no progress for 2m; the rollout holds until the template changes or `everynode rollout resume` runs"
	tests := []struct {
		name                    string
		generation, observed    int64
		desired, updated, avail int32
		conds                   []apps.DaemonSetCondition
		want                    health
	}{
		{name: "done", generation: 3, observed: 3, desired: 5, updated: 5, avail: 5,
			conds: rollout(T, "NewRevisionAvailable", "revision 3 is available on every node"),
			want:  healthOf("Healthy", "revision 3 is available on every node")},
		{name: "rolling out", generation: 3, observed: 3, desired: 5, updated: 2, avail: 4,
			conds: rollout(T, "RollingOut", "rolling out revision 3"), want: healthOf("Progressing", "rolling out revision 3")},
		{name: "rolling out, every pod updated, the last still baking", generation: 3, observed: 3, desired: 5, updated: 5, avail: 5,
			conds: rollout(T, "RollingOut", "rolling out revision 3"), want: healthOf("Progressing", "rolling out revision 3")},
		{name: "between waves", generation: 3, observed: 3, desired: 5, updated: 2, avail: 5,
			conds: rollout(T, "WaitingForWave", "revision 3: wave zone=\"b\" starts at 2030-01-01T12:00:00Z, after the wave pause"),
			want:  healthOf("Progressing", "revision 3: wave zone=\"b\" starts at 2030-01-01T12:00:00Z, after the wave pause")},
		{name: "paused", generation: 3, observed: 3, desired: 5, updated: 0, avail: 5,
			conds: rollout(U, "Paused", "revision 3 is paused"), want: healthOf("Suspended", "revision 3 is paused")},
		{name: "canary waiting for promotion", generation: 3, observed: 3, desired: 5, updated: 1, avail: 5,
			conds: rollout(T, "WaitingForPromotion", "revision 3 runs on the canary nodes"), want: healthOf("Suspended", "revision 3 runs on the canary nodes")},
		{name: "held by a partition", generation: 3, observed: 3, desired: 5, updated: 3, avail: 5,
			conds: rollout(T, "PartitionHeld", "2 nodes stay on older revisions"), want: healthOf("Suspended", "2 nodes stay on older revisions")},
		{name: "failed", generation: 3, observed: 3, desired: 5, updated: 1, avail: 4,
			conds: rollout(F, "ProgressDeadlineExceeded", failed), want: healthOf("Degraded", failed)},
		{name: "rolled back", generation: 4, observed: 4, desired: 5, updated: 2, avail: 4,
			conds: rollout(F, "RolledBack", "revision 3 failed; rolled back"), want: healthOf("Degraded", "revision 3 failed; rolled back")},
		{name: "an invalid annotation", generation: 3, observed: 3, desired: 5, updated: 5, avail: 5,
			conds: rollout(F, "InvalidAnnotation", "annotation rollout.everynode.dev/canary: bad"), want: healthOf("Degraded", "annotation rollout.everynode.dev/canary: bad")},
		{name: "a new template not yet observed", generation: 4, observed: 3, desired: 5, updated: 5, avail: 5,
			conds: rollout(T, "NewRevisionAvailable", "revision 3 is available on every node"),
			want:  healthOf("Progressing", "Waiting for rollout to finish: observed daemon set generation less than desired generation")},
		{name: "done as last seen, a new template counted by another controller", generation: 4, observed: 4, desired: 5, updated: 0, avail: 5,
			conds: rollout(T, "NewRevisionAvailable", "revision 3 is available on every node"),
			want:  healthOf("Progressing", "Waiting for everynode: 0 of 5 pods updated, 5 available")},
		{name: "done, a node just joined", generation: 3, observed: 3, desired: 6, updated: 6, avail: 5,
			conds: rollout(T, "NewRevisionAvailable", "revision 3 is available on every node"),
			want:  healthOf("Progressing", "Waiting for everynode: 6 of 6 pods updated, 5 available")},
	}
	for _, tt := range tests {
		for _, strategy := range []apps.DaemonSetUpdateStrategyType{apps.RollingUpdateDaemonSetStrategyType, apps.OnDeleteDaemonSetStrategyType} {
			t.Run(tt.name+"/"+string(strategy), func(t *testing.T) {
				ds := daemonSet(strategy, tt.generation, tt.observed, tt.desired, tt.updated, tt.avail, tt.conds...)
				if got := argoHealth(t, ds); got != tt.want {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
			})
		}
	}
}

// The sandbox above is Argo CD's: a script that used the string library would fail
// in it, and so does the health check on an object with nothing in it (it must
// not: Argo CD shows an error instead of a health).
func TestArgoHealth_Sandbox(t *testing.T) {
	if _, err := gitops.RunArgoCDHealth(`return { status = string.upper("healthy") }`, map[string]any{}); err == nil {
		t.Error("a script using the string library ran: the test's sandbox is not Argo CD's")
	}
	script, err := fs.ReadFile(charts.Everynode(), gitops.ArgoCDHealthScript)
	if err != nil {
		t.Fatal(err)
	}
	h, err := gitops.RunArgoCDHealth(string(script), map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet"})
	if err != nil || h.Status != "Healthy" {
		t.Errorf("a DaemonSet with no metadata, spec or status: %+v, %v; want Argo CD's Healthy", h, err)
	}
}
