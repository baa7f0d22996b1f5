package daemon

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// companionDS is an OnDelete DaemonSet opted into companion mode with
// max-unavailable, plus any other annotations.
func companionDS(maxUnavailable string, kv ...string) *apps.DaemonSet {
	return newDS("ds", withOnDelete(), withAnnotations(append([]string{AnnotationMaxUnavailable, maxUnavailable}, kv...)...))
}

// companionCluster is rolloutCluster with the revisions the other controller
// recorded: the old template as revision 1 and the current one as revision 2.
func companionCluster(ds *apps.DaemonSet) *Snapshot {
	s := rolloutCluster(ds)
	s.Revisions = []*apps.ControllerRevision{olderRevision(ds, "img:v0", "old", 1), currentRevision(ds, 2)}
	return s
}

func TestCompanionManages(t *testing.T) {
	tests := []struct {
		name string
		ds   *apps.DaemonSet
		want bool
	}{
		{name: "OnDelete with max-unavailable", ds: companionDS("1"), want: true},
		{name: "OnDelete with an invalid max-unavailable: reported on it", ds: companionDS("zero"), want: true},
		{name: "plain OnDelete: upstream's OnDelete", ds: newDS("ds", withOnDelete())},
		{name: "OnDelete with other rollout annotations only", ds: newDS("ds", withOnDelete(), withAnnotations(AnnotationPaused, "true"))},
		{name: "RollingUpdate with max-unavailable: the other controller's", ds: newDS("ds", withAnnotations(AnnotationMaxUnavailable, "1"))},
	}
	for _, tt := range tests {
		if got := CompanionManages(tt.ds); got != tt.want {
			t.Errorf("%s: CompanionManages = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDecideUpdate(t *testing.T) {
	tests := []struct {
		name    string
		ds      *apps.DaemonSet
		setup   func(ds *apps.DaemonSet, s *Snapshot)
		deletes []string
		// reason of the Progressing condition written ("" for none), and whether the
		// plan restores an older template.
		reason   Reason
		rollback bool
		marks    []string
		events   []string
	}{
		{name: "max-unavailable bounds the old pods deleted at once, in node-name order", ds: companionDS("2"),
			deletes: []string{"old-n1", "old-n2"}, reason: ReasonRollingOut, events: []string{string(ReasonRollingOut)}},
		{name: "a percentage of the desired nodes rounds up", ds: companionDS("30%"),
			deletes: []string{"old-n1", "old-n2"}, reason: ReasonRollingOut},
		{name: "a node whose pod is deleted and not yet recreated is unavailable", ds: companionDS("1"),
			setup: func(_ *apps.DaemonSet, s *Snapshot) {
				s.Pods = slices.DeleteFunc(s.Pods, func(p *v1.Pod) bool { return p.Name == "old-n3" })
			},
			reason: ReasonRollingOut},
		{name: "a terminating old pod is unavailable", ds: companionDS("1"),
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "old-n3", "n3", old(), terminating())) },
			reason: ReasonRollingOut},
		{name: "a recreated pod not yet available is unavailable", ds: companionDS("2"),
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", notReady())) },
			deletes: []string{"old-n2"}, reason: ReasonRollingOut},
		{name: "an old pod unavailable anyway is replaced whatever the budget", ds: companionDS("1"),
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "new-n1", "n1", notReady()), newPod(ds, "old-n4", "n4", old(), notReady()))
			},
			deletes: []string{"old-n4"}, reason: ReasonRollingOut},
		{name: "its own deletes not yet seen: nothing more", ds: companionDS("2"),
			setup: func(_ *apps.DaemonSet, s *Snapshot) {
				s.InFlight.Deletes = map[types.UID]bool{"uid-old-n1": true}
			}},
		{name: "paused: nothing deleted", ds: companionDS("2", AnnotationPaused, "true"),
			reason: ReasonPaused, events: []string{string(ReasonPaused)}},
		{name: "canary: only the canary nodes", ds: companionDS("3", AnnotationCanary, "canary=true"),
			setup:   func(_ *apps.DaemonSet, s *Snapshot) { label(s, []string{"canary", "true"}, "n2", "n4") },
			deletes: []string{"old-n2", "old-n4"}, reason: ReasonRollingOut},
		{name: "waves: the first zone first", ds: companionDS("5", AnnotationWaves, "zone"),
			setup:   func(_ *apps.DaemonSet, s *Snapshot) { zones(s) },
			deletes: []string{"old-n1", "old-n3"}, reason: ReasonRollingOut},
		{name: "new-nodes: stable cannot work beside the built-in controller", ds: companionDS("2", AnnotationNewNodes, NewNodesStable),
			reason: ReasonInvalidAnnotation, events: []string{string(ReasonInvalidAnnotation)}},
		{name: "max-unavailable 0 holds the rollout with a condition", ds: companionDS("0"),
			reason: ReasonInvalidAnnotation, events: []string{string(ReasonInvalidAnnotation)}},
		{name: "the template not yet recorded by the other controller: wait", ds: companionDS("2"),
			setup: func(_ *apps.DaemonSet, s *Snapshot) { s.Revisions = s.Revisions[:1] }},
		{name: "the current revision not yet renumbered: wait", ds: companionDS("2"),
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Revisions = []*apps.ControllerRevision{olderRevision(ds, "img:v0", "old", 3), currentRevision(ds, 2)}
			}},
		{name: "pods it does not control are not its business", ds: companionDS("5"),
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "old-n1", "n1", old(), orphan()))
			},
			deletes: []string{"old-n2", "old-n3", "old-n4", "old-n5"}, reason: ReasonRollingOut},
		{name: "done: the revision is marked available", ds: companionDS("1"),
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
					replace(s, newPod(ds, "new-"+n, n))
				}
			},
			reason: ReasonNewRevisionAvailable, marks: []string{MarkAvailable}},
		{name: "restart limit with on-failure rollback restores the old template", ds: companionDS("1", AnnotationMaxRestarts, "2", AnnotationOnFailure, OnFailureRollback),
			setup:  func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", withRestarts(0, 3))) },
			reason: ReasonRolledBack, rollback: true, marks: []string{MarkFailed, MarkRestored}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := companionCluster(tt.ds)
			if tt.setup != nil {
				tt.setup(tt.ds, s)
			}
			p := DecideUpdate(s)
			if got := deletedNames(p); !slices.Equal(got, tt.deletes) {
				t.Errorf("deletes = %v, want %v", got, tt.deletes)
			}
			if len(p.Creates) > 0 || p.Status != nil || p.CreateRevision != nil || p.RenumberRevision != nil ||
				len(p.Adopt)+len(p.Release)+len(p.LabelRevisions)+len(p.Relabel)+len(p.PruneRevisions) > 0 {
				t.Errorf("companion mode planned a write that is the other controller's: %+v", p)
			}
			gotReason := Reason("")
			if c := Condition(p.Conditions, ConditionProgressing); c != nil {
				gotReason = Reason(c.Reason)
			}
			if gotReason != tt.reason {
				t.Errorf("conditions = %v, want Progressing's reason %q", p.Conditions, tt.reason)
			}
			if (p.Rollback != nil) != tt.rollback {
				t.Errorf("rollback = %v, want %v", p.Rollback, tt.rollback)
			}
			var marks []string
			for _, m := range p.MarkRevisions {
				marks = append(marks, m.Key)
			}
			if !slices.Equal(marks, tt.marks) {
				t.Errorf("marks = %v, want %v", marks, tt.marks)
			}
			if tt.events != nil && !slices.Equal(eventReasons(p), tt.events) {
				t.Errorf("events = %v, want %v", eventReasons(p), tt.events)
			}
		})
	}
}

