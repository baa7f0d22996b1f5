package daemon

import (
	"bytes"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Companion mode: on a cluster whose own DaemonSet controller (kube-controller-manager's)
// cannot be turned off, that controller keeps placement — it creates the missing pods
// from the current template, removes pods from nodes that no longer qualify, replaces
// failed pods, writes the revisions and the status counters — and everynode runs the
// update stage alone over it, for the OnDelete DaemonSets that opt in with
// rollout.everynode.dev/max-unavailable: it deletes old pods in the order and at the
// pace the rollout annotations say, and the other controller recreates each from the
// new template.

// CompanionManages reports whether companion mode acts on ds: an OnDelete DaemonSet
// with the max-unavailable annotation (valid or not: an invalid value is reported on
// it). Every other DaemonSet is left alone.
func CompanionManages(ds *apps.DaemonSet) bool {
	_, ok := ds.Annotations[AnnotationMaxUnavailable]
	return ok && ds.Spec.UpdateStrategy.Type == apps.OnDeleteDaemonSetStrategyType
}

// DecideUpdate is Decide for companion mode: the update stage alone, over the pods and
// revisions another controller placed and recorded. Its Plan holds only pod deletes,
// revision marks, a rollback, the Progressing condition (in Progressing, never in
// Status) and events; it never creates a pod or a revision, adopts or releases
// anything, or counts pods into the status.
func DecideUpdate(s *Snapshot) Plan {
	p, _ := decideUpdate(s)
	return p
}

// decideUpdate is DecideUpdate, also returning the view (nil when the update stage
// has nothing to look at).
func decideUpdate(s *Snapshot) (Plan, *view) {
	ds := s.DaemonSet
	var p Plan
	if !CompanionManages(ds) || ds.DeletionTimestamp != nil {
		return p, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || selector.Empty() {
		return p, nil // the other controller reports a selector it cannot use
	}
	patch, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		return p, nil
	}
	revs, ok := recordedRevisions(s, patch)
	if !ok {
		// The other controller has not recorded the template yet; its revision
		// write brings the DaemonSet back.
		return p, nil
	}
	p.Hash = revs.current.Labels[HashLabel]
	var owned []*v1.Pod
	for _, pod := range s.Pods {
		if metav1.IsControlledBy(pod, ds) {
			owned = append(owned, pod)
		}
	}
	elig := s.Eligibility
	if elig == nil {
		elig = NewEligibility(&ds.Spec.Template.Spec)
	}
	v := newView(s, elig, p.Hash, owned)
	c, wait := v.count()
	// The update moves once its own deletes are seen. The other controller's
	// placement need not be settled: a node whose pod is missing or not yet available
	// counts against the budget like any other unavailable node.
	v.settled = s.InFlight.Empty()
	if v.settled {
		pol := ParsePolicy(ds.Annotations)
		pol.checkStrategy(ds, true)
		v.minHealthy = pol.MinHealthy
		if cond, ran := v.update(&pol, revs, c, &p); ran && cond != nil {
			p.Progressing = v.progressingChange(cond, &p)
		}
	}
	finishPodChanges(s, &p)
	p.requeueWithin(wait)
	p.Waiting = v.waitCounts()
	return p, v
}

// recordedRevisions finds the revisions of ds as the other controller recorded them:
// the current one is the revision whose Data is byte for byte the template's patch.
// ok is false until that controller has finished recording the template: no such
// revision yet, several of them, or one not yet renumbered to the newest.
func recordedRevisions(s *Snapshot, patch []byte) (revisions, bool) {
	var revs revisions
	for _, r := range s.Revisions {
		if !metav1.IsControlledBy(r, s.DaemonSet) {
			continue
		}
		if !bytes.Equal(r.Data.Raw, patch) {
			revs.old = append(revs.old, r)
			continue
		}
		if revs.current != nil || r.Labels[HashLabel] == "" {
			return revisions{}, false
		}
		revs.current = r
	}
	if revs.current == nil {
		return revisions{}, false
	}
	sortRevisions(revs.old)
	if n := len(revs.old); n > 0 && revs.old[n-1].Revision >= revs.current.Revision {
		return revisions{}, false
	}
	return revs, true
}

// progressingChange returns c when storing it would change the DaemonSet's
// Progressing condition (nil when it would not), recording an event when its reason
// changes.
func (v *view) progressingChange(c *apps.DaemonSetCondition, p *Plan) *apps.DaemonSetCondition {
	var next apps.DaemonSetStatus // a copy: withCondition changes what it is given
	if prev := progressing(&v.ds.Status); prev != nil {
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
