package daemon

import (
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionProgressing is the DaemonSet condition everynode keeps while a DaemonSet
// carries rollout annotations: how its RollingUpdate is doing, and what it waits for.
const ConditionProgressing apps.DaemonSetConditionType = "Progressing"

// Progressing returns the Progressing condition of a DaemonSet's status, or nil: the
// one lookup of it, for the core and every tool that shows it.
func Progressing(status *apps.DaemonSetStatus) *apps.DaemonSetCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == ConditionProgressing {
			return &status.Conditions[i]
		}
	}
	return nil
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
	prev := Progressing(status)
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

// statusWithProgressing adds the Progressing condition to the status to store (full mode),
// recording an event when its reason changes. status is nil when the counters are
// unchanged; so is the answer when the condition is too.
func statusWithProgressing(ds *apps.DaemonSet, status *apps.DaemonSetStatus, c *apps.DaemonSetCondition, p *Plan) *apps.DaemonSetStatus {
	next := status
	if next == nil {
		next = ds.Status.DeepCopy()
	}
	changed, transition := withCondition(next, c)
	if transition {
		p.Events = append(p.Events, conditionEvent(c))
	}
	if !changed {
		return status
	}
	return next
}

// progressingChange returns c when storing it would change the DaemonSet's
// Progressing condition (companion mode, where it is stored on its own), nil when it
// would not, recording an event when its reason changes.
func progressingChange(ds *apps.DaemonSet, c *apps.DaemonSetCondition, p *Plan) *apps.DaemonSetCondition {
	var next apps.DaemonSetStatus // a copy: withCondition changes what it is given
	if prev := Progressing(&ds.Status); prev != nil {
		next.Conditions = []apps.DaemonSetCondition{*prev}
	}
	changed, transition := withCondition(&next, c)
	if transition {
		p.Events = append(p.Events, conditionEvent(c))
	}
	if !changed {
		return nil
	}
	return c
}
