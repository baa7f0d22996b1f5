package daemon

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

func TestReadRestoreMark(t *testing.T) {
	tests := []struct {
		value  string
		number int64
		ok     bool
	}{
		{"3 from 2 at 2030-01-01T11:00:00Z", 3, true},
		{"3 from 2 at 2030-01-01T11:00:00Z", 4, false}, // renumbered since: a later rollout of its own
		{"3 from 2", 3, true},
		{"three from two", 3, false},
		{"3", 3, false},
	}
	for _, tt := range tests {
		r := &apps.ControllerRevision{Revision: tt.number}
		r.Annotations = map[string]string{MarkRestored: tt.value}
		m, ok := readRestoreMark(r)
		if ok != tt.ok || (ok && (m.revision != 3 || m.from != 2)) {
			t.Errorf("readRestoreMark(%q at revision %d) = %+v, %v; want ok %v", tt.value, tt.number, m, ok, tt.ok)
		}
	}
}

// A revision a rollback restored is watched as a new rollout until it is available
// everywhere again; if it fails, the rollout holds there instead of rolling back again.
func TestRolloutRestoredRevision(t *testing.T) {
	restored := func(availableSince bool) func(*apps.DaemonSet, *Snapshot) {
		return func(_ *apps.DaemonSet, s *Snapshot) {
			annotate(s, "ds-old", MarkFailed, "1 PodRestartLimitExceeded: x")
			annotate(s, curRev, MarkRestored, "2 from 1 at "+t0.Add(-time.Minute).Format(time.RFC3339))
			if availableSince {
				annotate(s, curRev, MarkAvailable, t0.Add(-time.Second).Format(time.RFC3339))
			}
		}
	}
	before, after := false, true
	rollback := withAnnotations(AnnotationMaxRestarts, "2", AnnotationOnFailure, OnFailureRollback)
	crashing := func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", withRestarts(0, 3))) }
	runRolloutRows(t, []rolloutRow{
		{name: "failing: held, not rolled back again", ds: []dsOpt{rollback, withBudget("", "1")},
			setup:  then(restored(before), crashing),
			marks:  []string{curRev + " " + MarkFailed + "=2 " + string(ReasonRestartLimitExceeded) + ": pod new-n1 on node n1 restarted 3 times"},
			reason: ReasonRollbackFailed, status: v1.ConditionFalse, message: "revision 2, restored by a rollback from failed revision 1, failed too",
			events: []string{string(ReasonRollbackFailed)}, waits: all(ReasonRestartLimitExceeded, "n1")},
		{name: "available everywhere since the rollback: released, a later restart is no failure", ds: []dsOpt{rollback, withBudget("", "1")},
			setup: then(restored(after), crashing), deletes: []string{"old-n2"}, reason: ReasonRollingOut, status: v1.ConditionTrue},
		{name: "done rolling back: marked available again", ds: []dsOpt{rollback},
			setup: then(restored(before), func(ds *apps.DaemonSet, s *Snapshot) {
				for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
					replace(s, newPod(ds, "new-"+n, n, readySince(t0.Add(-time.Hour))))
				}
			}),
			marks: []string{curRev + " " + MarkAvailable + "=" + t0.Format(time.RFC3339)}, reason: ReasonNewRevisionAvailable, status: v1.ConditionTrue},
		{name: "rolling back obeys the bake: a pod Ready for less than min-healthy is not done", ds: []dsOpt{rollback, withBudget("", "1")},
			setup: then(restored(before), func(ds *apps.DaemonSet, s *Snapshot) {
				for _, n := range []string{"n1", "n2", "n3", "n4"} {
					replace(s, newPod(ds, "new-"+n, n, readySince(t0.Add(-time.Hour))))
				}
				replace(s, newPod(ds, "new-n5", "n5", readySince(t0.Add(-5*time.Second))))
			}),
			reason: ReasonRollingOut, status: v1.ConditionTrue, requeue: 5*time.Second + time.Millisecond},
		{name: "rolling back obeys the budget", ds: []dsOpt{rollback, withBudget("", "1")},
			setup: then(restored(before), func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "new-n1", "n1", readySince(t0.Add(-3*time.Second))))
			}),
			waits: with(all(ReasonBudgetFull, "n1"), "n1", string(ReasonNewPodBaking)), requeue: 7*time.Second + time.Millisecond},
	})
}
