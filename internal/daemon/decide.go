package daemon

import (
	"cmp"
	"fmt"
	"slices"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// defaultRevisionHistoryLimit applies when the DaemonSet sets none.
const defaultRevisionHistoryLimit = 10

// Decide computes what to do for the DaemonSet of s. See the package comment for its
// promises; each step's rules are documented where they are implemented:
// decideClaim (ownership), decideHistory (revisions), manage (placement), rollOut
// (updates) and count (status).
func Decide(s *Snapshot) Plan {
	p, _ := decide(s)
	return p
}

// decide is Decide, also returning the view the rules worked on (nil when they did
// not get that far), with every node told what it waits for.
func decide(s *Snapshot) (Plan, *view) {
	ds := s.DaemonSet
	var p Plan
	if ds.DeletionTimestamp != nil {
		// Its pods and revisions are the garbage collector's now; status would be
		// computed from objects that may be half gone.
		return p, nil
	}
	if sel := ds.Spec.Selector; sel != nil && len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		p.Events = append(p.Events, Event{Type: v1.EventTypeWarning, Reason: EventSelectingAll,
			Message: "This daemon set is selecting all pods. A non-empty selector is required."})
		return p, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return invalid(p, fmt.Sprintf("spec.selector is invalid: %v; fix the selector", err)), nil
	}
	patch, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		return invalid(p, fmt.Sprintf("spec.template cannot be recorded as a revision: %v", err)), nil
	}

	claimed := claimPods(s, selector, &p)
	controlled, nameTaken := claimRevisions(s, selector, &p)
	hp := decideHistory(ds, patch, controlled, nameTaken)
	p.LabelRevisions = hp.label
	if hp.collided {
		// The name for the new revision is taken: salt the hash and look again once
		// the status write is seen.
		// An unset count counts as zero, so the first collision makes it one.
		next := ds.Status.DeepCopy()
		next.CollisionCount = new(int32)
		if ds.Status.CollisionCount != nil {
			*next.CollisionCount = *ds.Status.CollisionCount
		}
		*next.CollisionCount++
		p.Status = next
		return p, nil
	}
	if hp.create {
		p.CreateRevision = hp.current
	}
	if hp.renumber {
		p.RenumberRevision = hp.current
	}
	p.DedupRevisions = hp.dedup
	p.Hash = hp.current.Labels[HashLabel]
	for _, pod := range claimed {
		if hp.dupHashs[pod.Labels[HashLabel]] {
			p.Relabel = append(p.Relabel, pod)
		}
	}

	elig := s.Eligibility
	if elig == nil {
		elig = NewEligibility(&ds.Spec.Template.Spec)
	}
	v := newView(s, elig, p.Hash, claimed)
	v.dupHashes = hp.dupHashs
	pol := ParsePolicy(ds.Annotations)
	pol.checkStrategy(ds, false)
	v.minHealthy = pol.MinHealthy
	v.selector, v.memoable = selector, !pol.Set && len(hp.dupHashs) == 0
	driven := drivesUpdate(ds, &pol)
	if driven && pol.StableNewNodes {
		if v.stable = stableTemplate(ds, hp.old, claimed, v.updated); v.stable != nil {
			v.stableGate = v.newNodeGate(&pol, hp.current, hp.old, rolloutSince(ds, s.Now))
		}
	}
	v.surge = allowsSurge(ds)
	v.place(s.Backoff, &p)
	c, wait := v.count()
	// The update moves only once the placement rules are satisfied and every earlier
	// write has been seen, so its budget is computed from a settled state.
	var cond *apps.DaemonSetCondition
	concluded := false
	v.settled = len(p.Creates) == 0 && len(p.Deletes) == 0 && s.InFlight.Empty()
	if v.settled && driven {
		cond, concluded = v.update(&pol, revisions{current: hp.current, old: hp.old, unsaved: hp.create}, c, &p)
	}
	finishPodChanges(s, &p)

	limit := int32(defaultRevisionHistoryLimit)
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = *ds.Spec.RevisionHistoryLimit
	}
	if len(hp.old) > int(limit) {
		// Only then do the pods' hashes matter; most syncs skip the pass over them.
		p.PruneRevisions = revisionsToPrune(hp.old, limit, liveHashes(claimed))
	}
	p.Status = nextStatus(ds, c, s.InFlight.Empty(), ds.Status.CollisionCount)
	if concluded {
		p.Status = v.withProgressing(p.Status, cond, &p)
	}
	p.requeueWithin(wait)
	p.Waiting = v.waitCounts()
	return p, v
}

