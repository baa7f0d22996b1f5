package daemon

import (
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Reasons the rollout gives for not updating a node yet. The same words appear in the
// Progressing condition and in `everynode explain`.
const (
	ReasonBudgetFull        Reason = "BudgetFull"          // maxUnavailable or maxSurge is used up
	ReasonNewPodUnavailable Reason = "NewPodNotAvailable"  // the node's new pod is not available yet
	ReasonNewPodBaking      Reason = "NewPodBaking"        // the node's new pod has not been healthy for min-healthy yet
	ReasonPaused            Reason = "Paused"              // rollout.everynode.dev/paused
	ReasonPartitionHeld     Reason = "PartitionHeld"       // rollout.everynode.dev/partition
	ReasonCanaryHeld        Reason = "WaitingForPromotion" // rollout.everynode.dev/canary
	ReasonLaterWave         Reason = "LaterWave"           // another wave is updating first
	ReasonWavePause         Reason = "WaitingForWave"      // bake time between waves
	ReasonInvalidAnnotation Reason = "InvalidAnnotation"   // a rollout annotation does not parse
	ReasonFailedPodBackoff  Reason = "FailedPodBackoff"    // the node's failed pod is backing off
)

// gate is what the rollout policy lets a RollingUpdate touch in one sync. The budget
// (maxUnavailable, maxSurge) still bounds whatever the gate admits.
type gate struct {
	// hold, when set, holds every node: paused, failed, invalid annotation or a
	// pause between waves (until holdUntil).
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
func (g *gate) admits(n *nodeState) Reason {
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

// wave is one value of the waves label and the nodes that carry it.
type wave struct {
	value string
	nodes []*nodeState
}

// waves groups the nodes that should run the pod (and, under a canary, match it) by
// the value of label key, in OrderWaves order.
func (v *view) waves(key string, order []string, canary labels.Selector) []wave {
	byValue := map[string][]*nodeState{}
	for _, n := range v.nodes {
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

// waveDone reports whether every node of w runs an available pod of the current
// revision and nothing older, and when the last of them became available.
func (v *view) waveDone(w wave) (bool, time.Time) {
	var last time.Time
	for _, n := range w.nodes {
		cur, old, ok := v.podsOnNode(n)
		if !ok || old != nil || cur == nil || !cur.healthy {
			return false, time.Time{}
		}
		if at, ok := v.availableSince(cur.pod); ok && at.After(last) {
			last = at
		}
	}
	return true, last
}

// availableSince is when an available pod became available.
func (v *view) availableSince(pod *v1.Pod) (time.Time, bool) {
	c := readyCondition(pod)
	if c == nil || c.LastTransitionTime.IsZero() {
		return time.Time{}, false
	}
	return availableAt(c, v.ds.Spec.MinReadySeconds), true
}

// setWaves points the gate at the first wave not yet done (among the canary nodes,
// under a canary), holding everything while
// the previous wave bakes for the wave pause.
func (v *view) setWaves(g *gate, pol *Policy) {
	if pol.WaveKey == "" {
		return
	}
	var lastDone time.Time
	for i, w := range v.waves(pol.WaveKey, pol.WaveOrder, g.canary) {
		done, at := v.waveDone(w)
		if done {
			if at.After(lastDone) {
				lastDone = at
			}
			continue
		}
		g.waveKey, g.wave, g.waving = pol.WaveKey, w.value, true
		if until := lastDone.Add(pol.WavePause); i > 0 && pol.WavePause > 0 && v.now.Before(until) && g.hold == "" {
			g.hold, g.holdUntil = ReasonWavePause, until
		}
		return
	}
}
