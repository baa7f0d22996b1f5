package daemon

import (
	"maps"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Memo lets the syncs of a DaemonSet whose work is per node look only at what changed
// since the last.
//
// A DaemonSet is memoable when every pod is of the current revision, at most one per
// node, none finished (a finished pod marked for deletion counts as gone, as it does
// for the placement rules), no rollout policy is set and nothing depends on the time: the
// placement rules then decide each node alone (a pod to create, a pod to delete, or
// nothing) and the status is a sum over the nodes. A Decide that finds it so records
// per node the node and pod objects it saw, its share of the status counters and
// whether the rules wrote for the node (pending), and the writes in flight it decided
// with. DecideWith then finds what changed by comparing the snapshot's objects with the
// recorded ones by identity (a cache replaces an object that changes, it never edits
// one) and its writes in flight with the recorded ones (only those the snapshot names
// as changed, when it numbers them: InFlight.Changes), and applies the rules to the
// changed and pending nodes only, joining nodes included. A node whose create or
// delete stays in flight, and whose objects do not change, is not looked at again:
// nothing the rules read of it changed. Whenever one of them leaves that shape, a
// node is deleted, or anything but nodes, pods and writes in flight changed, it makes
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
	// template is the one new pods are made from, once a decision made it: it
	// depends only on what the memo must match (the spec, annotations and hash).
	template *v1.PodTemplateSpec

	entries []memoNode // one per node
	byNode  map[*v1.Node]int
	byUID   map[types.UID]int // the entries' pods
	byName  map[string]int
	pending []int // the entries looked at on every decision
	// creates and deletes are the writes in flight of the last decision (the
	// snapshot's InFlight, copied), numbered inflightAt: a node whose writes in
	// flight differ is looked at.
	creates    map[string]bool
	deletes    map[types.UID]bool
	inflightAt uint64
	total      counts // the sum of the entries' shares
	epoch      uint32 // marks the entries seen by the current comparison
	// unavailable counts the entries whose pod, of the current revision, is not
	// available: on a settled RollingUpdate those nodes wait for it.
	unavailable int
	// causes counts the entries by why their node has no available pod.
	causes map[Unavailable]int
	// looked is how many nodes the last decision from the memo looked at again.
	looked int
	// at is the At of the snapshot the memo was made or last used with.
	at Position
}

// At is the At of the snapshot m was made or last used with: a caller that counts
// its caches' changes passes the changes since then (Snapshot.Changes).
func (m *Memo) At() Position {
	if m == nil {
		return Position{}
	}
	return m.at
}

// Looked is how many nodes the last decision from m looked at again (changed,
// pending, or whose writes in flight changed); the others were taken as they were.
func (m *Memo) Looked() int {
	if m == nil {
		return 0
	}
	return m.looked
}

// Nodes is how many nodes m holds.
func (m *Memo) Nodes() int {
	if m == nil {
		return 0
	}
	return len(m.entries)
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
	// pending: the rules wrote for the node; it is looked at again whether or not
	// its objects change, until they write nothing for it. A write in flight does not
	// make its node pending: the node is looked at when the write lands or lapses
	// (its pod changes, or it leaves the writes in flight).
	pending bool
	// unavailable: the pod is of the current revision and not available.
	unavailable bool
	// cause: why the node, which should run the pod, has none available (set).
	cause    Unavailable
	hasCause bool
}

