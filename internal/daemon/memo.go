package daemon

import (
	"maps"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Memo lets the syncs of a settled DaemonSet look only at what changed since the last.
//
// A Decide that finds a DaemonSet settled (every pod of the current revision, at most
// one per node, nothing to create, delete, adopt or wait for, no rollout policy)
// records per node the node and pod objects it saw and their share of the status
// counters. DecideWith then finds what changed by comparing the snapshot's objects
// with the recorded ones by identity (a cache replaces an object that changes, it
// never edits one) and applies the rules to the changed nodes only. Whenever one of
// them needs more than a new status, or anything but nodes and pods changed, it makes
// the full decision instead: the Plan is always the one Decide would make.
//
// A Memo belongs to one DaemonSet and is used by one decision at a time, which may
// update it.
type Memo struct {
	uid         types.UID
	generation  int64 // the API server raises it on every change of the spec
	annotations map[string]string
	collisions  *int32
	revisions   map[*apps.ControllerRevision]bool
	selector    labels.Selector
	elig        *Eligibility
	hash        string
	surge       bool

	entries []memoNode // one per node
	byNode  map[*v1.Node]int
	byPod   map[*v1.Pod]int
	byName  map[string]int
	total   counts // the sum of the entries' shares
	epoch   uint32 // marks the entries seen by the current comparison
}

type memoNode struct {
	node     *v1.Node
	pod      *v1.Pod // nil: no pod on the node
	share    counts
	seen     uint32 // epoch in which the node was in the snapshot
	podSeen  uint32 // epoch in which the pod was in the snapshot
	changed  uint32 // epoch in which the node or its pod changed
	verdict  Verdict
	replaced bool // the pod was replaced by another object in this comparison
}

// DecideWith is Decide for a caller that keeps a Memo per DaemonSet: it passes the
// one the previous call returned (nil at first) and keeps the one it gets back (nil
// when the DaemonSet is not settled).
func DecideWith(s *Snapshot, m *Memo) (Plan, *Memo) {
	if m != nil {
		if p, ok := m.decide(s); ok {
			return p, m
		}
	}
	p, v := decide(s)
	return p, newMemo(s, &p, v)
}

// newMemo records the settled state v of a full decision, or returns nil when the
// decision found anything to do or wait for.
func newMemo(s *Snapshot, p *Plan, v *view) *Memo {
	ds := s.DaemonSet
	if v == nil || !v.memoable || p.Writes() > 0 && (p.Status == nil || p.Writes() > 1) ||
		len(p.Events) > 0 || p.RequeueAfter > 0 || !s.InFlight.Empty() || len(s.Backoff) > 0 {
		return nil
	}
	m := &Memo{
		uid: ds.UID, generation: ds.Generation, annotations: maps.Clone(ds.Annotations),
		collisions: ds.Status.CollisionCount, selector: v.selector, elig: v.elig, hash: v.hash, surge: v.surge,
		revisions: make(map[*apps.ControllerRevision]bool, len(s.Revisions)),
		entries:   make([]memoNode, 0, len(v.nodes)),
		byNode:    make(map[*v1.Node]int, len(v.nodes)),
		byPod:     make(map[*v1.Pod]int, len(v.nodes)),
		byName:    make(map[string]int, len(v.nodes)),
	}
	for _, r := range s.Revisions {
		m.revisions[r] = true
	}
	for _, n := range v.nodes {
		e, ok := m.settledNode(v, n)
		if !ok {
			return nil
		}
		i := len(m.entries)
		m.entries = append(m.entries, e)
		m.byNode[n.node], m.byName[n.name] = i, i
		if e.pod != nil {
			m.byPod[e.pod] = i
		}
		m.total.add(e.share)
	}
	if len(m.byPod) != v.claimed {
		return nil // claimed pods the rules skip: the full decision sorts them out
	}
	return m
}

// settledNode is n's entry if the rules have nothing to do on it and nothing to wait
// for: an existing node with at most one pod, of the current revision, neither
// finished nor terminating, whose availability does not change with time.
func (m *Memo) settledNode(v *view, n *nodeState) (memoNode, bool) {
	e := memoNode{node: n.node, verdict: n.verdict}
	// What a node waits for (n.wait) only explains; with every pod current, none of
	// it holds back a write.
	if n.node == nil || len(n.pods) > 1 || n.creating {
		return e, false
	}
	if len(n.pods) == 1 {
		pod := n.pods[0]
		if v.deleting(pod) || isTerminal(pod) || !v.updated(pod) {
			return e, false
		}
		e.pod = pod
	}
	var scratch Plan
	v.manage(n, m.surge, nil, &scratch)
	if scratch.Writes() > 0 || len(scratch.Events) > 0 || scratch.RequeueAfter > 0 {
		return e, false
	}
	if v.countNode(n, &e.share) > 0 {
		return e, false
	}
	return e, true
}

// decide makes the decision from the memo, updating it, or reports that only the
// full decision can be trusted (and then the memo must be dropped).
func (m *Memo) decide(s *Snapshot) (Plan, bool) {
	ds := s.DaemonSet
	if ds.DeletionTimestamp != nil || ds.UID != m.uid || ds.Generation != m.generation ||
		!equalCount(ds.Status.CollisionCount, m.collisions) || !maps.Equal(ds.Annotations, m.annotations) ||
		!s.InFlight.Empty() || len(s.Backoff) > 0 || len(s.Revisions) != len(m.revisions) ||
		progressing(&ds.Status) != nil { // left by a removed policy: the full decision clears it
		return Plan{}, false
	}
	for _, r := range s.Revisions {
		if !m.revisions[r] {
			return Plan{}, false
		}
	}
	m.epoch++
	epoch := m.epoch
	var newNodes []*v1.Node
	for _, node := range s.Nodes {
		if i, ok := m.byNode[node]; ok {
			m.entries[i].seen = epoch
		} else {
			newNodes = append(newNodes, node)
		}
	}
	var newPods []*v1.Pod
	for _, pod := range s.Pods {
		if i, ok := m.byPod[pod]; ok {
			m.entries[i].podSeen = epoch
		} else {
			newPods = append(newPods, pod)
		}
	}
	v := &view{ds: ds, hash: m.hash, now: s.Now, elig: m.elig, surge: m.surge}
	v.gen, v.hasGen = templateGeneration(ds.Annotations)
	var changed []int
	for _, node := range newNodes {
		i, ok := m.byName[node.Name]
		if !ok {
			return Plan{}, false // a node joined: the full decision places its pod
		}
		e := &m.entries[i]
		delete(m.byNode, e.node)
		e.node, e.seen, e.verdict = node, epoch, m.elig.Check(node)
		m.byNode[node] = i
		changed = m.markChanged(changed, i)
	}
	for _, pod := range newPods {
		switch decideClaim(pod, m.uid, m.selector) {
		case claimIgnore:
			continue
		case claimOwned:
		default:
			return Plan{}, false
		}
		name, ok := TargetNode(pod)
		if !ok {
			return Plan{}, false
		}
		i, ok := m.byName[name]
		if !ok {
			return Plan{}, false
		}
		e := &m.entries[i]
		if e.pod != nil && (e.podSeen == epoch || e.replaced && e.changed == epoch) {
			return Plan{}, false // a second pod on the node
		}
		if e.pod != nil {
			delete(m.byPod, e.pod)
		}
		e.pod, e.podSeen, e.replaced = pod, epoch, true
		m.byPod[pod] = i
		changed = m.markChanged(changed, i)
	}
	for i := range m.entries {
		e := &m.entries[i]
		if e.seen != epoch || e.pod != nil && e.podSeen != epoch {
			return Plan{}, false // a node or a pod is gone
		}
	}
	for _, i := range changed {
		e := &m.entries[i]
		e.replaced = false
		n := &nodeState{name: e.node.Name, node: e.node, verdict: e.verdict}
		n.pods = n.one[:0]
		if e.pod != nil {
			n.pods = append(n.pods, e.pod)
		}
		next, ok := m.settledNode(v, n)
		if !ok {
			return Plan{}, false
		}
		m.total.sub(e.share)
		m.total.add(next.share)
		e.share = next.share
	}
	return Plan{Hash: m.hash, Status: nextStatus(ds, m.total, true, ds.Status.CollisionCount)}, true
}

// markChanged adds entry i to the changed ones once per comparison.
func (m *Memo) markChanged(changed []int, i int) []int {
	if m.entries[i].changed == m.epoch {
		return changed
	}
	m.entries[i].changed = m.epoch
	return append(changed, i)
}

func (c *counts) add(o counts) {
	c.desired += o.desired
	c.current += o.current
	c.misscheduled += o.misscheduled
	c.ready += o.ready
	c.available += o.available
	c.updated += o.updated
}

func (c *counts) sub(o counts) {
	c.desired -= o.desired
	c.current -= o.current
	c.misscheduled -= o.misscheduled
	c.ready -= o.ready
	c.available -= o.available
	c.updated -= o.updated
}
