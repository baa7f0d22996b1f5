package daemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// budget is how far a rolling update may go at once.
type budget struct {
	maxSurge       int // nodes that may run an old and a new pod together
	maxUnavailable int // pods that may be unavailable
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

// podsOnNode picks the node's one current-revision pod and one older pod, ignoring
// terminating ones. ok is false when there are more than one of either: the placement
// rules must prune the node before the update touches it. The answers point into the
// node's state, so a node asked again yields the same values at the same addresses.
func (v *view) podsOnNode(n *nodeState) (cur, old *podAvail, ok bool) {
	for _, pod := range n.pods {
		if v.deleting(pod) {
			continue
		}
		if v.updated(pod) {
			if cur != nil {
				return nil, nil, false
			}
			cur = &n.picked[0]
			*cur = podAvail{pod: pod, available: v.available(pod) && !v.inPlacePending(pod), healthy: v.healthy(pod)}
		} else {
			if old != nil {
				return nil, nil, false
			}
			old = &n.picked[1]
			*old = podAvail{pod: pod, available: v.available(pod)}
		}
	}
	return cur, old, true
}

// rollOut plans the next step of a RollingUpdate: which old pods to delete (or, when
// surging, beside which to create a new pod) without exceeding the budget, among the
// nodes the gate admits. Candidates are taken in node-name order, so the same state
// always updates the same nodes. Nodes left waiting are told why.
func (v *view) rollOut(desired int, b budget, g *gate, p *Plan) {
	if b.maxSurge == 0 {
		v.rollOutReplacing(b.maxUnavailable, g, p)
		return
	}
	v.rollOutSurging(desired, b.maxSurge, g, p)
}

// rollOutReplacing deletes old pods so that new ones take their place, keeping the
// unavailable pods (missing, unavailable new, or being replaced) within maxUnavailable.
// Old pods that are unavailable anyway are replaced at once, if the gate admits them.
func (v *view) rollOutReplacing(maxUnavailable int, g *gate, p *Plan) {
	unavailable := 0
	var candidates, broken []*nodeState
	for _, n := range v.nodes {
		if len(n.pods) == 0 && !n.verdict.Run {
			continue
		}
		cur, old, ok := v.podsOnNode(n)
		switch {
		case !ok, cur == nil && old == nil, cur != nil && old != nil:
			unavailable++
		case cur != nil:
			if !cur.healthy {
				unavailable++
				v.waitForNewPod(n, cur, p)
			}
		case !old.available:
			unavailable++
			broken = append(broken, n)
		default:
			if n.wait = g.admits(n); n.wait == "" {
				candidates = append(candidates, n)
			}
		}
	}
	v.updateInOrder(broken, candidates, max(maxUnavailable-unavailable, 0), g, func(n *nodeState) {
		_, old, _ := v.podsOnNode(n)
		v.replaceOld(old.pod, p)
	})
}

// updateInOrder updates the broken nodes (old pod unavailable anyway) the gate
// admits, then as many candidates as the budget has room for, both in node-name
// order: the partition may admit only some. Nodes left out are told why they wait.
func (v *view) updateInOrder(broken, candidates []*nodeState, room int, g *gate, update func(*nodeState)) {
	for _, n := range byName(broken) {
		if v.admit(n, g) {
			update(n)
		}
	}
	for _, n := range byName(candidates) {
		if room == 0 {
			n.wait = budgetOrPartition(g)
			continue
		}
		if v.admit(n, g) {
			update(n)
			room--
		}
	}
}

// budgetOrPartition is why a node the budget has no room for waits: the partition,
// when it would hold the node anyway.
func budgetOrPartition(g *gate) Reason {
	if !g.take() {
		return ReasonPartitionHeld
	}
	return ReasonBudgetFull
}

// admit asks the gate, then the partition, whether node n may be updated now; if not,
// the node is told why.
func (v *view) admit(n *nodeState, g *gate) bool {
	if n.wait = g.admits(n); n.wait != "" {
		return false
	}
	if !g.take() {
		n.wait = ReasonPartitionHeld
		return false
	}
	return true
}

// rollOutSurging creates a new pod beside old ones, at most maxSurge nodes at a time,
// and deletes each old pod once the new one beside it is available. An old pod that
// is unavailable anyway gets its replacement at once, if the gate admits it. Old pods
// on nodes that should no longer run the DaemonSet are deleted only while more pods
// are available than desired. Pods on nodes that no longer exist are the pod garbage
// collector's: they are neither replaced nor counted as available.
func (v *view) rollOutSurging(desired, maxSurge int, g *gate, p *Plan) {
	surging, available, replacing := 0, 0, 0
	var candidates, leaving, broken, blocked []*nodeState
	for _, n := range v.nodes {
		if len(n.pods) == 0 || n.node == nil {
			continue
		}
		cur, old, ok := v.podsOnNode(n)
		if !ok {
			surging++
			continue
		}
		if old != nil {
			if old.available {
				available++
			}
		} else if cur != nil && cur.available {
			available++
		}
		switch {
		case old == nil:
			if cur != nil && !cur.healthy {
				replacing++
				v.waitForNewPod(n, cur, p)
			}
		case cur == nil && !old.available:
			if !n.verdict.Run {
				p.Deletes = append(p.Deletes, PodDelete{Pod: old.pod, Reason: n.verdict.Reason})
				continue
			}
			broken = append(broken, n)
		case cur == nil:
			if !n.verdict.Run {
				leaving = append(leaving, n)
				continue
			}
			if n.wait = g.admits(n); n.wait == "" {
				candidates = append(candidates, n)
			}
		case !cur.healthy:
			surging++
			if ports := hostPortsBlocked(cur.pod, old.pod); ports != nil {
				v.portBlocked = append(v.portBlocked, portBlock{node: n.name, ports: ports})
				blocked = append(blocked, n)
				n.wait = ReasonSurgeHostPort
				continue
			}
			v.waitForNewPod(n, cur, p)
		default:
			p.Deletes = append(p.Deletes, PodDelete{Pod: old.pod, Reason: ReasonSurgeDone})
		}
	}
	if spare := available - desired; spare > 0 {
		for _, n := range byName(leaving)[:min(spare, len(leaving))] {
			_, old, _ := v.podsOnNode(n)
			p.Deletes = append(p.Deletes, PodDelete{Pod: old.pod, Reason: n.verdict.Reason})
		}
	}
	v.updateInOrder(broken, candidates, max(maxSurge-surging, 0), g, func(n *nodeState) {
		p.Creates = append(p.Creates, PodCreate{Node: n.name, Reason: ReasonSurge})
	})
	v.deleteFirst(blocked, replacing, g, p)
}

// waitForNewPod notes that node n waits for its new pod cur to become available, or
// to pass the bake (then looking again when it ends), unless it already waits for
// the back-off of its failed pod, which says more.
func (v *view) waitForNewPod(n *nodeState, cur *podAvail, p *Plan) {
	if cur.available {
		until := v.healthyAt(cur.pod)
		n.waitForBake(until)
		p.requeueWithin(until.Sub(v.now) + time.Millisecond)
		return
	}
	switch {
	case n.wait == ReasonFailedPodBackoff:
	case v.inPlacePending(cur.pod):
		n.wait = ReasonInPlaceUpdating
	default:
		n.wait = ReasonNewPodUnavailable
	}
}

// podAvail is a pod with its availability, computed once.
type podAvail struct {
	pod       *v1.Pod
	available bool
	healthy   bool // available, and past the bake (see healthy.go)
}

// byName sorts nodes by name, in place, and returns them.
func byName(nodes []*nodeState) []*nodeState {
	slices.SortFunc(nodes, func(a, b *nodeState) int { return strings.Compare(a.name, b.name) })
	return nodes
}