// newMemo records what a full decision d worked out, or returns nil when the
// decision is not per node: it made writes other than pod creates, pod deletes and
// the status, or has something to wait for.
func newMemo(s *Snapshot, p *Plan, d *decision) *Memo {
	ds := s.DaemonSet
	if d == nil || !d.memoable || !onlyPerNode(p) || len(s.Backoff) > 0 || !perNodeShape(d.placement) {
		return nil
	}
	v := d.placement
	m := &Memo{
		uid: ds.UID, generation: ds.Generation, annotations: maps.Clone(ds.Annotations),
		collisions: ds.Status.CollisionCount, selector: d.selector, elig: v.elig, hash: v.hash, surge: v.surge,
		revisions: make(map[*apps.ControllerRevision]bool, len(s.Revisions)),
		entries:   make([]memoNode, 0, len(v.nodes)),
		byNode:    make(map[*v1.Node]int, len(v.nodes)),
		byUID:     make(map[types.UID]int, len(v.nodes)),
		at:        s.At,
		byName:    make(map[string]int, len(v.nodes)),
	}
	for _, r := range s.Revisions {
		m.revisions[r] = true
	}
	var scratch placed // the full decision has the writes; entry's are only counted
	for _, n := range v.nodes {
		e, ok := m.entry(v, n, &scratch)
		if !ok {
			return nil
		}
		scratch.creates, scratch.deletes = scratch.creates[:0], scratch.deletes[:0]
		i := len(m.entries)
		m.entries = append(m.entries, e)
		m.byNode[n.node], m.byName[n.name] = i, i
		if e.pod != nil {
			m.byUID[e.pod.UID] = i
		}
		if e.pending {
			m.pending = append(m.pending, i)
		}
		m.total.add(e.share)
		if e.unavailable {
			m.unavailable++
		}
		m.countCause(e, 1)
	}
	if len(m.byUID) != v.claimed-v.finished {
		// Claimed pods the rules skip, or a finished pod of an older template going,
		// whose revision the history keeps until it is gone: the full decision sorts
		// them out.
		return nil
	}
	m.keepInFlight(s.InFlight)
	return m
}

// perNodeShape is the quick part of entry's test, before anything is allocated: every
// node has the shape of nodeAlone. In the middle of a rollout it fails at the first
// old pod.
func perNodeShape(v *Placement) bool {
	for _, n := range v.nodes {
		if !nodeAlone(v, n) {
			return false
		}
	}
	return true
}

// nodeAlone reports whether n has the shape the rules decide alone: an existing node
// with at most one pod, of the current revision and not finished.
func nodeAlone(v *Placement, n *nodeState) bool {
	if n.node == nil || len(n.pods) > 1 {
		return false
	}
	return len(n.pods) == 0 || !isTerminal(n.pods[0]) && v.updated(n.pods[0])
}

// onlyPerNode reports whether p's writes are pod creates, pod deletes and the status,
// with no event and no time to wait for.
func onlyPerNode(p *Plan) bool {
	w := len(p.Creates) + len(p.Deletes)
	if p.Status != nil {
		w++
	}
	return p.Writes() == w && len(p.Events) == 0 && p.RequeueAfter == 0 && len(p.FailedPodNodes) == 0
}

// entry is n's entry, with its pod create or delete added to p, if the rules decide
// the node alone (nodeAlone) and its availability does not change with time.
func (m *Memo) entry(v *Placement, n *nodeState, p *placed) (memoNode, bool) {
	e := memoNode{node: n.node, verdict: n.verdict}
	// What a node waits for (n.wait) only explains; with every pod current, none of
	// it holds back a write.
	if !nodeAlone(v, n) {
		return e, false
	}
	if len(n.pods) == 1 {
		e.pod = n.pods[0]
	}
	writes := len(p.creates) + len(p.deletes)
	v.placeNode(n, nil, p)
	if len(p.events) > 0 || p.recheck > 0 || len(p.failedPodNodes) > 0 {
		return e, false
	}
	e.pending = len(p.creates)+len(p.deletes) > writes
	if v.countNode(n, &e.share) > 0 {
		return e, false
	}
	e.unavailable = e.pod != nil && v.updated(e.pod) && !v.deleting(e.pod) && !v.available(e.pod)
	e.cause, e.hasCause = v.unavailableOn(n)
	return e, true
}

// countCause adds (by 1) or takes away (by -1) e's cause from the counts.
func (m *Memo) countCause(e memoNode, by int) {
	if !e.hasCause {
		return
	}
	if m.causes == nil {
		m.causes = map[Unavailable]int{}
	}
	m.causes[e.cause] += by
}

