package daemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// rolloutSince is when the rollout last started moving, as its condition records:
// the progress deadline counts from no earlier than that.
func rolloutSince(ds *apps.DaemonSet, now time.Time) time.Time {
	if c := Progressing(&ds.Status); c != nil && Reason(c.Reason) == ReasonRollingOut {
		return c.LastTransitionTime.Time
	}
	return now
}

// conclude turns the assessed rollout into the Plan's revision marks, rollback and
// Progressing condition. It runs after rollOut, on a settled sync.
func (r *rollout) conclude(u *updater, c counts, p *Plan) *apps.DaemonSetCondition {
	ds, now, pol := u.pl.ds, u.pl.now, u.pol
	prev := Progressing(&ds.Status)
	if !pol.Set {
		return nil
	}
	released := r.released()
	// Complete: every node runs the revision and, unless it was released before,
	// every pod of it is available and done baking.
	complete := r.oldNodes == 0 && r.sickOld == 0 && c.updated == c.desired && (released || (c.available == c.desired && !r.waiting))
	if r.fresh {
		p.MarkRevisions = append(p.MarkRevisions, RevisionMark{Revision: r.current, Key: MarkFailed,
			Value: failedMarkValue(r.current, r.failed, r.failMsg)})
	}
	if complete && r.failed == "" && !r.unsaved && !released {
		p.MarkRevisions = append(p.MarkRevisions, RevisionMark{Revision: r.current, Key: MarkAvailable,
			Value: now.UTC().Format(time.RFC3339)})
	}
	reason, status, msg := r.describe(u, complete, prev)
	switch {
	case r.failed != "" && r.restoring:
		reason, status = ReasonRollbackFailed, v1.ConditionFalse
		msg = fmt.Sprintf("revision %d, restored by a rollback from failed revision %d, failed too: %s; the rollout holds here rather than roll back again: fix the template and apply it, or run `everynode rollout resume` to try revision %d again",
			r.current.Revision, r.restored.from, r.failMsg, r.current.Revision)
	case r.failed != "" && pol.Rollback && len(pol.Problems) == 0:
		if target := rollbackTarget(u.revs.old); target != nil {
			p.Rollback = target
			p.MarkRevisions = append(p.MarkRevisions, restoreMarks(r.current, target, now)...)
			reason, status = ReasonRolledBack, v1.ConditionFalse
			msg = fmt.Sprintf("revision %d failed (%s: %s); rolled back to the template of revision %d, which becomes the newest revision",
				r.current.Revision, r.failed, r.failMsg, target.Revision)
		} else {
			msg += "; no earlier revision to roll back to, so the rollout is held"
		}
	}
	if reason != ReasonRolledBack && reason != ReasonInvalidAnnotation {
		// A rolled-back condition keeps its message; an invalid annotation's says
		// only what to fix.
		msg += unexplainedSuffix(u.pl.unavailable())
	}
	return nextCondition(prev, reason, status, msg, now)
}

// unexplainedSuffix names, for the Progressing message, the unavailable pods the
// rollout itself does not explain: every cause but Updating and Starting (a node's
// troubles, failing containers, evictions, the unknown), "" when there are none. The
// routine causes are left out so that the message, and the condition writes that
// follow it, do not change at every step of a healthy rollout.
func unexplainedSuffix(causes []CauseCount) string {
	odd := slices.DeleteFunc(slices.Clone(causes), func(c CauseCount) bool {
		return c.Cause == CauseUpdating || c.Cause == CauseStarting
	})
	if len(odd) == 0 {
		return ""
	}
	return "; unavailable: " + FormatCauses(odd)
}

