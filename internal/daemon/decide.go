package daemon

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// The entry points. Each runs the stages in order over one Snapshot:
//
//	Decide          claim → history → placement → update → status   (full mode)
//	DecideWith      the same, from a Memo when only nodes and pods changed
//	DecideFromMemo  from a Memo and the named changes alone, when it can
//	DecideUpdate    update alone, over another controller's placement (companion mode)

// defaultRevisionHistoryLimit applies when the DaemonSet sets none.
const defaultRevisionHistoryLimit = 10

// Decide computes what to do for the DaemonSet of s. See the package comment for its
// promises; each stage's rules are documented where they are implemented: decideClaim
// (ownership, below), history.go (revisions), placement.go, update.go and conclude.go.
func Decide(s *Snapshot) Plan {
	p, _ := decide(s)
	return p
}

// DecideWith is Decide for a caller that keeps a Memo per DaemonSet: it passes the
// one the previous call returned (nil at first) and keeps the one it gets back (nil
// when the DaemonSet is not memoable).
func DecideWith(s *Snapshot, m *Memo) (Plan, *Memo) {
	if m != nil {
		if p, ok := m.decide(s); ok {
			return p, m
		}
	}
	p, d := decide(s)
	return p, newMemo(s, &p, d)
}

// DecideFromMemo is DecideWith for a caller whose snapshot names what changed since
// m's (s.Changes.From == m.At()): it decides from m and the changes alone and never
// reads s.Nodes or s.Pods, which the caller may leave out. When it reports false,
// only the full decision can be trusted: the caller drops m, reads the whole
// snapshot and calls DecideWith with no memo.
func DecideFromMemo(s *Snapshot, m *Memo) (Plan, bool) {
	if m == nil || s.Changes == nil || s.Changes.From != m.at {
		return Plan{}, false
	}
	return m.decide(s)
}

// DecideUpdate is Decide for companion mode: the update stage alone, over the pods and
// revisions another controller placed and recorded. Its Plan holds only pod deletes,
// revision marks, a rollback, the rollout's conditions (in Conditions, never in
// Status) and events; it never creates a pod or a revision, adopts or releases
// anything, or counts pods into the status.
func DecideUpdate(s *Snapshot) Plan {
	p, _ := decideUpdate(s)
	return p
}

// decision is what the stages of one decision worked out, for Explain and the Memo.
type decision struct {
	placement *Placement
	update    *updater // nil when the update stage did not run
	selector  labels.Selector
	memoable  bool // no policy, no duplicate revisions: the rules are per node
	// settled: no write is in flight and placement planned none (in companion mode:
	// none of everynode's writes is in flight), so an update was assessed.
	settled bool
}

// decide is Decide, also returning what the stages worked out (nil when they did not
// get that far).
func decide(s *Snapshot) (Plan, *decision) {
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

	// Ownership and history.
	claimed := claimPods(s, selector, &p)
	controlled, nameTaken := claimRevisions(s, selector, &p)
	hp := decideHistory(ds, patch, controlled, nameTaken)
	if hp.collided {
		p.LabelRevisions = hp.label
		p.Status = collided(ds)
		return p, nil
	}
	hp.record(claimed, &p)

	// Placement.
	pol := policyOf(s, false)
	pl := newPlacement(s, eligibilityOf(s), p.Hash, hp.dupHashs, claimed, allowsSurge(ds))
	d := &decision{placement: pl, selector: selector, memoable: !pol.Set && len(hp.dupHashs) == 0}
	// The Plan takes copies: the update stage adds to them, and the Placement stays
	// as placement left it.
	p.Creates, p.Deletes = slices.Clone(pl.creates), slices.Clone(pl.deletes)
	p.Events, p.FailedPodNodes = append(p.Events, pl.events...), slices.Clone(pl.failedPodNodes)

	// Update: joining nodes and surge pairs at every sync; the rollout itself once
	// placement is settled and every earlier write has been seen, so its budget is
	// computed from a settled state.
	var cond *apps.DaemonSetCondition
	concluded := false
	if drivesUpdate(ds, &pol) {
		d.update = newUpdater(pl, &pol, revisions{current: hp.current, old: hp.old, unsaved: hp.create}, s.InPlaceRefused)
		d.update.joiningNodes(claimed, &p)
		d.update.retireSurged(&p)
	}
	d.settled = len(p.Creates) == 0 && len(p.Deletes) == 0 && s.InFlight.Empty()
	if d.settled && d.update != nil {
		cond, concluded = d.update.update(pl.counts, &p)
	}
	finishPodChanges(s, &p, nil)

	// Status and history's tail.
	p.PruneRevisions = hp.prune(ds, claimed)
	p.Status = nextStatus(ds, pl.counts, s.InFlight.Empty(), ds.Status.CollisionCount)
	if concluded {
		p.Status = statusWithConditions(ds, p.Status, cond, &p)
	}
	p.RequeueAfter = d.requeueAfter()
	p.Waiting = d.waitCounts()
	p.Unavailable = pl.unavailable()
	return p, d
}