// decide makes the decision from the memo, updating it, or reports that only the
// full decision can be trusted (and then the memo must be dropped).
func (m *Memo) decide(s *Snapshot) (Plan, bool) {
	ds := s.DaemonSet
	if ds.DeletionTimestamp != nil || ds.UID != m.uid || ds.Generation != m.generation ||
		!equalCount(ds.Status.CollisionCount, m.collisions) || !maps.Equal(ds.Annotations, m.annotations) ||
		len(s.Backoff) > 0 || len(s.Revisions) != len(m.revisions) ||
		Progressing(&ds.Status) != nil { // left by a removed policy: the full decision clears it
		return Plan{}, false
	}
	for _, r := range s.Revisions {
		if !m.revisions[r] {
			return Plan{}, false
		}
	}
	var changed []int
	var ok bool
	if s.Changes != nil && s.Changes.From == m.at {
		changed, ok = m.compareChanges(s)
	} else {
		changed, ok = m.compare(s)
	}
	if !ok {
		return Plan{}, false
	}
	m.at = s.At
	m.looked = len(changed)
	v := &Placement{ds: ds, hash: m.hash, now: s.Now, inflight: s.InFlight, elig: m.elig, surge: m.surge}
	v.gen, v.hasGen = templateGeneration(ds.Annotations)
	// A delete in flight for a pod the memo does not hold (gone, finished and marked
	// for deletion, or no longer ours) is one the full decision places nowhere either:
	// only the deletes of the pods on the nodes looked at again count.
	var out placed
	m.pending = m.pending[:0]
	for _, i := range changed {
		e := &m.entries[i]
		e.replaced = false
		n := &nodeState{name: e.node.Name, node: e.node, verdict: e.verdict}
		n.creating = len(s.InFlight.Creates) > 0 && s.InFlight.Creates[n.name]
		n.pods = n.one[:0]
		if e.pod != nil {
			n.pods = append(n.pods, e.pod)
		}
		next, ok := m.entry(v, n, &out)
		if !ok {
			return Plan{}, false
		}
		m.total.sub(e.share)
		m.total.add(next.share)
		m.unavailable += b2i(next.unavailable) - b2i(e.unavailable)
		m.countCause(*e, -1)
		m.countCause(next, 1)
		e.share, e.pending, e.unavailable = next.share, next.pending, next.unavailable
		e.cause, e.hasCause = next.cause, next.hasCause
		if e.pending {
			m.pending = append(m.pending, i)
		}
	}
	m.keepInFlight(s.InFlight)
	p := Plan{Hash: m.hash, Creates: out.creates, Deletes: out.deletes}
	finishPodChanges(s, &p, m.template)
	if p.Template != nil {
		m.template = p.Template
	}
	p.Status = nextStatus(ds, m.total, s.InFlight.Empty(), ds.Status.CollisionCount)
	// As the full decision's update stage would say: on a settled RollingUpdate, with
	// every pod current, the nodes whose pod is not available wait for it.
	settled := len(p.Creates) == 0 && len(p.Deletes) == 0 && s.InFlight.Empty()
	if settled && m.unavailable > 0 && ds.Spec.UpdateStrategy.Type == apps.RollingUpdateDaemonSetStrategyType {
		p.Waiting = map[Reason]int{ReasonNewPodUnavailable: m.unavailable}
	}
	p.Unavailable = causeCounts(m.causes)
	return p, true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compare brings the entries up to the snapshot's nodes and pods and returns those to
// look at: the changed, the pending and those with a create in flight. It fails when
// a node is gone or a pod does not fit one entry.
func (m *Memo) compare(s *Snapshot) ([]int, bool) {
	changed, ok := m.begin(s)
	if !ok {
		return nil, false
	}
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
	gen, hasGen := templateGeneration(s.DaemonSet.Annotations)
	for _, pod := range s.Pods {
		if i, ok := m.byUID[pod.UID]; ok && m.entries[i].pod == pod {
			m.entries[i].podSeen = epoch
		} else {
			newPods = append(newPods, pod)
		}
	}
	for _, node := range newNodes {
		i, ok := m.byName[node.Name]
		if ok {
			delete(m.byNode, m.entries[i].node)
		} else {
			i = len(m.entries) // a node joined
			m.entries = append(m.entries, memoNode{})
			m.byName[node.Name] = i
		}
		e := &m.entries[i]
		e.node, e.seen, e.verdict = node, epoch, m.elig.Check(node)
		m.byNode[node] = i
		changed = m.markChanged(changed, i)
	}
	for _, pod := range newPods {
		hold, ok := m.holds(pod, gen, hasGen)
		if !ok {
			return nil, false
		}
		if !hold {
			continue
		}
		i, ok := m.entryOf(pod)
		if !ok {
			return nil, false
		}
		e := &m.entries[i]
		if e.pod != nil && (e.podSeen == epoch || e.replaced && e.changed == epoch) {
			return nil, false // a second pod on the node
		}
		if j, ok := m.byUID[pod.UID]; ok && j != i {
			return nil, false // the pod is on another node than it was
		}
		if e.pod != nil {
			delete(m.byUID, e.pod.UID)
		}
		e.pod, e.podSeen, e.replaced = pod, epoch, true
		m.byUID[pod.UID] = i
		changed = m.markChanged(changed, i)
	}
	for i := range m.entries {
		e := &m.entries[i]
		if e.seen != epoch {
			return nil, false // a node is gone
		}
		if e.pod != nil && e.podSeen != epoch {
			if m.byUID[e.pod.UID] == i {
				delete(m.byUID, e.pod.UID) // the pod is gone, or no longer ours
			}
			e.pod = nil
			changed = m.markChanged(changed, i)
		}
	}
	return changed, true
}

// begin starts a comparison (a new epoch) with the entries looked at whatever their
// objects show: the pending ones, and those whose writes in flight are not those of
// the last decision (a write queued, landed, failed or lapsed since).
func (m *Memo) begin(s *Snapshot) ([]int, bool) {
	m.epoch++
	var changed []int
	ok := true
	for _, i := range m.pending {
		changed = m.markChanged(changed, i)
	}
	f := s.InFlight
	if c := m.inflightChanges(f); c != nil {
		for _, name := range c.Creates {
			if changed, ok = m.markCreate(changed, name, f.Creates[name]); !ok {
				return nil, false
			}
		}
		for _, uid := range c.Deletes {
			if f.Deletes[uid] != m.deletes[uid] {
				changed = m.markHolding(changed, uid)
			}
		}
		return changed, true
	}
	for name := range f.Creates {
		if changed, ok = m.markCreate(changed, name, true); !ok {
			return nil, false
		}
	}
	for name := range m.creates {
		if !f.Creates[name] {
			changed, _ = m.markCreate(changed, name, false)
		}
	}
	for uid := range f.Deletes {
		if !m.deletes[uid] {
			changed = m.markHolding(changed, uid)
		}
	}
	for uid := range m.deletes {
		if !f.Deletes[uid] {
			changed = m.markHolding(changed, uid)
		}
	}
	return changed, true
}

// inflightChanges returns what f names as changed since the writes in flight the
// memo last decided with, or nil when it cannot say: then every write is compared.
func (m *Memo) inflightChanges(f InFlight) *InFlightChanges {
	if c := f.Changes; c != nil && m.inflightAt != 0 && c.Since == m.inflightAt {
		return c
	}
	return nil
}

// markCreate marks the entry of node changed when whether a create is in flight for
// it (now) differs from the last decision. It fails on a create in flight for a node
// the memo does not hold.
func (m *Memo) markCreate(changed []int, node string, now bool) ([]int, bool) {
	if now == m.creates[node] {
		return changed, true
	}
	i, ok := m.byName[node]
	if !ok {
		return changed, !now
	}
	return m.markChanged(changed, i), true
}

// markHolding marks the entry holding the pod uid changed, if there is one: a pod the
// memo does not hold is looked at by the comparison, if it is in the snapshot at all.
func (m *Memo) markHolding(changed []int, uid types.UID) []int {
	if i, held := m.byUID[uid]; held {
		return m.markChanged(changed, i)
	}
	return changed
}

// keepInFlight records f as the writes in flight the memo last decided with: the
// named changes alone when begin went by them, else a whole copy.
func (m *Memo) keepInFlight(f InFlight) {
	c := m.inflightChanges(f)
	m.inflightAt = f.At
	if c != nil {
		for _, name := range c.Creates {
			setOrDelete(m.creates, name, f.Creates[name])
		}
		for _, uid := range c.Deletes {
			setOrDelete(m.deletes, uid, f.Deletes[uid])
		}
		return
	}
	if m.creates == nil {
		m.creates, m.deletes = map[string]bool{}, map[types.UID]bool{}
	}
	clear(m.creates)
	clear(m.deletes)
	maps.Copy(m.creates, f.Creates)
	maps.Copy(m.deletes, f.Deletes)
}

// setOrDelete holds k in set exactly when in is true.
func setOrDelete[K comparable](set map[K]bool, k K, in bool) {
	if in {
		set[k] = true
	} else {
		delete(set, k)
	}
}

// compareChanges is compare for a snapshot that names what changed since the memo's
// (Snapshot.Changes): it looks at the pending nodes, those whose writes in flight
// changed (begin) and the changed nodes and pods alone, and brings their entries up
// to date as compare would.
func (m *Memo) compareChanges(s *Snapshot) ([]int, bool) {
	changed, ok := m.begin(s)
	if !ok {
		return nil, false
	}
	c := s.Changes
	for name, node := range c.Nodes {
		i, held := m.byName[name]
		switch {
		case node == nil && held:
			return nil, false // a node is gone
		case node == nil || held && m.entries[i].node == node:
			continue
		case held:
			delete(m.byNode, m.entries[i].node)
		default:
			i = len(m.entries) // a node joined
			m.entries = append(m.entries, memoNode{})
			m.byName[name] = i
		}
		e := &m.entries[i]
		e.node, e.verdict = node, m.elig.Check(node)
		m.byNode[node] = i
		changed = m.markChanged(changed, i)
	}
	// The pods that went (or no longer count) first, so that a pod replacing one of
	// them on its node is not taken for a second pod there.
	gen, hasGen := templateGeneration(s.DaemonSet.Annotations)
	var present []*v1.Pod
	for uid, pod := range c.Pods {
		if pod != nil {
			hold, ok := m.holds(pod, gen, hasGen)
			if !ok {
				return nil, false
			}
			if hold {
				present = append(present, pod)
				continue
			}
		}
		if i, held := m.byUID[uid]; held {
			delete(m.byUID, uid)
			m.entries[i].pod = nil
			changed = m.markChanged(changed, i)
		}
	}
	for _, pod := range present {
		i, ok := m.entryOf(pod)
		if !ok {
			return nil, false
		}
		e := &m.entries[i]
		switch {
		case e.pod == pod:
			continue
		case e.pod != nil && e.pod.UID != pod.UID:
			return nil, false // a second pod on the node
		}
		if j, held := m.byUID[pod.UID]; held && j != i {
			return nil, false // the pod is on another node than it was
		}
		e.pod = pod
		m.byUID[pod.UID] = i
		changed = m.markChanged(changed, i)
	}
	return changed, true
}

// holds says what a comparison does with one of the snapshot's pods: hold it in its
// node's entry, leave it out (another controller's, or finished and on its way out,
// as if gone already: arrange), or give up (a pod to adopt or release, or a finished
// one of an older template, whose revision may be pruned once it is gone).
func (m *Memo) holds(pod *v1.Pod, gen int64, hasGen bool) (hold, ok bool) {
	switch decideClaim(pod, m.uid, m.selector) {
	case claimIgnore:
		return false, true
	case claimOwned:
	default:
		return false, false
	}
	if isTerminal(pod) && pod.DeletionTimestamp != nil {
		return false, isUpdated(pod, m.hash, gen, hasGen)
	}
	return true, true
}

// entryOf is the entry of pod's node, if the memo has one.
func (m *Memo) entryOf(pod *v1.Pod) (int, bool) {
	name, ok := TargetNode(pod)
	if !ok {
		return 0, false
	}
	i, ok := m.byName[name]
	return i, ok
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