// A condition already stored is not written again, and one whose reason changes is
// written with an event; the rest of the status is never part of the plan.
func TestDecideUpdateWritesTheConditionOnlyWhenItChanges(t *testing.T) {
	ds := companionDS("1", AnnotationPaused, "true")
	first := DecideUpdate(companionCluster(ds))
	if c := Condition(first.Conditions, ConditionProgressing); c == nil || Reason(c.Reason) != ReasonPaused || len(first.Conditions) != 3 {
		t.Fatalf("first decision wrote %v, want a Paused condition with Reconciling and Stalled", first.Conditions)
	}
	stored := ds.DeepCopy()
	stored.Status.NumberReady = 4 // the other controller's counters: kept as they are
	stored.Status.Conditions = slices.Clone(first.Conditions)
	again := DecideUpdate(companionCluster(stored))
	if again.Conditions != nil || len(again.Events) > 0 {
		t.Errorf("unchanged conditions were written again: %v, events %v", again.Conditions, again.Events)
	}
	if stored.Status.Conditions[0].Reason != string(ReasonPaused) || stored.Status.NumberReady != 4 {
		t.Errorf("DecideUpdate changed its input: %+v", stored.Status)
	}
	delete(stored.Annotations, AnnotationPaused)
	resumed := DecideUpdate(companionCluster(stored))
	if c := Condition(resumed.Conditions, ConditionProgressing); c == nil || Reason(c.Reason) != ReasonRollingOut || !slices.Equal(eventReasons(resumed), []string{string(ReasonRollingOut)}) {
		t.Errorf("resumed: conditions %v, events %v; want RollingOut with its event", resumed.Conditions, eventReasons(resumed))
	}
}

