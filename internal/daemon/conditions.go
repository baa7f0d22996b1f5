package daemon

import (
	"slices"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The rollout's conditions. While a DaemonSet carries rollout annotations, everynode
// keeps three on it, in the status write it makes anyway:
//
//   - Progressing, its own: what the rollout does or waits for, in the reasons of
//     reasons.go (True while it moves or is done, Unknown while paused, False when it
//     failed or cannot go on without a fix);
//   - Reconciling and Stalled, the conditions that tools reading any kind of object
//     understand (kstatus, and through it Flux and Helm 4; Argo CD through the chart's
//     health check): Reconciling is True while the rollout is under way, Stalled is
//     True when it failed or holds until someone fixes something.
//
// The last two are derived from Progressing alone, with its reason and message, so
// they change only when it does and never need a write of their own.
const (
	ConditionProgressing apps.DaemonSetConditionType = "Progressing"
	ConditionReconciling apps.DaemonSetConditionType = "Reconciling"
	ConditionStalled     apps.DaemonSetConditionType = "Stalled"
)

// rolloutConditionTypes are the conditions everynode owns on a DaemonSet, in the
// order it adds them.
var rolloutConditionTypes = [...]apps.DaemonSetConditionType{ConditionProgressing, ConditionReconciling, ConditionStalled}

// Progressing returns the Progressing condition of a DaemonSet's status, or nil: the
// one lookup of it, for the core and every tool that shows it.
func Progressing(status *apps.DaemonSetStatus) *apps.DaemonSetCondition {
	return Condition(status.Conditions, ConditionProgressing)
}

// Condition returns the condition of type t in conds, or nil.
func Condition(conds []apps.DaemonSetCondition, t apps.DaemonSetConditionType) *apps.DaemonSetCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// rolloutConditions are the three conditions to store for the Progressing condition
// c, given the conditions stored now: Stalled when c is False (a failure, a rollback,
// an invalid annotation, a hold only a fix ends), else Reconciling until the new
// revision is available everywhere. A derived condition's transition time moves
// when its status does, to the Progressing condition's.
func rolloutConditions(stored []apps.DaemonSetCondition, c *apps.DaemonSetCondition) []apps.DaemonSetCondition {
	reconciling, stalled := v1.ConditionFalse, v1.ConditionFalse
	switch {
	case c.Status == v1.ConditionFalse:
		stalled = v1.ConditionTrue
	case Reason(c.Reason) != ReasonNewRevisionAvailable:
		reconciling = v1.ConditionTrue
	}
	derive := func(t apps.DaemonSetConditionType, status v1.ConditionStatus) apps.DaemonSetCondition {
		d := apps.DaemonSetCondition{Type: t, Status: status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		if prev := Condition(stored, t); prev != nil && prev.Status == status {
			d.LastTransitionTime = prev.LastTransitionTime
		}
		return d
	}
	return []apps.DaemonSetCondition{*c, derive(ConditionReconciling, reconciling), derive(ConditionStalled, stalled)}
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

// withConditions returns status with the rollout's conditions set for the
// Progressing condition c (all three removed when c is nil), and whether that changed
// anything. An event is due when Progressing's reason did.
func withConditions(status *apps.DaemonSetStatus, c *apps.DaemonSetCondition) (changed, transition bool) {
	if c == nil {
		kept := status.Conditions[:0:0]
		for _, x := range status.Conditions {
			if !slices.Contains(rolloutConditionTypes[:], x.Type) {
				kept = append(kept, x)
			}
		}
		changed = len(kept) != len(status.Conditions)
		if changed {
			status.Conditions = kept
		}
		return changed, false
	}
	prev := Progressing(status)
	transition = prev == nil || prev.Reason != c.Reason
	for _, next := range rolloutConditions(status.Conditions, c) {
		switch prev := Condition(status.Conditions, next.Type); {
		case prev == nil:
			status.Conditions = append(status.Conditions, next)
			changed = true
		case prev.Status != next.Status || prev.Reason != next.Reason || prev.Message != next.Message ||
			!prev.LastTransitionTime.Equal(&next.LastTransitionTime):
			*prev = next
			changed = true
		}
	}
	return changed, changed && transition
}

// conditionEvent is the event recorded when the Progressing reason changes.
func conditionEvent(c *apps.DaemonSetCondition) Event {
	typ := v1.EventTypeNormal
	if c.Status == v1.ConditionFalse {
		typ = v1.EventTypeWarning
	}
	return Event{Type: typ, Reason: c.Reason, Message: c.Message}
}

// statusWithConditions adds the rollout's conditions to the status to store (full
// mode), recording an event when Progressing's reason changes. status is nil when
// the counters are unchanged; so is the answer when the conditions are too.
func statusWithConditions(ds *apps.DaemonSet, status *apps.DaemonSetStatus, c *apps.DaemonSetCondition, p *Plan) *apps.DaemonSetStatus {
	next := status
	if next == nil {
		next = ds.Status.DeepCopy()
	}
	changed, transition := withConditions(next, c)
	if transition {
		p.Events = append(p.Events, conditionEvent(c))
	}
	if !changed {
		return status
	}
	return next
}

// conditionsChange returns the rollout's conditions when storing them for c would
// change the DaemonSet's (companion mode, where they are stored on their own), nil
// when it would not, recording an event when Progressing's reason changes.
func conditionsChange(ds *apps.DaemonSet, c *apps.DaemonSetCondition, p *Plan) []apps.DaemonSetCondition {
	var next apps.DaemonSetStatus // a copy: withConditions changes what it is given
	for _, t := range rolloutConditionTypes {
		if prev := Condition(ds.Status.Conditions, t); prev != nil {
			next.Conditions = append(next.Conditions, *prev)
		}
	}
	changed, transition := withConditions(&next, c)
	if transition {
		p.Events = append(p.Events, conditionEvent(c))
	}
	if !changed {
		return nil
	}
	return next.Conditions // the three, as withConditions left them
}
