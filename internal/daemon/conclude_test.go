package daemon

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Progressing condition: its reasons, when its transition time moves, the events
// its changes record, and when it is kept at all.

// decideWith runs Decide on policyCluster after setup, returning the Plan and the
// Progressing condition it stores.
// markFailedBelowCurrent marks the revision numbered just below the current one as
// failed, and the current one as restored from it by a rollback an hour ago.
func markFailedBelowCurrent(_ *apps.DaemonSet, s *Snapshot) {
	r := s.Revisions[0]
	r.Annotations = map[string]string{MarkFailed: failedMarkValue(r, ReasonProgressDeadlineExceeded, "no progress")}
	cur := s.Revisions[len(s.Revisions)-1]
	cur.Annotations = map[string]string{MarkRestored: fmt.Sprintf("%d from %d at %s", cur.Revision, r.Revision, t0.Add(-time.Hour).Format(time.RFC3339))}
}

func decideWith(ds *apps.DaemonSet, setup func(*apps.DaemonSet, *Snapshot)) (Plan, *apps.DaemonSetCondition) {
	s := policyCluster(ds)
	if setup != nil {
		setup(ds, s)
	}
	p := Decide(s)
	return p, storedCondition(ds, p)
}

// Every reason, as the first condition a DaemonSet gets: one event, Warning exactly
// when the status is False, saying what the condition says.
func TestProgressingReasons(t *testing.T) {
	tests := []struct {
		name   string
		ds     []dsOpt
		setup  func(*apps.DaemonSet, *Snapshot)
		reason Reason
		status v1.ConditionStatus
		words  []string // the message says these
	}{
		{name: "rolling out", ds: []dsOpt{withAnnotations(AnnotationMaxRestarts, "3")},
			reason: ReasonRollingOut, status: v1.ConditionTrue, words: []string{"rolling out revision 2"}},
		{name: "available everywhere", ds: []dsOpt{withAnnotations(AnnotationMaxRestarts, "3")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { updated(ds, s, "n1", "n2", "n3", "n4", "n5") },
			reason: ReasonNewRevisionAvailable, status: v1.ConditionTrue, words: []string{"revision 2", "every node"}},
		{name: "paused", ds: []dsOpt{withAnnotations(AnnotationPaused, "true")},
			reason: ReasonPaused, status: v1.ConditionUnknown, words: []string{AnnotationPaused, "everynode rollout resume"}},
		{name: "between waves", ds: []dsOpt{withAnnotations(AnnotationWaves, "zone", AnnotationWavePause, "2h")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { zones(s); updated(ds, s, "n1", "n3") },
			reason: ReasonWavePause, status: v1.ConditionTrue, words: []string{`zone="b"`, t0.Add(time.Hour).Format(time.RFC3339)}},
		{name: "canary done", ds: []dsOpt{withAnnotations(AnnotationCanary, "canary=true")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				label(s, []string{"canary", "true"}, "n1")
				updated(ds, s, "n1")
			},
			reason: ReasonCanaryHeld, status: v1.ConditionTrue, words: []string{AnnotationCanary, "everynode rollout promote"}},
		{name: "partition reached", ds: []dsOpt{withAnnotations(AnnotationPartition, "40%")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { updated(ds, s, "n1", "n2", "n3") },
			reason: ReasonPartitionHeld, status: v1.ConditionTrue, words: []string{"2 nodes", AnnotationPartition, "40%"}},
		{name: "invalid annotation: names it, says what is wrong and how to fix it", ds: []dsOpt{withAnnotations(AnnotationPaused, "yes")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse,
			words: []string{AnnotationPaused, `"yes"`, `want "true" or "false"`, "holds until it is fixed"}},
		{name: "every invalid annotation is named", ds: []dsOpt{withAnnotations(AnnotationPaused, "yes", AnnotationWavePause, "0")},
			reason: ReasonInvalidAnnotation, status: v1.ConditionFalse, words: []string{AnnotationPaused, AnnotationWavePause}},
		{name: "progress deadline exceeded", ds: []dsOpt{withAnnotations(AnnotationProgressDeadline, "1m")},
			setup: func(_ *apps.DaemonSet, s *Snapshot) {
				annotate(s, curRev, MarkFailed, "2 ProgressDeadlineExceeded: pod p waits")
			},
			reason: ReasonProgressDeadlineExceeded, status: v1.ConditionFalse, words: []string{"revision 2 failed", "pod p waits", "everynode rollout resume"}},
		{name: "restart limit exceeded", ds: []dsOpt{withAnnotations(AnnotationMaxRestarts, "0")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", withRestarts(1, 0))) },
			reason: ReasonRestartLimitExceeded, status: v1.ConditionFalse, words: []string{"new-n1", "restarted 1 times"}},
		{name: "rolled back", ds: []dsOpt{withAnnotations(AnnotationMaxRestarts, "0", AnnotationOnFailure, "rollback")},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", withRestarts(1, 0))) },
			reason: ReasonRolledBack, status: v1.ConditionFalse, words: []string{"revision 2 failed", "rolled back to the template of revision 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", tt.ds...)
			p, c := decideWith(ds, tt.setup)
			if c == nil || Reason(c.Reason) != tt.reason || c.Status != tt.status || !c.LastTransitionTime.Time.Equal(t0) {
				t.Fatalf("Progressing = %+v, want %s/%s since t0", c, tt.status, tt.reason)
			}
			for _, w := range tt.words {
				if !strings.Contains(c.Message, w) {
					t.Errorf("message %q does not say %q", c.Message, w)
				}
			}
			typ := v1.EventTypeNormal
			if tt.status == v1.ConditionFalse {
				typ = v1.EventTypeWarning
			}
			want := []Event{{Type: typ, Reason: string(tt.reason), Message: c.Message}}
			if !slices.Equal(p.Events, want) {
				t.Errorf("events %+v, want %+v", p.Events, want)
			}
		})
	}
}

func TestProgressingTransitions(t *testing.T) {
	before := t0.Add(-time.Hour)
	tests := []struct {
		name   string
		ds     []dsOpt
		setup  func(*apps.DaemonSet, *Snapshot)
		reason Reason
		since  time.Time // the condition's lastTransitionTime
		events []string
	}{
		{name: "same reason, new message: the transition time stays, no event",
			ds:     []dsOpt{withAnnotations(AnnotationMaxRestarts, "3"), withProgressing(ReasonRollingOut, v1.ConditionTrue, before)},
			reason: ReasonRollingOut, since: before},
		{name: "new reason: the transition time moves, one event",
			ds:     []dsOpt{withAnnotations(AnnotationMaxRestarts, "3"), withProgressing(ReasonPaused, v1.ConditionUnknown, before)},
			reason: ReasonRollingOut, since: t0, events: []string{string(ReasonRollingOut)}},
		{name: "paused while rolling out",
			ds:     []dsOpt{withAnnotations(AnnotationPaused, "true"), withProgressing(ReasonRollingOut, v1.ConditionTrue, before)},
			reason: ReasonPaused, since: t0, events: []string{string(ReasonPaused)}},
		{name: "rolled back: kept, with its message, while the restored revision rolls out",
			ds:     []dsOpt{withAnnotations(AnnotationMaxRestarts, "3"), withProgressing(ReasonRolledBack, v1.ConditionFalse, before)},
			setup:  markFailedBelowCurrent,
			reason: ReasonRolledBack, since: before},
		{name: "rolled back: not kept once another template rolls out",
			ds:     []dsOpt{withAnnotations(AnnotationMaxRestarts, "3"), withProgressing(ReasonRolledBack, v1.ConditionFalse, before)},
			reason: ReasonRollingOut, since: t0, events: []string{string(ReasonRollingOut)}},
		{name: "rolled back: the restored revision available everywhere",
			ds: []dsOpt{withAnnotations(AnnotationMaxRestarts, "3"), withProgressing(ReasonRolledBack, v1.ConditionFalse, before)},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				markFailedBelowCurrent(ds, s)
				updated(ds, s, "n1", "n2", "n3", "n4", "n5")
			},
			reason: ReasonNewRevisionAvailable, since: t0, events: []string{string(ReasonNewRevisionAvailable)}},
		{name: "not settled: a pod to create leaves the condition as it is",
			ds:     []dsOpt{withAnnotations(AnnotationPaused, "true"), withProgressing(ReasonRollingOut, v1.ConditionTrue, before)},
			setup:  func(_ *apps.DaemonSet, s *Snapshot) { s.Nodes = append(s.Nodes, newNode("n6")) },
			reason: ReasonRollingOut, since: before},
		{name: "not settled: a pod to delete leaves the condition as it is",
			ds:     []dsOpt{withAnnotations(AnnotationPaused, "true"), withProgressing(ReasonRollingOut, v1.ConditionTrue, before)},
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { s.Pods = append(s.Pods, newPod(ds, "z-dup", "n3", old())) },
			reason: ReasonRollingOut, since: before},
		{name: "not settled: writes in flight leave the condition as it is",
			ds:     []dsOpt{withAnnotations(AnnotationPaused, "true"), withProgressing(ReasonRollingOut, v1.ConditionTrue, before)},
			setup:  func(_ *apps.DaemonSet, s *Snapshot) { s.InFlight.Deletes = map[types.UID]bool{"uid-gone": true} },
			reason: ReasonRollingOut, since: before},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", tt.ds...)
			p, c := decideWith(ds, tt.setup)
			if c == nil || Reason(c.Reason) != tt.reason || !c.LastTransitionTime.Time.Equal(tt.since) {
				t.Fatalf("Progressing = %+v, want %s since %v", c, tt.reason, tt.since)
			}
			if Reason(c.Reason) == ReasonRolledBack && c.Message != "stored" {
				t.Errorf("rolled back message %q, want the stored one", c.Message)
			}
			if got := eventReasons(p); !slices.Equal(got, tt.events) {
				t.Errorf("events %v, want %v", got, tt.events)
			}
		})
	}
}

// A failure found on a sync that is not settled leaves no mark and rolls nothing back:
// the next settled sync decides.
func TestProgressingUnsettledFailure(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationMaxRestarts, "0", AnnotationOnFailure, "rollback"))
	p, c := decideWith(ds, func(ds *apps.DaemonSet, s *Snapshot) {
		replace(s, newPod(ds, "new-n1", "n1", withRestarts(0, 1)))
		s.Nodes = append(s.Nodes, newNode("n6"))
	})
	if len(p.MarkRevisions) != 0 || p.Rollback != nil || len(p.Events) != 0 || c != nil {
		t.Errorf("unsettled sync marks %v, rolls back to %v, records %v, stores %+v", p.MarkRevisions, p.Rollback, p.Events, c)
	}
	if !slices.Equal(createdOn(p), []string{"n6"}) {
		t.Errorf("creates on %v, want n6", createdOn(p))
	}
}