// describe says, in one reason, what the rollout is doing.
func (r *rollout) describe(u *updater, complete bool, prev *apps.DaemonSetCondition) (Reason, v1.ConditionStatus, string) {
	rev := r.current.Revision
	g, pol := r.gate, u.pol
	switch {
	case len(pol.Problems) > 0:
		return ReasonInvalidAnnotation, v1.ConditionFalse, strings.Join(pol.Problems, "; ") + "; the rollout holds until it is fixed"
	case r.failed != "":
		return r.failed, v1.ConditionFalse, fmt.Sprintf("revision %d failed: %s; the rollout holds until the template changes or `everynode rollout resume` runs", rev, r.failMsg)
	case complete:
		return ReasonNewRevisionAvailable, v1.ConditionTrue, fmt.Sprintf("revision %d is available on every node", rev)
	case prev != nil && Reason(prev.Reason) == ReasonRolledBack && r.restoring:
		return ReasonRolledBack, v1.ConditionFalse, prev.Message
	case pol.Paused:
		return ReasonPaused, v1.ConditionUnknown, fmt.Sprintf("revision %d is paused by %s; remove it or run `everynode rollout resume` to go on", rev, AnnotationPaused)
	case g.hold == ReasonTooManySickNodes:
		return ReasonTooManySickNodes, v1.ConditionTrue, fmt.Sprintf("revision %d holds: %d of %d nodes are sick (NotReady for over %v, unreachable, shutting down or under maintenance), more than half; the rollout goes on when no more than half are",
			rev, r.sick, r.sickOf, pol.SickGrace)
	case len(u.portBlocked) > 0 && !g.deleteFirst:
		return ReasonSurgeHostPort, v1.ConditionFalse, hostPortMessage(u.portBlocked, rev, false)
	case len(u.portBlocked) > 0:
		return ReasonRollingOut, v1.ConditionTrue, fmt.Sprintf("rolling out revision %d; %s", rev, hostPortMessage(u.portBlocked, rev, true))
	case r.waiting:
		return ReasonRollingOut, v1.ConditionTrue, fmt.Sprintf("rolling out revision %d", rev)
	case g.hold == ReasonWavePause:
		return ReasonWavePause, v1.ConditionTrue, fmt.Sprintf("revision %d: wave %s=%q starts at %s, after the wave pause", rev, g.waveKey, g.wave, g.holdUntil.UTC().Format(time.RFC3339))
	}
	if sick := u.sickLeft(); len(sick) > 0 {
		keep := fmt.Sprintf("%d sick nodes keep their pods until they recover", len(sick))
		if len(sick) == 1 {
			keep = "1 sick node keeps its pod until it recovers"
		}
		return ReasonSickNodesLeft, v1.ConditionTrue, fmt.Sprintf("revision %d runs on every healthy node; %s (%s): %s",
			rev, keep, AnnotationSickNodes, strings.Join(sick, ", "))
	}
	if why := r.onlyHold(u); why != "" {
		switch why {
		case ReasonCanaryHeld:
			return why, v1.ConditionTrue, fmt.Sprintf("revision %d runs on the canary nodes; remove %s or run `everynode rollout promote` to update the rest", rev, AnnotationCanary)
		case ReasonPartitionHeld:
			return why, v1.ConditionTrue, fmt.Sprintf("%d nodes stay on older revisions while %s is %s", r.oldNodes, AnnotationPartition, pol.Partition.String())
		}
	}
	return ReasonRollingOut, v1.ConditionTrue, fmt.Sprintf("rolling out revision %d", rev)
}

// onlyHold returns the one policy hold that every node still on an older revision
// waits for, if there is one.
func (r *rollout) onlyHold(u *updater) Reason {
	var why Reason
	for i := range u.nodes {
		n := &u.nodes[i]
		if n.node == nil || !n.verdict.Run {
			continue
		}
		if cur, old, ok := u.podsOnNode(n); !ok || cur != nil || old == nil {
			continue
		}
		if n.wait == "" || (why != "" && n.wait != why) {
			return "" // it is being updated now, or held for another reason
		}
		why = n.wait
	}
	if why == ReasonCanaryHeld || why == ReasonPartitionHeld {
		return why
	}
	return ""
}

// restoreMark is what MarkRestored records on a revision a rollback restored.
type restoreMark struct {
	revision int64 // the number the revision takes once restored
	from     int64 // the failed revision it replaced
}

