package daemon

import (
	"fmt"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// The update stage: which pods of older revisions go, when, and what each node that
// keeps one waits for. It runs over a view whose placement is given — planned by
// place in full mode (Decide), or kept by another controller in companion mode
// (DecideUpdate) — and writes into the Plan only pod deletes (and, while surging,
// creates beside old pods), revision marks, a rollback and the Progressing condition.

// revisions are the DaemonSet's revisions as the update stage sees them.
type revisions struct {
	current *apps.ControllerRevision   // the current template's revision
	old     []*apps.ControllerRevision // every other revision, oldest first
	unsaved bool                       // current is created by this Plan: nothing to mark yet
}

// drivesUpdate reports whether the update stage rolls ds's template out: always for
// a RollingUpdate, and for an OnDelete DaemonSet when its max-unavailable annotation
// gives the budget. A plain OnDelete DaemonSet is left to whoever deletes its pods.
func drivesUpdate(ds *apps.DaemonSet, pol *Policy) bool {
	switch ds.Spec.UpdateStrategy.Type {
	case apps.RollingUpdateDaemonSetStrategyType:
		return true
	case apps.OnDeleteDaemonSetStrategyType:
		return pol.MaxUnavailable != nil
	}
	return false
}

// updateBudget is how far the update of a driven DaemonSet may go at once: the
// RollingUpdate's maxSurge and maxUnavailable, or an OnDelete DaemonSet's
// max-unavailable annotation (never a surge: its pods are recreated by placement,
// one per node), scaled against the desired nodes and rounded up.
func updateBudget(ds *apps.DaemonSet, pol *Policy, desired int) (budget, error) {
	if ds.Spec.UpdateStrategy.Type == apps.RollingUpdateDaemonSetStrategyType {
		b, err := rollingBudget(ds, desired)
		if err != nil {
			return b, fmt.Errorf("spec.updateStrategy.rollingUpdate: %w; fix the value to resume the update", err)
		}
		return b, nil
	}
	n, err := scaled(pol.MaxUnavailable, desired)
	if err != nil {
		return budget{}, fmt.Errorf("annotation %s: %w", AnnotationMaxUnavailable, err)
	}
	return budget{maxUnavailable: n}, nil
}

// checkStrategy adds the Problems of annotations that cannot work with ds's update
// strategy, or in companion mode, where another controller places the pods.
func (p *Policy) checkStrategy(ds *apps.DaemonSet, companion bool) {
	if p.MaxUnavailable != nil && ds.Spec.UpdateStrategy.Type == apps.RollingUpdateDaemonSetStrategyType {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s applies to OnDelete DaemonSets only; this one is a RollingUpdate: set spec.updateStrategy.rollingUpdate.maxUnavailable instead",
			AnnotationMaxUnavailable))
	}
	if companion && p.StableNewNodes {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s=%s cannot work in companion mode: kube-controller-manager's DaemonSet controller gives every new node the current template; remove it",
			AnnotationNewNodes, NewNodesStable))
	}
	p.checkInPlace(ds, companion)
}

// update runs the update stage: the budget, the rollout policy's gate, the old pods
// to replace, then the revision marks, rollback and Progressing condition that
// conclude the step. It returns that condition (nil when the DaemonSet has no rollout
// annotations) and false when the budget could not be computed, which is reported as
// an event instead.
func (v *view) update(pol *Policy, revs revisions, c counts, p *Plan) (*apps.DaemonSetCondition, bool) {
	desired := int(c.desired)
	b, err := updateBudget(v.ds, pol, desired)
	if err != nil {
		*p = invalid(*p, err.Error())
		return nil, false
	}
	if pol.InPlace {
		v.inPlace = newInPlace(revs.old, v.inPlaceRefused)
	}
	r := v.assess(pol, revs.current, revs.old, rolloutSince(v.ds, v.now), desired)
	r.unsaved = revs.unsaved
	v.rollOut(desired, b, r.gate, p)
	if len(v.portBlocked) > 0 && !pol.Set {
		// No Progressing condition to say it in: a Warning event does.
		p.Events = append(p.Events, Event{Type: v1.EventTypeWarning, Reason: string(ReasonSurgeHostPort),
			Message: hostPortMessage(v.portBlocked, revs.current.Revision, false)})
	}
	cond := r.conclude(v, c, p)
	p.requeueWithin(r.recheck)
	if !r.gate.holdUntil.IsZero() {
		p.requeueWithin(r.gate.holdUntil.Sub(v.now))
	}
	return cond, true
}
