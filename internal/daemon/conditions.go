package daemon

import (
	"fmt"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionProgressing is the DaemonSet condition everynode keeps while a DaemonSet
// carries rollout annotations: how its RollingUpdate is doing, and what it waits for.
const ConditionProgressing apps.DaemonSetConditionType = "Progressing"

// Reasons of the Progressing condition, besides the holds and failures.
const (
	ReasonRollingOut           Reason = "RollingOut"
	ReasonNewRevisionAvailable Reason = "NewRevisionAvailable"
	ReasonRolledBack           Reason = "RolledBack"
)

// progressing returns the DaemonSet's Progressing condition, or nil.
func progressing(status *apps.DaemonSetStatus) *apps.DaemonSetCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == ConditionProgressing {
			return &status.Conditions[i]
		}
	}
	return nil
}

// rolloutSince is when the rollout last started moving, as its condition records:
// the progress deadline counts from no earlier than that.
func rolloutSince(ds *apps.DaemonSet, now time.Time) time.Time {
	if c := progressing(&ds.Status); c != nil && Reason(c.Reason) == ReasonRollingOut {
		return c.LastTransitionTime.Time
	}
	return now
}

// conclude turns the assessed rollout into the Plan's revision marks, rollback and
// Progressing condition. It runs after rollOut, on a settled sync.
func (r *rollout) conclude(v *view, c counts, p *Plan) *apps.DaemonSetCondition {
	ds, now := v.ds, v.now
	prev := progressing(&ds.Status)
	if !r.pol.Set {
		return nil
	}
	released := r.released()
	// Complete: every node runs the revision and, unless it was released before,
	// every pod of it is available and done baking.
	complete := r.oldNodes == 0 && c.updated == c.desired && (released || (c.available == c.desired && !r.waiting))
	if r.fresh {
		p.MarkRevisions = append(p.MarkRevisions, RevisionMark{Revision: r.current, Key: MarkFailed,
			Value: failedMarkValue(r.current, r.failed, r.failMsg)})
	}
	if complete && r.failed == "" && !r.unsaved && !released {
		p.MarkRevisions = append(p.MarkRevisions, RevisionMark{Revision: r.current, Key: MarkAvailable,
			Value: now.UTC().Format(time.RFC3339)})
	}
	reason, status, msg := r.describe(v, complete, prev)
	switch {
	case r.failed != "" && r.restoring:
		reason, status = ReasonRollbackFailed, v1.ConditionFalse
		msg = fmt.Sprintf("revision %d, restored by a rollback from failed revision %d, failed too: %s; the rollout holds here rather than roll back again: fix the template and apply it, or run `everynode rollout resume` to try revision %d again",
			r.current.Revision, r.restored.from, r.failMsg, r.current.Revision)
	case r.failed != "" && r.pol.Rollback && len(r.pol.Problems) == 0:
		if target := rollbackTarget(r.old); target != nil {
			p.Rollback = target
			p.MarkRevisions = append(p.MarkRevisions, restoreMarks(r.current, target, now)...)
			reason, status = ReasonRolledBack, v1.ConditionFalse
			msg = fmt.Sprintf("revision %d failed (%s: %s); rolled back to the template of revision %d, which becomes the newest revision",
				r.current.Revision, r.failed, r.failMsg, target.Revision)
		} else {
			msg += "; no earlier revision to roll back to, so the rollout is held"
		}
	}
	return nextCondition(prev, reason, status, msg, now)
}