// restoreMarks are the marks a rollback from the current revision (failed) to
// target leaves on target: restored, one above the current one, and no longer
// known to be available everywhere (it rolls out again).
func restoreMarks(current, target *apps.ControllerRevision, at time.Time) []RevisionMark {
	value := fmt.Sprintf("%d from %d at %s", current.Revision+1, current.Revision, at.UTC().Format(time.RFC3339))
	marks := []RevisionMark{{Revision: target, Key: MarkRestored, Value: value}}
	if _, ok := target.Annotations[MarkAvailable]; ok {
		marks = append(marks, RevisionMark{Revision: target, Key: MarkAvailable, Remove: true})
	}
	return marks
}

// readRestoreMark reads a revision's MarkRestored (the time in it is for people).
// Like MarkFailed, a mark counts only while the revision keeps the number it was
// restored under.
func readRestoreMark(r *apps.ControllerRevision) (restoreMark, bool) {
	val, ok := r.Annotations[MarkRestored]
	if !ok {
		return restoreMark{}, false
	}
	var m restoreMark
	if _, err := fmt.Sscanf(val, "%d from %d", &m.revision, &m.from); err != nil || m.revision != r.Revision {
		return restoreMark{}, false
	}
	return m, true
}

// restoring reports whether r is a revision a rollback restored that has not been
// available on every node since: its rollout is watched as a new one's is, and it
// is not rolled back from again.
func restoring(r *apps.ControllerRevision) (restoreMark, bool) {
	m, ok := readRestoreMark(r)
	if !ok {
		return restoreMark{}, false
	}
	if _, released := r.Annotations[MarkAvailable]; released {
		return restoreMark{}, false
	}
	return m, true
}

// rollbackTarget is the revision a failed rollout returns to: the newest one that
// was once available on every node, else the newest earlier one, as
// `kubectl rollout undo` picks. Revisions that failed themselves are passed over.
func rollbackTarget(old []*apps.ControllerRevision) *apps.ControllerRevision {
	var newest *apps.ControllerRevision
	for i := len(old) - 1; i >= 0; i-- {
		r := old[i]
		if _, _, failed := failedMark(r); failed {
			continue
		}
		if _, ok := r.Annotations[MarkAvailable]; ok {
			return r
		}
		if newest == nil {
			newest = r
		}
	}
	return newest
}

// nextStatus returns the status to store, or nil if the stored one already says the
// same. observed raises observedGeneration to the DaemonSet's generation; it is false
// while the controller's own writes are still in flight. Fields other than the
// counters (conditions among them) are kept as they are.
func nextStatus(ds *apps.DaemonSet, c counts, observed bool, collisionCount *int32) *apps.DaemonSetStatus {
	old := &ds.Status
	next := old.DeepCopy()
	next.DesiredNumberScheduled = c.desired
	next.CurrentNumberScheduled = c.current
	next.NumberMisscheduled = c.misscheduled
	next.NumberReady = c.ready
	next.NumberAvailable = c.available
	next.NumberUnavailable = c.desired - c.available
	next.UpdatedNumberScheduled = c.updated
	if observed {
		next.ObservedGeneration = ds.Generation
	}
	next.CollisionCount = nil
	if collisionCount != nil {
		next.CollisionCount = new(int32)
		*next.CollisionCount = *collisionCount
	}
	unchanged := next.DesiredNumberScheduled == old.DesiredNumberScheduled &&
		next.CurrentNumberScheduled == old.CurrentNumberScheduled &&
		next.NumberMisscheduled == old.NumberMisscheduled &&
		next.NumberReady == old.NumberReady &&
		next.NumberAvailable == old.NumberAvailable &&
		next.NumberUnavailable == old.NumberUnavailable &&
		next.UpdatedNumberScheduled == old.UpdatedNumberScheduled &&
		equalCount(next.CollisionCount, old.CollisionCount) &&
		(old.ObservedGeneration >= ds.Generation || !observed)
	if unchanged {
		return nil
	}
	return next
}

func equalCount(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
