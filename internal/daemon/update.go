package daemon

import (
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The update stage: which pods of older revisions go, when, and what each node that
// keeps one waits for. It reads a Placement — made by the placement stage in full
// mode (Decide), or of the pods another controller placed in companion mode
// (DecideUpdate) — and never changes it. It writes into the Plan only pod deletes,
// creates beside old pods while surging, in-place updates, revision marks, a rollback,
// events and the Progressing condition. Its steps, in order:
//
//  1. joining nodes (new-nodes: stable): a node that joins mid-rollout gets the
//     stable revision's template, unless the rollout would update it now;
//  2. surge pairs: a node holding an old and a new pod loses the old one once the new
//     one is healthy, or at once when the old one is not Ready;
//
// then, once placement plans nothing and no write is in flight (settled):
//
//  3. the budget: maxUnavailable and maxSurge, or an OnDelete DaemonSet's
//     max-unavailable annotation;
//  4. the holds of the rollout policy (holds.go), each a rule with a name and a
//     reason: an invalid annotation, a failure (failure.go), a pause, the canary,
//     the partition, the waves and the pause between them;
//  5. replace (replace.go): old pods replaced within the budget — deleted, surged
//     beside, updated in place (inplace.go), or deleted first where a host port
//     blocks the surge (hostport.go);
//  6. conclude (conclude.go): revision marks, a rollback, the Progressing condition.

// revisions are the DaemonSet's revisions as the update stage sees them.
type revisions struct {
	current *apps.ControllerRevision   // the current template's revision
	old     []*apps.ControllerRevision // every other revision, oldest first
	unsaved bool                       // current is created by this Plan: nothing to mark yet
}

// unode is a node as the update stage sees it: the placement's node, and what it
// waits for.
type unode struct {
	*nodeState
	// wait is what the node waits for, when something does not happen on it yet;
	// waitUntil, when that ends by itself. It starts as placement left it: the
	// back-off of a failed pod, if one is held there.
	wait      Reason
	waitUntil time.Time
	// sick, under sick-nodes: exempt, is what makes the node sick (sicknodes.go):
	// the update leaves it alone. "" for a node that is not, or counts anyway.
	sick Reason
}

// updater is the update stage at work on one decision.
type updater struct {
	pl    *Placement // read-only
	pol   *Policy
	revs  revisions
	nodes []unode // pl.nodes, in the same order
	// minHealthy is the rollout's healthy-time bake (failure.go); zero for none.
	minHealthy time.Duration
	// inPlace, when set, lets the update change old pods in place (inplace.go).
	inPlace        *inPlace
	inPlaceRefused map[types.UID]bool // Snapshot.InPlaceRefused
	records        map[types.UID]decodedRecord
	// portBlocked are the nodes whose surge pods wait for host ports their old pods
	// hold (hostport.go).
	portBlocked []portBlock
	// picked holds podsOnNode's latest answer.
	picked  [2]podAvail
	recheck recheck
}

func newUpdater(pl *Placement, pol *Policy, revs revisions, refused map[types.UID]bool) *updater {
	u := &updater{pl: pl, pol: pol, revs: revs, minHealthy: pol.MinHealthy, inPlaceRefused: refused}
	u.nodes = make([]unode, len(pl.nodes))
	for i, n := range pl.nodes {
		u.nodes[i].nodeState = n
		switch {
		case n.shuttingDown:
			u.nodes[i].wait = ReasonNodeShuttingDown
		case !n.backoffUntil.IsZero():
			u.nodes[i].wait, u.nodes[i].waitUntil = ReasonFailedPodBackoff, n.backoffUntil
		}
	}
	u.markSick()
	return u
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

// CompanionManages reports whether companion mode acts on ds: an OnDelete DaemonSet
// with the max-unavailable annotation (valid or not: an invalid value is reported on
// it). Every other DaemonSet is left alone.
func CompanionManages(ds *apps.DaemonSet) bool {
	_, ok := ds.Annotations[AnnotationMaxUnavailable]
	return ok && ds.Spec.UpdateStrategy.Type == apps.OnDeleteDaemonSetStrategyType
}

// joiningNodes is step 1: under new-nodes: stable, the creates placement planned
// (one per node, in node order) take the stable template unless the rollout's gate
// would update their node now. A node the rollout may update gets the current
// template: it may be the very node whose old pod the rollout just deleted.
func (u *updater) joiningNodes(claimed []*v1.Pod, p *Plan) {
	if !u.pol.StableNewNodes || len(p.Creates) == 0 {
		return
	}
	stable := stableTemplate(u.pl.ds, u.revs.old, claimed, u.pl.updated)
	if stable == nil {
		return
	}
	g := u.newNodeGate()
	j := 0
	for i := range u.nodes {
		if j == len(p.Creates) {
			break
		}
		n := &u.nodes[i]
		if p.Creates[j].Node != n.name {
			continue
		}
		if g.admits(n) != "" || !g.take() {
			p.Creates[j].Template = stable
		}
		j++
	}
}

// retireSurged is step 2: a surging node's old pod goes as soon as it is not Ready
// or the new pod beside it is healthy.
func (u *updater) retireSurged(p *Plan) {
	if !u.pl.surge {
		return // no node holds a pair
	}
	for _, n := range u.pl.nodes {
		if n.surgeOld != nil && (!IsReady(n.surgeOld) || u.healthy(n.surgeNew)) {
			p.Deletes = append(p.Deletes, PodDelete{Pod: n.surgeOld, Reason: ReasonSurgeDone})
		}
	}
}

// update runs steps 3 to 6 on a settled sync. It returns the Progressing condition
// (nil when the DaemonSet has no rollout annotations) and false when the budget could
// not be computed, which is reported as an event instead.
func (u *updater) update(c counts, p *Plan) (*apps.DaemonSetCondition, bool) {
	ds := u.pl.ds
	desired := int(c.desired)
	b, err := updateBudget(ds, u.pol, desired)
	if err != nil {
		*p = invalid(*p, err.Error())
		return nil, false
	}
	if u.pol.InPlace {
		u.inPlace = newInPlace(u.revs.old, u.inPlaceRefused)
	}
	r := u.assess(rolloutSince(ds, u.pl.now), desired)
	r.unsaved = u.revs.unsaved
	u.rollOut(desired, b, r.gate, p)
	if len(u.portBlocked) > 0 && !u.pol.Set {
		// No Progressing condition to say it in: a Warning event does.
		p.Events = append(p.Events, Event{Type: v1.EventTypeWarning, Reason: string(ReasonSurgeHostPort),
			Message: hostPortMessage(u.portBlocked, u.revs.current.Revision, false)})
	}
	cond := r.conclude(u, c, p)
	u.recheck.within(r.recheck)
	if !r.gate.holdUntil.IsZero() {
		u.recheck.within(r.gate.holdUntil.Sub(u.pl.now))
	}
	return cond, true
}

// budget is how far an update may go at once.
type budget struct {
	maxSurge       int // nodes that may run an old and a new pod together
	maxUnavailable int // pods that may be unavailable
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

// rollingBudget scales maxSurge and maxUnavailable against the number of nodes that
// should run the pod, rounding percentages up. When both come to zero on a non-empty
// DaemonSet, one pod may be unavailable so the update can progress.
func rollingBudget(ds *apps.DaemonSet, desired int) (budget, error) {
	if ds.Spec.UpdateStrategy.Type != apps.RollingUpdateDaemonSetStrategyType {
		return budget{}, nil
	}
	var b budget
	if r := ds.Spec.UpdateStrategy.RollingUpdate; r != nil {
		var err error
		if b.maxSurge, err = scaled(r.MaxSurge, desired); err != nil {
			return budget{}, fmt.Errorf("invalid maxSurge: %w", err)
		}
		if b.maxUnavailable, err = scaled(r.MaxUnavailable, desired); err != nil {
			return budget{}, fmt.Errorf("invalid maxUnavailable: %w", err)
		}
	}
	if desired > 0 && b.maxSurge == 0 && b.maxUnavailable == 0 {
		b.maxUnavailable = 1
	}
	return b, nil
}

func scaled(v *intstr.IntOrString, total int) (int, error) {
	if v == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(v, total, true)
}

// allowsSurge reports whether ds may run two pods on a node during an update.
func allowsSurge(ds *apps.DaemonSet) bool {
	b, err := rollingBudget(ds, 1)
	return err == nil && b.maxSurge > 0
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

// waitCounts counts the nodes that wait, by reason; nil when none does.
func (u *updater) waitCounts() map[Reason]int {
	var out map[Reason]int
	for i := range u.nodes {
		if w := u.nodes[i].wait; w != "" {
			if out == nil {
				out = map[Reason]int{}
			}
			out[w]++
		}
	}
	return out
}

// checkInPlace adds the Problem of an in-place annotation that cannot work: beside
// maxSurge (an in-place update has no second pod to surge with), or in companion
// mode, where everynode only deletes pods.
func (p *Policy) checkInPlace(ds *apps.DaemonSet, companion bool) {
	if !p.InPlace {
		return
	}
	if companion {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s cannot work in companion mode, where everynode only deletes pods; remove it", AnnotationInPlace))
		return
	}
	if allowsSurge(ds) {
		p.Problems = append(p.Problems, fmt.Sprintf("annotation %s needs maxSurge 0: a pod updated in place is itself unavailable while it restarts; set spec.updateStrategy.rollingUpdate.maxSurge to 0 and maxUnavailable to the budget",
			AnnotationInPlace))
	}
}