// describe says, in one reason, what the rollout is doing.
func (r *rollout) describe(v *view, complete bool, prev *apps.DaemonSetCondition) (Reason, v1.ConditionStatus, string) {
	rev := r.current.Revision
	g := r.gate
	switch {
	case len(r.pol.Problems) > 0:
		return ReasonInvalidAnnotation, v1.ConditionFalse, strings.Join(r.pol.Problems, "; ") + "; the rollout holds until it is fixed"
	case r.failed != "":
		return r.failed, v1.ConditionFalse, fmt.Sprintf("revision %d failed: %s; the rollout holds until the template changes or `everynode rollout resume` runs", rev, r.failMsg)
	case complete:
		return ReasonNewRevisionAvailable, v1.ConditionTrue, fmt.Sprintf("revision %d is available on every node", rev)
	case prev != nil && Reason(prev.Reason) == ReasonRolledBack && r.restoring:
		return ReasonRolledBack, v1.ConditionFalse, prev.Message
	case r.pol.Paused:
		return ReasonPaused, v1.ConditionUnknown, fmt.Sprintf("revision %d is paused by %s; remove it or run `everynode rollout resume` to go on", rev, AnnotationPaused)
	case len(v.portBlocked) > 0 && !g.deleteFirst:
		return ReasonSurgeHostPort, v1.ConditionFalse, hostPortMessage(v.portBlocked, rev, false)
	case len(v.portBlocked) > 0:
		return ReasonRollingOut, v1.ConditionTrue, fmt.Sprintf("rolling out revision %d; %s", rev, hostPortMessage(v.portBlocked, rev, true))
	case r.waiting:
		return ReasonRollingOut, v1.ConditionTrue, fmt.Sprintf("rolling out revision %d", rev)
	case g.hold == ReasonWavePause:
		return ReasonWavePause, v1.ConditionTrue, fmt.Sprintf("revision %d: wave %s=%q starts at %s, after the wave pause", rev, g.waveKey, g.wave, g.holdUntil.UTC().Format(time.RFC3339))
	}
	if why := r.onlyHold(v); why != "" {
		switch why {
		case ReasonCanaryHeld:
			return why, v1.ConditionTrue, fmt.Sprintf("revision %d runs on the canary nodes; remove %s or run `everynode rollout promote` to update the rest", rev, AnnotationCanary)
		case ReasonPartitionHeld:
			return why, v1.ConditionTrue, fmt.Sprintf("%d nodes stay on older revisions while %s is %s", r.oldNodes, AnnotationPartition, r.pol.Partition.String())
		}
	}
	return ReasonRollingOut, v1.ConditionTrue, fmt.Sprintf("rolling out revision %d", rev)
}

// onlyHold returns the one policy hold that every node still on an older revision
// waits for, if there is one.
func (r *rollout) onlyHold(v *view) Reason {
	var why Reason
	for _, n := range v.nodes {
		if n.node == nil || !n.verdict.Run {
			continue
		}
		if cur, old, ok := v.podsOnNode(n); !ok || cur != nil || old == nil {
			continue
		}
		if why != "" && n.wait != why {
			return ""
		}
		why = n.wait
	}
	if why == ReasonCanaryHeld || why == ReasonPartitionHeld {
		return why
	}
	return ""
}

// nextCondition is the Progressing condition to store: its transition time moves only
// when the reason does.
func nextCondition(prev *apps.DaemonSetCondition, reason Reason, status v1.ConditionStatus, msg string, now time.Time) *apps.DaemonSetCondition {
	c := &apps.DaemonSetCondition{Type: ConditionProgressing, Status: status, Reason: string(reason), Message: msg,
		LastTransitionTime: metav1.NewTime(now)}
	if prev != nil && prev.Reason == c.Reason && prev.Status == c.Status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// withCondition returns status with the Progressing condition set to c (removed when
// c is nil), and whether that changed anything. An event is due when the reason did.
func withCondition(status *apps.DaemonSetStatus, c *apps.DaemonSetCondition) (changed, transition bool) {
	prev := progressing(status)
	switch {
	case c == nil && prev == nil:
		return false, false
	case c == nil:
		kept := status.Conditions[:0:0]
		for _, x := range status.Conditions {
			if x.Type != ConditionProgressing {
				kept = append(kept, x)
			}
		}
		status.Conditions = kept
		return true, false
	case prev == nil:
		status.Conditions = append(status.Conditions, *c)
		return true, true
	}
	if prev.Status == c.Status && prev.Reason == c.Reason && prev.Message == c.Message &&
		prev.LastTransitionTime.Equal(&c.LastTransitionTime) {
		return false, false
	}
	transition = prev.Reason != c.Reason
	*prev = *c
	return true, transition
}

// conditionEvent is the event recorded when the Progressing reason changes.
func conditionEvent(c *apps.DaemonSetCondition) Event {
	typ := v1.EventTypeNormal
	if c.Status == v1.ConditionFalse {
		typ = v1.EventTypeWarning
	}
	return Event{Type: typ, Reason: c.Reason, Message: c.Message}
}