// decideUpdate is DecideUpdate, also returning what the update stage worked out (nil
// when it has nothing to look at).
func decideUpdate(s *Snapshot) (Plan, *decision) {
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
	// The other controller's placement, as the placement rules see it: what they
	// would do is that controller's to do, and is left out of the Plan.
	pl := arrange(s, eligibilityOf(s), p.Hash, nil, owned)
	pl.markShutdowns()
	pol := policyOf(s, true)
	d := &decision{placement: pl, selector: selector}
	d.update = newUpdater(pl, &pol, revs, s.InPlaceRefused)
	// The update moves once its own deletes are seen. The other controller's
	// placement need not be settled: a node whose pod is missing or not yet available
	// counts against the budget like any other unavailable node.
	d.settled = s.InFlight.Empty()
	if d.settled {
		if cond, ran := d.update.update(pl.counts, &p); ran && cond != nil {
			p.Conditions = conditionsChange(ds, cond, &p)
		}
	}
	finishPodChanges(s, &p, nil)
	p.RequeueAfter = d.requeueAfter()
	p.Waiting = d.waitCounts()
	p.Unavailable = pl.unavailable()
	return p, d
}

// policyOf is the DaemonSet's rollout policy, with the problems of annotations that
// cannot work with its update strategy (or in companion mode).
func policyOf(s *Snapshot, companion bool) Policy {
	var pol Policy
	if s.Policy != nil {
		pol = *s.Policy
		pol.Problems = slices.Clone(pol.Problems) // the snapshot's stay as they are
	} else {
		pol = ParsePolicy(s.DaemonSet.Annotations)
	}
	pol.checkStrategy(s.DaemonSet, companion)
	return pol
}

// PolicyOf is ds's rollout policy as Explain reports it, for a tool that shows a
// DaemonSet without deciding it: its annotations parsed, with the problems of those
// that cannot work with its update strategy.
func PolicyOf(ds *apps.DaemonSet) Policy {
	return policyOf(&Snapshot{DaemonSet: ds}, CompanionManages(ds))
}

// eligibilityOf is the snapshot's parsed placement rules, or the template's parsed
// now.
func eligibilityOf(s *Snapshot) *Eligibility {
	if s.Eligibility != nil {
		return s.Eligibility
	}
	return NewEligibility(&s.DaemonSet.Spec.Template.Spec)
}

// waitCounts counts the nodes that wait, by reason; nil when none does.
func (d *decision) waitCounts() map[Reason]int {
	if d.update != nil {
		return d.update.waitCounts()
	}
	var out map[Reason]int
	for i := range d.placement.nodes {
		if wait, _ := d.waitOf(i); wait != "" {
			if out == nil {
				out = map[Reason]int{}
			}
			out[wait]++
		}
	}
	return out
}

// requeueAfter is how soon the stages want another look: a failed pod's back-off
// ends, a Ready pod becomes available, a bake or a pause ends, a deadline runs out.
func (d *decision) requeueAfter() time.Duration {
	next := d.placement.recheck
	next.within(time.Duration(d.placement.countRecheck))
	if d.update != nil {
		next.within(time.Duration(d.update.recheck))
	}
	return time.Duration(next)
}

// waitOf is what the i-th node of the placement waits for, and until when.
func (d *decision) waitOf(i int) (Reason, time.Time) {
	if d.update != nil {
		return d.update.nodes[i].wait, d.update.nodes[i].waitUntil
	}
	n := d.placement.nodes[i]
	switch {
	case n.shuttingDown:
		return ReasonNodeShuttingDown, time.Time{}
	case !n.backoffUntil.IsZero():
		return ReasonFailedPodBackoff, n.backoffUntil
	}
	return "", time.Time{}
}

// finishPodChanges orders the pod changes deterministically, applies the per-sync
// caps, and attaches the template new pods are made from: made, when the caller
// made it before, else a new one.
func finishPodChanges(s *Snapshot, p *Plan, made *v1.PodTemplateSpec) {
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
		if made == nil {
			made = PodTemplate(s.DaemonSet, p.Hash)
		}
		p.Template = made
	}
}

func invalid(p Plan, msg string) Plan {
	p.Events = append(p.Events, Event{Type: v1.EventTypeWarning, Reason: EventInvalidSpec, Message: msg})
	return p
}

// claim is the ownership verdict for one object.
type claim int

const (
	claimIgnore  claim = iota // not ours and not to be ours
	claimOwned                // ours, and it matches
	claimAdopt                // an orphan that matches: to be adopted
	claimRelease              // ours, but it no longer matches: to be released
)

// decideClaim applies the ControllerRef rules to one object for the controller with
// the given UID and selector:
//   - controlled by another controller: ignored;
//   - controlled by us and matching: ours;
//   - controlled by us and not matching: released, even while it is being deleted;
//   - an orphan that matches and is not being deleted: adopted;
//   - any other orphan: ignored.
//
// The controller itself being deleted is not considered here: Decide claims nothing
// for a DaemonSet that is being deleted.
func decideClaim(obj metav1.Object, owner types.UID, selector labels.Selector) claim {
	matches := selector.Matches(labels.Set(obj.GetLabels()))
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		switch {
		case ref.UID != owner:
			return claimIgnore
		case matches:
			return claimOwned
		default:
			return claimRelease
		}
	}
	if !matches || obj.GetDeletionTimestamp() != nil {
		return claimIgnore
	}
	return claimAdopt
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