// One update stage serves both modes: over a placement with nothing to do, full
// mode (Decide) and companion mode (DecideUpdate) delete the same old pods, mark the
// same revisions, roll back alike and store the same rollout conditions.
func TestDecideUpdateIsDecidesUpdateStage(t *testing.T) {
	states := map[string]struct {
		ds    *apps.DaemonSet
		setup func(ds *apps.DaemonSet, s *Snapshot)
	}{
		"first step":  {ds: companionDS("2")},
		"mid-rollout": {ds: companionDS("2"), setup: func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", notReady())) }},
		"waves":       {ds: companionDS("9", AnnotationWaves, "zone", AnnotationWaveOrder, "b"), setup: func(_ *apps.DaemonSet, s *Snapshot) { zones(s) }},
		"partition":   {ds: companionDS("9", AnnotationPartition, "3")},
		"paused":      {ds: companionDS("9", AnnotationPaused, "true")},
		"crash loop":  {ds: companionDS("1", AnnotationMaxRestarts, "1", AnnotationOnFailure, OnFailureRollback), setup: func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n2", "n2", withRestarts(2, 0))) }},
		"deadline": {ds: companionDS("1", AnnotationProgressDeadline, "1m"), setup: func(ds *apps.DaemonSet, s *Snapshot) {
			replace(s, newPod(ds, "new-n2", "n2", notReady(), createdAt(t0.Add(-2*time.Minute))))
		}},
		"invalid":      {ds: companionDS("1", AnnotationCanary, "a=b=c")},
		"broken nodes": {ds: companionDS("1"), setup: func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "old-n5", "n5", old(), notReady())) }},
	}
	for name, st := range states {
		s := companionCluster(st.ds)
		if st.setup != nil {
			st.setup(st.ds, s)
		}
		full, companion := Decide(s), DecideUpdate(s)
		if len(full.Creates) > 0 {
			t.Fatalf("%s: the placement of the full decision is not settled: %v", name, createdOn(full))
		}
		if !slices.Equal(deletedNames(full), deletedNames(companion)) {
			t.Errorf("%s: full mode deletes %v, companion mode %v", name, deletedNames(full), deletedNames(companion))
		}
		if !reflect.DeepEqual(full.MarkRevisions, companion.MarkRevisions) || !reflect.DeepEqual(full.Rollback, companion.Rollback) {
			t.Errorf("%s: marks or rollback differ: full %v %v, companion %v %v", name, full.MarkRevisions, full.Rollback, companion.MarkRevisions, companion.Rollback)
		}
		var fullConds []apps.DaemonSetCondition
		if full.Status != nil {
			fullConds = full.Status.Conditions
		}
		if !reflect.DeepEqual(fullConds, companion.Conditions) {
			t.Errorf("%s: full mode stores conditions %+v, companion mode %+v", name, fullConds, companion.Conditions)
		}
	}
}

// A RollingUpdate with the OnDelete annotation is told so, and holds.
func TestMaxUnavailableOnARollingUpdateHolds(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationMaxUnavailable, "3"))
	s := companionCluster(ds)
	p := Decide(s)
	if len(p.Deletes) > 0 {
		t.Errorf("deleted %v while the annotations are invalid", deletedNames(p))
	}
	c := Progressing(p.Status)
	if c == nil || Reason(c.Reason) != ReasonInvalidAnnotation || !strings.Contains(c.Message, "rollingUpdate.maxUnavailable") {
		t.Errorf("condition %+v, want InvalidAnnotation naming rollingUpdate.maxUnavailable", c)
	}
}

// A canary node whose old pod is going and whose new one the other controller has
// not created yet is still being updated: the rollout is not yet waiting for
// promotion.
func TestCompanionCanaryNotHeldMidUpdate(t *testing.T) {
	ds := companionDS("1", AnnotationCanary, "canary=true")
	s := companionCluster(ds)
	label(s, []string{"canary", "true"}, "n1", "n3")
	replace(s, newPod(ds, "new-n1", "n1"), newPod(ds, "old-n3", "n3", old(), terminating()))
	c := Condition(DecideUpdate(s).Conditions, ConditionProgressing)
	if c == nil || Reason(c.Reason) != ReasonRollingOut {
		t.Errorf("Progressing = %+v, want RollingOut while canary node n3 waits for its new pod", c)
	}
	replace(s, newPod(ds, "new-n3", "n3"))
	if c := Condition(DecideUpdate(s).Conditions, ConditionProgressing); c == nil || Reason(c.Reason) != ReasonCanaryHeld {
		t.Errorf("Progressing = %+v, want WaitingForPromotion once every canary node runs the new revision", c)
	}

	// The sync that deletes the last canary node's old pod does not say the rollout
	// waits for promotion either, whatever the order it sees the nodes in.
	for _, order := range [][]string{{"n1", "n2", "n3", "n4", "n5"}, {"n5", "n4", "n3", "n2", "n1"}} {
		s := rolloutCluster(ds, order...)
		s.Revisions = []*apps.ControllerRevision{olderRevision(ds, "img:v0", "old", 1), currentRevision(ds, 2)}
		label(s, []string{"canary", "true"}, "n1", "n3")
		replace(s, newPod(ds, "new-n3", "n3"))
		p := DecideUpdate(s)
		c := Condition(p.Conditions, ConditionProgressing)
		if got := deletedNames(p); len(got) != 1 || got[0] != "old-n1" || c == nil || Reason(c.Reason) != ReasonRollingOut {
			t.Errorf("nodes in order %v: deletes %v, Progressing %+v; want old-n1 deleted and RollingOut", order, got, c)
		}
	}
}
