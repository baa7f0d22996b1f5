package daemon

import (
	"maps"
	"slices"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The holds of the rollout policy: what the rollout annotations let an update touch
// in one sync. Each hold is a small rule with a name; assess applies them in order
// to an open gate, and the budget still bounds whatever the gate admits.

// gate is what the holds let an update touch in one sync.
type gate struct {
	// hold, when set, holds every node: an invalid annotation, a failure, a pause, or
	// the pause between waves (until holdUntil).
	hold      Reason
	holdUntil time.Time
	canary    labels.Selector // nil: every node
	waveKey   string
	wave      string // the wave being updated, when waving
	waving    bool
	// updatable is how many more nodes the partition lets leave the old revision;
	// negative when there is no partition.
	updatable int
	// deleteFirst: surge-fallback delete-first (see hostport.go).
	deleteFirst bool
}

// openGate admits every node: upstream's RollingUpdate.
func openGate() *gate { return &gate{updatable: -1} }

// admits returns why node n may not be updated now, or "" if it may. A node that no
// longer exists has no labels.
func (g *gate) admits(n *unode) Reason {
	var nodeLabels labels.Set
	if n.node != nil {
		nodeLabels = n.node.Labels
	}
	switch {
	case g.hold != "":
		return g.hold
	case g.canary != nil && !g.canary.Matches(nodeLabels):
		return ReasonCanaryHeld
	case g.waving && nodeLabels[g.waveKey] != g.wave:
		return ReasonLaterWave
	}
	return ""
}

// take spends one node of the partition's allowance; false when none is left.
func (g *gate) take() bool {
	if g.updatable < 0 {
		return true
	}
	if g.updatable == 0 {
		return false
	}
	g.updatable--
	return true
}

// rollout is the rollout policy applied to one settled sync of an update.
type rollout struct {
	current *apps.ControllerRevision // the current template's revision
	unsaved bool                     // current is created by this Plan: nothing to mark yet
	gate    *gate
	desired int
	// oldNodes counts the nodes that should run the pod and run only an older one.
	oldNodes int
	// waiting: a pod of the current revision is not available yet, or a node's
	// new pod is not there yet.
	waiting bool
	// failed says why the current revision's rollout failed ("" if it has not);
	// fresh when that was found in this sync.
	failed  Reason
	failMsg string
	fresh   bool
	// recheck is when the progress deadline of a waiting pod runs out.
	recheck time.Duration
	// restoring: current is a revision a rollback restored, not yet available
	// everywhere since (restore in conclude.go).
	restoring bool
	restored  restoreMark
	// sick of sickOf nodes are sick, when that holds the rollout (sicknodes.go).
	sick, sickOf int
	// sickOld counts the sick nodes left alone with a pod of an older revision,
	// whether or not a new pod could be placed there now (a NotReady node's taint
	// keeps new pods off it): the rollout is not complete until they recover.
	sickOld int
}

// A hold is one rule of the rollout policy, applied to the gate in its turn.
type hold struct {
	name  string
	apply func(u *updater, r *rollout, since time.Time)
}

// holds are the rules in the order they apply: a rule that holds every node does so
// only when no earlier one did, so the gate names the first.
var holds = [...]hold{
	{"invalid-annotation", holdInvalid},
	{"failure", holdFailure},
	{"paused", holdPaused},
	{"sick-nodes", holdSickNodes},
	{"canary", holdCanary},
	{"partition", holdPartition},
	{"waves", holdWaves},
}

// assess applies the holds to the current revision's rollout. since is when the
// rollout last started moving (a hold ended or a new revision began): the progress
// deadline counts from no earlier than that.
func (u *updater) assess(since time.Time, desired int) *rollout {
	r := &rollout{current: u.revs.current, gate: openGate(), desired: desired}
	if !u.pol.Set {
		return r
	}
	for i := range u.nodes {
		n := &u.nodes[i]
		if n.node != nil && n.sick != "" {
			if cur, old, ok := u.podsOnNode(n); ok && cur == nil && old != nil {
				r.sickOld++
			}
		}
		if n.node == nil || !n.verdict.Run {
			continue
		}
		cur, old, ok := u.podsOnNode(n)
		if ok && cur == nil && old != nil {
			r.oldNodes++
		}
		if cur != nil && !cur.healthy && n.sick == "" {
			r.waiting = true
		}
		if ok && cur == nil && old == nil && n.sick == "" && !n.shuttingDown {
			// Its old pod is going or gone and the new one is not there yet: the
			// update is under way on it, whatever holds the other nodes.
			r.waiting = true
		}
	}
	r.gate.deleteFirst = u.pol.SurgeDeleteFirst
	for _, h := range holds {
		h.apply(u, r, since)
	}
	return r
}

// holdInvalid: an annotation that does not parse or cannot apply holds everything.
func holdInvalid(u *updater, r *rollout, _ time.Time) {
	if len(u.pol.Problems) > 0 {
		r.gate.hold = ReasonInvalidAnnotation
	}
}

// holdFailure: a failed revision holds everything (failure.go says when one fails).
func holdFailure(u *updater, r *rollout, since time.Time) {
	r.restored, r.restoring = restoring(r.current)
	if reason, msg, ok := failedMark(r.current); ok {
		r.failed, r.failMsg = reason, msg
	} else if u.pol.watchesProgress() && !r.released() {
		// Once available everywhere, a revision is released: a pod that restarts or
		// goes unavailable later is an operational matter, not a failed rollout.
		r.failed, r.failMsg, r.recheck = u.failure(since)
		r.fresh = r.failed != ""
	}
	if r.failed != "" && r.gate.hold == "" {
		r.gate.hold = r.failed
	}
}

// holdPaused: rollout.everynode.dev/paused holds everything.
func holdPaused(u *updater, r *rollout, _ time.Time) {
	if u.pol.Paused && r.gate.hold == "" {
		r.gate.hold = ReasonPaused
	}
}

// holdCanary: only the nodes the canary selector matches may be updated.
func holdCanary(u *updater, r *rollout, _ time.Time) { r.gate.canary = u.pol.Canary }

// holdPartition: the partition keeps that many nodes on older revisions.
func holdPartition(u *updater, r *rollout, _ time.Time) {
	if u.pol.Partition != nil {
		keep, _ := scaled(u.pol.Partition, r.desired)
		r.gate.updatable = max(0, r.oldNodes-keep)
	}
}

// holdWaves points the gate at the first wave not yet done (among the canary nodes,
// under a canary), holding everything while the previous wave bakes for the wave
// pause.
func holdWaves(u *updater, r *rollout, _ time.Time) {
	pol, g := u.pol, r.gate
	if pol.WaveKey == "" {
		return
	}
	var lastDone time.Time
	for i, w := range u.waves(pol.WaveKey, pol.WaveOrder, g.canary) {
		done, at := u.waveDone(w)
		if done {
			if at.After(lastDone) {
				lastDone = at
			}
			continue
		}
		g.waveKey, g.wave, g.waving = pol.WaveKey, w.value, true
		if until := lastDone.Add(pol.WavePause); i > 0 && pol.WavePause > 0 && u.pl.now.Before(until) && g.hold == "" {
			g.hold, g.holdUntil = ReasonWavePause, until
		}
		return
	}
}

// released reports whether the current revision was available on every node since
// it last began rolling out.
func (r *rollout) released() bool {
	_, ok := r.current.Annotations[MarkAvailable]
	return ok && !r.restoring
}

// wave is one value of the waves label and the nodes that carry it.
type wave struct {
	value string
	nodes []*unode
}

// waves groups the nodes that should run the pod (and, under a canary, match it) by
// the value of label key, in OrderWaves order.
func (u *updater) waves(key string, order []string, canary labels.Selector) []wave {
	byValue := map[string][]*unode{}
	for i := range u.nodes {
		n := &u.nodes[i]
		if n.node == nil || !n.verdict.Run || (canary != nil && !canary.Matches(labels.Set(n.node.Labels))) {
			continue
		}
		val := n.node.Labels[key]
		byValue[val] = append(byValue[val], n)
	}
	var out []wave
	for _, val := range OrderWaves(slices.Collect(maps.Keys(byValue)), order) {
		out = append(out, wave{val, byValue[val]})
	}
	return out
}

// OrderWaves sorts wave label values in the order a rollout takes them: those named
// in order (wave-order) first, in that order, then the others sorted, then "" (the
// nodes without the label).
func OrderWaves(values, order []string) []string {
	rank := func(val string) (int, string) {
		if i := slices.Index(order, val); i >= 0 {
			return i, ""
		}
		if val == "" {
			return len(order) + 1, ""
		}
		return len(order), val
	}
	out := slices.Clone(values)
	slices.SortFunc(out, func(a, b string) int {
		ra, ka := rank(a)
		rb, kb := rank(b)
		if ra != rb {
			return ra - rb
		}
		return strings.Compare(ka, kb)
	})
	return out
}

// waveDone reports whether every node of w runs a healthy pod of the current
// revision and nothing older, and when the last of them became available.
func (u *updater) waveDone(w wave) (bool, time.Time) {
	var last time.Time
	for _, n := range w.nodes {
		if n.sick != "" {
			continue // it waits for itself, not for the wave
		}
		cur, old, ok := u.podsOnNode(n)
		if !ok || old != nil || cur == nil || !cur.healthy {
			return false, time.Time{}
		}
		if at, ok := u.availableSince(cur.pod); ok && at.After(last) {
			last = at
		}
	}
	return true, last
}

// newNodeGate is the gate a node without a pod meets under new-nodes: stable: it gets
// the stable revision unless this gate admits it. The rollout's own gate is assessed
// the same way, except that here nodes without a live pod count against the
// partition as old ones: a node whose old pod the rollout deleted keeps the allowance
// it was updated under, and a node that joins gets the stable revision only when the
// partition would otherwise keep fewer nodes on older revisions than it asks.
func (u *updater) newNodeGate() *gate {
	desired, podless := 0, 0
	for i := range u.nodes {
		n := &u.nodes[i]
		if n.node == nil || !n.verdict.Run {
			continue
		}
		desired++
		if cur, old, ok := u.podsOnNode(n); ok && cur == nil && old == nil {
			podless++
		}
	}
	r := u.assess(rolloutSince(u.pl.ds, u.pl.now), desired)
	if u.pol.Partition != nil {
		keep, _ := scaled(u.pol.Partition, desired)
		r.gate.updatable = max(0, r.oldNodes+podless-keep)
	}
	return r.gate
}

// stableTemplate is the template a node that joins mid-rollout gets under
// new-nodes: stable: that of the newest older revision some pod still runs. It is nil
// when no pod runs an older revision, or its revision cannot be read.
func stableTemplate(ds *apps.DaemonSet, old []*apps.ControllerRevision, claimed []*v1.Pod, isCurrent func(*v1.Pod) bool) *v1.PodTemplateSpec {
	running := map[string]bool{}
	for _, pod := range claimed {
		if !isCurrent(pod) && pod.DeletionTimestamp == nil && !isTerminal(pod) {
			running[pod.Labels[HashLabel]] = true
		}
	}
	for i := len(old) - 1; i >= 0; i-- {
		hash := old[i].Labels[HashLabel]
		if !running[hash] {
			continue
		}
		t, err := revisionTemplate(old[i])
		if err != nil {
			return nil
		}
		return podTemplate(t, ds.Annotations, hash, false)
	}
	return nil
}