// Once stored, the same state asks for no status write and records no event.
func TestProgressingSteady(t *testing.T) {
	for _, opt := range []dsOpt{
		withAnnotations(AnnotationPaused, "true"),
		withAnnotations(AnnotationWaves, "zone", AnnotationWavePause, "2h"),
		withAnnotations(AnnotationPaused, "yes"),
		withAnnotations(AnnotationPartition, "2"),
	} {
		ds := newDS("ds", opt)
		setup := func(ds *apps.DaemonSet, s *Snapshot) { zones(s); updated(ds, s, "n1", "n3") }
		p, _ := decideWith(ds, setup)
		if p.Status == nil || len(p.Events) != 1 {
			t.Fatalf("%v: first sync stores %v, records %v", ds.Annotations, p.Status, p.Events)
		}
		ds.Status = *p.Status
		ds.Status.ObservedGeneration = ds.Generation
		again, c := decideWith(ds, setup)
		if again.Status != nil || len(again.Events) != 0 || c == nil {
			t.Errorf("%v: second sync stores %+v, records %v", ds.Annotations, again.Status, again.Events)
		}
	}
}

// Without rollout annotations there is no Progressing condition: one left from
// earlier annotations is removed, without an event, and other conditions are kept.
func TestProgressingRemoved(t *testing.T) {
	custom := apps.DaemonSetCondition{Type: "Custom", Status: v1.ConditionTrue, Reason: "Kept"}
	ds := newDS("ds", func(ds *apps.DaemonSet) { ds.Status.Conditions = []apps.DaemonSetCondition{custom} },
		withProgressing(ReasonPaused, v1.ConditionUnknown, t0.Add(-time.Hour)))
	p, c := decideWith(ds, nil)
	if c != nil || p.Status == nil || !slices.Equal(p.Status.Conditions, []apps.DaemonSetCondition{custom}) || len(p.Events) != 0 {
		t.Errorf("status %+v, events %v; want the Custom condition only and no event", p.Status, p.Events)
	}
	if len(ds.Status.Conditions) != 2 {
		t.Errorf("Decide changed the DaemonSet's conditions: %+v", ds.Status.Conditions)
	}

	p, c = decideWith(newDS("ds"), nil)
	if c != nil || len(p.Events) != 0 {
		t.Errorf("a DaemonSet without rollout annotations gets %+v, events %v", c, p.Events)
	}
}
