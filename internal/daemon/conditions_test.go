package daemon

import (
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func progressingCond(reason Reason, status v1.ConditionStatus, since time.Time) *apps.DaemonSetCondition {
	return &apps.DaemonSetCondition{Type: ConditionProgressing, Status: status, Reason: string(reason),
		Message: "message of " + string(reason), LastTransitionTime: metav1.NewTime(since)}
}

// Reconciling and Stalled follow from Progressing alone: Stalled while it is False,
// Reconciling while it is anything but done.
func TestRolloutConditions(t *testing.T) {
	T, F, U := v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown
	tests := []struct {
		reason               Reason
		status               v1.ConditionStatus
		reconciling, stalled v1.ConditionStatus
	}{
		{ReasonNewRevisionAvailable, T, F, F},
		{ReasonRollingOut, T, T, F},
		{ReasonWavePause, T, T, F},
		{ReasonCanaryHeld, T, T, F},
		{ReasonPartitionHeld, T, T, F},
		{ReasonPaused, U, T, F},
		{ReasonProgressDeadlineExceeded, F, F, T},
		{ReasonRestartLimitExceeded, F, F, T},
		{ReasonContainerFailing, F, F, T},
		{ReasonRolledBack, F, F, T},
		{ReasonRollbackFailed, F, F, T},
		{ReasonInvalidAnnotation, F, F, T},
		{ReasonSurgeHostPort, F, F, T},
	}
	for _, tt := range tests {
		t.Run(string(tt.reason), func(t *testing.T) {
			c := progressingCond(tt.reason, tt.status, t0)
			got := rolloutConditions(nil, c)
			if len(got) != 3 || got[0] != *c {
				t.Fatalf("conditions = %+v, want Progressing as given first", got)
			}
			want := map[apps.DaemonSetConditionType]v1.ConditionStatus{ConditionReconciling: tt.reconciling, ConditionStalled: tt.stalled}
			for _, d := range got[1:] {
				if d.Status != want[d.Type] {
					t.Errorf("%s = %s, want %s", d.Type, d.Status, want[d.Type])
				}
				if d.Reason != c.Reason || d.Message != c.Message || !d.LastTransitionTime.Equal(&c.LastTransitionTime) {
					t.Errorf("%s = %+v, want Progressing's reason, message and time", d.Type, d)
				}
			}
		})
	}
}

// A derived condition keeps its transition time while its status stays, whatever
// the reason does, and takes Progressing's when its status changes.
func TestRolloutConditionsTransitionTime(t *testing.T) {
	earlier := t0.Add(-time.Hour)
	stored := rolloutConditions(nil, progressingCond(ReasonRollingOut, v1.ConditionTrue, earlier))

	waves := rolloutConditions(stored, progressingCond(ReasonWavePause, v1.ConditionTrue, t0))
	if r := Condition(waves, ConditionReconciling); !r.LastTransitionTime.Equal(&metav1.Time{Time: earlier}) || r.Reason != string(ReasonWavePause) {
		t.Errorf("Reconciling still True: %+v, want the reason changed and the time kept", r)
	}
	failed := rolloutConditions(stored, progressingCond(ReasonProgressDeadlineExceeded, v1.ConditionFalse, t0))
	for _, typ := range []apps.DaemonSetConditionType{ConditionReconciling, ConditionStalled} {
		if c := Condition(failed, typ); !c.LastTransitionTime.Equal(&metav1.Time{Time: t0}) {
			t.Errorf("%s changed status at %v, want Progressing's time %v", typ, c.LastTransitionTime, t0)
		}
	}
}

func TestWithConditions(t *testing.T) {
	foreign := apps.DaemonSetCondition{Type: "SomeoneElses", Status: v1.ConditionTrue}
	rolling := progressingCond(ReasonRollingOut, v1.ConditionTrue, t0)

	t.Run("added after the conditions of others, with an event", func(t *testing.T) {
		s := apps.DaemonSetStatus{Conditions: []apps.DaemonSetCondition{foreign}}
		changed, transition := withConditions(&s, rolling)
		if !changed || !transition || !slices.Equal(conditionTypes(s.Conditions), []string{"SomeoneElses", "Progressing", "Reconciling", "Stalled"}) {
			t.Errorf("changed %v, transition %v, conditions %v", changed, transition, conditionTypes(s.Conditions))
		}
	})
	t.Run("stored already: nothing to write", func(t *testing.T) {
		s := apps.DaemonSetStatus{Conditions: rolloutConditions(nil, rolling)}
		if changed, transition := withConditions(&s, rolling); changed || transition {
			t.Errorf("changed %v, transition %v for the conditions stored", changed, transition)
		}
	})
	t.Run("Progressing stored alone: the others are added, with no event", func(t *testing.T) {
		s := apps.DaemonSetStatus{Conditions: []apps.DaemonSetCondition{*rolling}}
		changed, transition := withConditions(&s, rolling)
		if !changed || transition || len(s.Conditions) != 3 {
			t.Errorf("changed %v, transition %v, conditions %v", changed, transition, conditionTypes(s.Conditions))
		}
	})
	t.Run("removed with the policy, the conditions of others kept", func(t *testing.T) {
		s := apps.DaemonSetStatus{Conditions: append([]apps.DaemonSetCondition{foreign}, rolloutConditions(nil, rolling)...)}
		changed, transition := withConditions(&s, nil)
		if !changed || transition || !slices.Equal(conditionTypes(s.Conditions), []string{"SomeoneElses"}) {
			t.Errorf("changed %v, transition %v, conditions %v", changed, transition, conditionTypes(s.Conditions))
		}
		if changed, _ := withConditions(&s, nil); changed {
			t.Error("removing conditions that are not there changed the status")
		}
	})
}

func conditionTypes(conds []apps.DaemonSetCondition) []string {
	var out []string
	for _, c := range conds {
		out = append(out, string(c.Type))
	}
	return out
}

// Both modes store the three conditions for what the rollout does, in one write:
// full mode in the status it stores, companion mode on their own.
func TestDecideStoresTheRolloutConditions(t *testing.T) {
	T, F := v1.ConditionTrue, v1.ConditionFalse
	tests := []struct {
		name                 string
		ds                   *apps.DaemonSet
		setup                func(ds *apps.DaemonSet, s *Snapshot)
		reason               Reason
		reconciling, stalled v1.ConditionStatus
	}{
		{name: "rolling out", ds: companionDS("1"), reason: ReasonRollingOut, reconciling: T, stalled: F},
		{name: "paused", ds: companionDS("1", AnnotationPaused, "true"), reason: ReasonPaused, reconciling: T, stalled: F},
		{name: "held for the canary", ds: companionDS("1", AnnotationCanary, "canary=true"), reason: ReasonCanaryHeld, reconciling: T, stalled: F},
		{name: "past its deadline", ds: companionDS("1", AnnotationProgressDeadline, "1m"), setup: func(ds *apps.DaemonSet, s *Snapshot) {
			withProgressing(ReasonRollingOut, v1.ConditionTrue, t0.Add(-2*time.Minute))(ds)
			replace(s, newPod(ds, "new-n2", "n2", notReady(), createdAt(t0.Add(-2*time.Minute))))
		}, reason: ReasonProgressDeadlineExceeded, reconciling: F, stalled: T},
		{name: "done", ds: companionDS("1"), setup: func(ds *apps.DaemonSet, s *Snapshot) {
			for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
				replace(s, newPod(ds, "new-"+n, n))
			}
		}, reason: ReasonNewRevisionAvailable, reconciling: F, stalled: F},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := companionCluster(tt.ds)
			if tt.setup != nil {
				tt.setup(tt.ds, s)
			}
			full := Decide(s)
			if full.Status == nil {
				t.Fatal("full mode stores no status")
			}
			for mode, conds := range map[string][]apps.DaemonSetCondition{"full": full.Status.Conditions, "companion": DecideUpdate(s).Conditions} {
				p, r, st := Condition(conds, ConditionProgressing), Condition(conds, ConditionReconciling), Condition(conds, ConditionStalled)
				if p == nil || r == nil || st == nil {
					t.Fatalf("%s mode stores %v, want Progressing, Reconciling and Stalled", mode, conditionTypes(conds))
				}
				if Reason(p.Reason) != tt.reason || r.Status != tt.reconciling || st.Status != tt.stalled {
					t.Errorf("%s mode: Progressing %s, Reconciling %s, Stalled %s; want %s, %s, %s",
						mode, p.Reason, r.Status, st.Status, tt.reason, tt.reconciling, tt.stalled)
				}
			}
		})
	}
}
