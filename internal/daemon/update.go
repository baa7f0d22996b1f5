package daemon

import (
	"fmt"

	apps "k8s.io/api/apps/v1"
)

// The update stage: which pods of older revisions go, when, and what each node that
// keeps one waits for. It runs over a view whose placement is given — planned by
// place (Decide) — and writes into the Plan only pod deletes (and, while surging,
// creates beside old pods), revision marks, a rollback and the Progressing condition.

// revisions are the DaemonSet's revisions as the update stage sees them.
type revisions struct {
	current *apps.ControllerRevision   // the current template's revision
	old     []*apps.ControllerRevision // every other revision, oldest first
	unsaved bool                       // current is created by this Plan: nothing to mark yet
}

// drivesUpdate reports whether the update stage rolls ds's template out: for a
// RollingUpdate. An OnDelete DaemonSet is left to whoever deletes its pods.
func drivesUpdate(ds *apps.DaemonSet, _ *Policy) bool {
	return ds.Spec.UpdateStrategy.Type == apps.RollingUpdateDaemonSetStrategyType
}

// updateBudget is how far the update of a driven DaemonSet may go at once: the
// RollingUpdate's maxSurge and maxUnavailable, scaled against the desired nodes and
// rounded up.
func updateBudget(ds *apps.DaemonSet, _ *Policy, desired int) (budget, error) {
	b, err := rollingBudget(ds, desired)
	if err != nil {
		return b, fmt.Errorf("spec.updateStrategy.rollingUpdate: %w; fix the value to resume the update", err)
	}
	return b, nil
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
	r := v.assess(pol, revs.current, revs.old, rolloutSince(v.ds, v.now), desired)
	r.unsaved = revs.unsaved
	v.rollOut(desired, b, r.gate, p)
	cond := r.conclude(v, c, p)
	p.requeueWithin(r.recheck)
	if !r.gate.holdUntil.IsZero() {
		p.requeueWithin(r.gate.holdUntil.Sub(v.now))
	}
	return cond, true
}
