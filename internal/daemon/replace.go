package daemon

// Replacing old pods: the update's step that, within the budget and among the nodes
// the holds admit, picks the old pods to go — deleted so that placement recreates
// them, surged beside, updated in place (inplace.go), or deleted first where a host
// port blocks the surge (hostport.go) — and tells every node left waiting why.

import (
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// podsOnNode picks the node's one current-revision pod and one older pod, ignoring
// terminating ones. ok is false when there are more than one of either: the placement
// rules must prune the node before the update touches it. The answers point into the
// updater's scratch space, sparing an allocation per node: they hold until the next
// call, and every caller is done with them by then.
func (u *updater) podsOnNode(n *unode) (cur, old *podAvail, ok bool) {
	for _, pod := range n.pods {
		if u.pl.deleting(pod) {
			continue
		}
		if u.pl.updated(pod) {
			if cur != nil {
				return nil, nil, false
			}
			cur = &u.picked[0]
			*cur = podAvail{pod: pod, available: u.pl.available(pod) && !u.inPlacePending(pod), healthy: u.healthy(pod)}
		} else {
			if old != nil {
				return nil, nil, false
			}
			old = &u.picked[1]
			*old = podAvail{pod: pod, available: u.pl.available(pod)}
		}
	}
	return cur, old, true
}

// rollOut plans the next step of a RollingUpdate: which old pods to delete (or, when
// surging, beside which to create a new pod) without exceeding the budget, among the
// nodes the gate admits. Candidates are taken in node-name order, so the same state
// always updates the same nodes. Nodes left waiting are told why.
func (u *updater) rollOut(desired int, b budget, g *gate, p *Plan) {
	if b.maxSurge == 0 {
		u.rollOutReplacing(b.maxUnavailable, g, p)
		return
	}
	u.rollOutSurging(desired, b.maxSurge, g, p)
}

// rollOutReplacing deletes old pods so that new ones take their place, keeping the
// unavailable pods (missing, unavailable new, or being replaced) within maxUnavailable.
// Old pods that are unavailable anyway are replaced at once, if the gate admits them.
func (u *updater) rollOutReplacing(maxUnavailable int, g *gate, p *Plan) {
	unavailable := 0
	var candidates, broken []*unode
	for i := range u.nodes {
		n := &u.nodes[i]
		if len(n.pods) == 0 && !n.verdict.Run {
			continue
		}
		if n.sick != "" {
			n.wait = n.sick
			continue
		}
		if n.shuttingDown {
			// Its kubelet stops its pods; the node counts against the budget unless
			// one is still available.
			n.wait = ReasonNodeShuttingDown
			if cur, old, ok := u.podsOnNode(n); !ok || !(cur != nil && cur.available || old != nil && old.available) {
				unavailable++
			}
			continue
		}
		cur, old, ok := u.podsOnNode(n)
		switch {
		case !ok, cur == nil && old == nil, cur != nil && old != nil:
			unavailable++
		case cur != nil:
			if !cur.healthy {
				unavailable++
				u.waitForNewPod(n, cur, p)
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
	u.updateInOrder(broken, candidates, max(maxUnavailable-unavailable, 0), g, func(n *unode) {
		_, old, _ := u.podsOnNode(n)
		u.replaceOld(old.pod, p)
	})
}

// updateInOrder updates the broken nodes (old pod unavailable anyway) the gate
// admits, then as many candidates as the budget has room for, both in node-name
// order: the partition may admit only some. Nodes left out are told why they wait.
func (u *updater) updateInOrder(broken, candidates []*unode, room int, g *gate, update func(*unode)) {
	for _, n := range byName(broken) {
		if u.admit(n, g) {
			update(n)
		}
	}
	for _, n := range byName(candidates) {
		if room == 0 {
			n.wait = budgetOrPartition(g)
			continue
		}
		if u.admit(n, g) {
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
func (u *updater) admit(n *unode, g *gate) bool {
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
func (u *updater) rollOutSurging(desired, maxSurge int, g *gate, p *Plan) {
	surging, available, replacing := 0, 0, 0
	var candidates, leaving, broken, blocked []*unode
	for i := range u.nodes {
		n := &u.nodes[i]
		if len(n.pods) == 0 || n.node == nil {
			continue
		}
		if n.sick != "" {
			n.wait = n.sick
			continue
		}
		if n.shuttingDown {
			n.wait = ReasonNodeShuttingDown
			continue
		}
		cur, old, ok := u.podsOnNode(n)
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
				u.waitForNewPod(n, cur, p)
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
				u.portBlocked = append(u.portBlocked, portBlock{node: n.name, ports: ports})
				blocked = append(blocked, n)
				n.wait = ReasonSurgeHostPort
				continue
			}
			u.waitForNewPod(n, cur, p)
		default:
			p.Deletes = append(p.Deletes, PodDelete{Pod: old.pod, Reason: ReasonSurgeDone})
		}
	}
	if spare := available - desired; spare > 0 {
		for _, n := range byName(leaving)[:min(spare, len(leaving))] {
			_, old, _ := u.podsOnNode(n)
			p.Deletes = append(p.Deletes, PodDelete{Pod: old.pod, Reason: n.verdict.Reason})
		}
	}
	u.updateInOrder(broken, candidates, max(maxSurge-surging, 0), g, func(n *unode) {
		p.Creates = append(p.Creates, PodCreate{Node: n.name, Reason: ReasonSurge})
	})
	u.deleteFirst(blocked, replacing, g, p)
}

// waitForNewPod notes that node n waits for its new pod cur to become available, or
// to pass the bake (then looking again when it ends), unless it already waits for
// the back-off of its failed pod, which says more.
func (u *updater) waitForNewPod(n *unode, cur *podAvail, p *Plan) {
	if cur.available {
		until := u.healthyAt(cur.pod)
		n.waitForBake(until)
		u.recheck.within(until.Sub(u.pl.now) + time.Millisecond)
		return
	}
	switch {
	case n.wait == ReasonFailedPodBackoff:
	case u.inPlacePending(cur.pod) && resizePending(cur.pod) != nil:
		n.wait = ReasonResizePending
	case u.inPlacePending(cur.pod):
		n.wait = ReasonInPlaceUpdating
	default:
		n.wait = ReasonNewPodUnavailable
	}
}

// replaceOld plans the update of node n's old pod: in place when the DaemonSet asks
// for it and the pod's revision allows it, else a delete, so that a new pod takes
// its place.
func (u *updater) replaceOld(old *v1.Pod, p *Plan) {
	if u, ok := u.inPlaceUpdate(old); ok {
		p.Updates = append(p.Updates, u)
		return
	}
	p.Deletes = append(p.Deletes, PodDelete{Pod: old, Reason: ReasonUpdate})
}

// waitForBake notes that node n's new pod is available but still baking, until when.
func (n *unode) waitForBake(until time.Time) {
	if n.wait != ReasonFailedPodBackoff {
		n.wait, n.waitUntil = ReasonNewPodBaking, until
	}
}

// podAvail is a pod with its availability, computed once.
type podAvail struct {
	pod       *v1.Pod
	available bool
	healthy   bool // available, and past the bake (see failure.go)
}

// byName sorts nodes by name, in place, and returns them.
func byName(nodes []*unode) []*unode {
	slices.SortFunc(nodes, func(a, b *unode) int { return strings.Compare(a.name, b.name) })
	return nodes
}