// waitCounts counts the nodes that wait, by reason; nil when none does.
func (v *view) waitCounts() map[Reason]int {
	var out map[Reason]int
	for _, n := range v.nodes {
		if n.wait == "" {
			continue
		}
		if out == nil {
			out = map[Reason]int{}
		}
		out[n.wait]++
	}
	return out
}

// withProgressing adds the Progressing condition to the status to store, recording an
// event when its reason changes. status is nil when the counters are unchanged.
func (v *view) withProgressing(status *apps.DaemonSetStatus, c *apps.DaemonSetCondition, p *Plan) *apps.DaemonSetStatus {
	next := status
	if next == nil {
		next = v.ds.Status.DeepCopy()
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

// claimPods sorts the snapshot's pods by ControllerRef and returns those that are, or
// are about to be, the DaemonSet's.
func claimPods(s *Snapshot, selector labels.Selector, p *Plan) []*v1.Pod {
	claimed := make([]*v1.Pod, 0, len(s.Pods))
	for _, pod := range s.Pods {
		switch decideClaim(pod, s.DaemonSet.UID, selector) {
		case claimOwned:
			claimed = append(claimed, pod)
		case claimAdopt:
			p.Adopt = append(p.Adopt, pod)
			claimed = append(claimed, pod)
		case claimRelease:
			p.Release = append(p.Release, pod)
		}
	}
	return claimed
}

// claimRevisions does for revisions what claimPods does for pods. It also returns
// whether a name is held by any revision in the namespace.
func claimRevisions(s *Snapshot, selector labels.Selector, p *Plan) ([]*apps.ControllerRevision, func(string) bool) {
	var controlled []*apps.ControllerRevision
	names := make(map[string]bool, len(s.Revisions))
	for _, r := range s.Revisions {
		names[r.Name] = true
		switch decideClaim(r, s.DaemonSet.UID, selector) {
		case claimOwned:
			controlled = append(controlled, r)
		case claimAdopt:
			p.AdoptRevisions = append(p.AdoptRevisions, r)
			controlled = append(controlled, r)
		case claimRelease:
			p.ReleaseRevisions = append(p.ReleaseRevisions, r)
		}
	}
	return controlled, func(name string) bool { return names[name] }
}

// finishPodChanges orders the pod changes deterministically, applies the per-sync
// caps, and attaches the template new pods are made from.
func finishPodChanges(s *Snapshot, p *Plan) {
	slices.SortStableFunc(p.Creates, func(a, b PodCreate) int { return cmp.Compare(a.Node, b.Node) })
	slices.SortStableFunc(p.Deletes, func(a, b PodDelete) int { return cmp.Compare(a.Pod.Name, b.Pod.Name) })
	p.Deletes = slices.CompactFunc(p.Deletes, func(a, b PodDelete) bool { return a.Pod == b.Pod })
	slices.SortStableFunc(p.Updates, func(a, b PodUpdate) int { return cmp.Compare(a.Pod.Name, b.Pod.Name) })
	if s.MaxDeletes > 0 && len(p.Updates) > s.MaxDeletes {
		p.Updates = p.Updates[:s.MaxDeletes]
	}
	if s.MaxCreates > 0 && len(p.Creates) > s.MaxCreates {
		p.Creates = p.Creates[:s.MaxCreates]
	}
	if s.MaxDeletes > 0 && len(p.Deletes) > s.MaxDeletes {
		p.Deletes = p.Deletes[:s.MaxDeletes]
		// Only nodes whose failed pod is still deleted in this Plan back off.
		p.FailedPodNodes = slices.DeleteFunc(p.FailedPodNodes, func(node string) bool {
			return !slices.ContainsFunc(p.Deletes, func(d PodDelete) bool {
				target, _ := TargetNode(d.Pod)
				return d.Reason == ReasonFailedPod && target == node
			})
		})
	}
	if len(p.Creates) > 0 {
		p.Template = PodTemplate(s.DaemonSet, p.Hash)
	}
}

// liveHashes are the revision hashes carried by the DaemonSet's pods, finished ones
// included: their revisions are kept.
func liveHashes(pods []*v1.Pod) map[string]bool {
	live := make(map[string]bool)
	for _, pod := range pods {
		if h := pod.Labels[HashLabel]; h != "" {
			live[h] = true
		}
	}
	return live
}

func invalid(p Plan, msg string) Plan {
	p.Events = append(p.Events, Event{Type: v1.EventTypeWarning, Reason: EventInvalidSpec, Message: msg})
	return p
}
