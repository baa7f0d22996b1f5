package rolloutplan

import (
	"fmt"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/everynode/everynode/internal/daemon"
)

// settled looks at the world after a decision that wrote nothing: whether the rollout
// is complete, holds for a person, failed, or has nothing left to wait for.
func (r *run) settled(p daemon.Plan) (End, bool) {
	w := r.w
	cond := daemon.Progressing(&w.ds.Status)
	if r.complete(cond) {
		e := End{State: Complete}
		if cond != nil {
			e.Reason, e.Message = cond.Reason, cond.Message
		}
		return e, true
	}
	starting := len(w.readyAt) > 0
	if cond != nil {
		e := End{Reason: cond.Reason, Message: cond.Message}
		name := w.ds.Name
		switch daemon.Reason(cond.Reason) {
		case daemon.ReasonPaused:
			e.State, e.Continue = Held, "everynode rollout resume "+name
		case daemon.ReasonCanaryHeld:
			e.State, e.Continue = Held, "everynode rollout promote "+name
			if !r.anyCanary() {
				e.Message += fmt.Sprintf(" (no node that should run the pod matches the canary selector %q)", r.w.ds.Annotations[daemon.AnnotationCanary])
			}
		case daemon.ReasonPartitionHeld:
			e.State, e.Continue = Held, fmt.Sprintf("lower %s, or run `everynode rollout promote %s`", daemon.AnnotationPartition, name)
		case daemon.ReasonInvalidAnnotation:
			e.State, e.Continue = Held, "fix the annotation the message names"
		case daemon.ReasonSurgeHostPort:
			e.State, e.Continue = Held, fmt.Sprintf("set %s: %s", daemon.AnnotationSurgeFallback, daemon.SurgeDeleteFirst)
		}
		if e.State == Held && !starting {
			return e, true
		}
		if cond.Status == v1.ConditionFalse && e.State == "" {
			e.State, e.Continue = Failed, fmt.Sprintf("fix the template, or run `everynode rollout resume %s` to try again", name)
			return e, true
		}
	}
	if starting || p.RequeueAfter > 0 {
		return End{}, false
	}
	if w.ds.Spec.UpdateStrategy.Type == apps.OnDeleteDaemonSetStrategyType && r.pol.MaxUnavailable == nil {
		return End{State: Held, Reason: string(apps.OnDeleteDaemonSetStrategyType),
			Message:  "updateStrategy OnDelete: a pod is replaced by the new template only once someone deletes it",
			Continue: fmt.Sprintf("delete the old pods yourself, or set %s for everynode to roll them out", daemon.AnnotationMaxUnavailable)}, true
	}
	reason := mainWait(p.Waiting)
	return End{State: Held, Reason: string(reason), Message: "nothing more happens by itself: " + r.waitMessage(reason),
		Continue: fmt.Sprintf("run `everynode explain %s` for what each node waits for", w.ds.Name)}, true
}

// complete: every node that should run the pod runs an available pod of the current
// revision and nothing older, the status says so, and so does the Progressing
// condition (done baking) when the DaemonSet has one.
func (r *run) complete(cond *apps.DaemonSetCondition) bool {
	st := r.w.ds.Status
	if st.ObservedGeneration < r.w.ds.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled ||
		st.NumberAvailable != st.DesiredNumberScheduled {
		return false
	}
	if r.pol.Set && (cond == nil || daemon.Reason(cond.Reason) != daemon.ReasonNewRevisionAvailable) {
		return false
	}
	return r.w.oldPods(r.hash) == 0
}

// rolledBack is the end of a rollout the core rolls back: it failed.
func (r *run) rolledBack(p daemon.Plan) End {
	e := End{State: Failed, Reason: string(daemon.ReasonRolledBack),
		Message:  fmt.Sprintf("the rollout fails and everynode rolls the template back to revision %d", p.Rollback.Revision),
		Continue: "find why the new pods did not become available in time (the estimate assumed --pod-start), fix the template and apply it"}
	if c := daemon.Progressing(&r.w.ds.Status); c != nil && daemon.Reason(c.Reason) == daemon.ReasonRolledBack {
		e.Message = c.Message
	}
	return e
}

// invalidSpec is the end of a plan the core refuses to act on.
func invalidSpec(p daemon.Plan) (End, bool) {
	for _, e := range p.Events {
		if e.Reason == daemon.EventInvalidSpec || e.Reason == daemon.EventSelectingAll {
			return End{State: Failed, Reason: e.Reason, Message: e.Message, Continue: "fix the DaemonSet's spec"}, true
		}
	}
	return End{}, false
}

// anyCanary reports whether a node that should run the pod matches the canary.
func (r *run) anyCanary() bool {
	for _, n := range r.w.nodes {
		if r.pol.Canary != nil && r.pol.Canary.Matches(labels.Set(n.Labels)) && r.w.elig.Check(n).Run {
			return true
		}
	}
	return false
}
