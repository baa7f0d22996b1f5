package daemon

import (
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// nodeState is one node as the rules see it: its verdict and the DaemonSet's pods
// pinned to it.
type nodeState struct {
	name    string
	node    *v1.Node // nil when the node no longer exists
	verdict Verdict  // zero (nothing allowed) when the node no longer exists
	// pods are the DaemonSet's pods for this node, terminating ones included, but not
	// those that both finished and are being deleted: those are gone for our purposes.
	pods []*v1.Pod
	// one backs pods for the usual single pod, sparing an allocation per node; picked
	// holds podsOnNode's answer (the same for the whole decision).
	one    [1]*v1.Pod
	picked [2]podAvail
	// creating: a pod was created for this node and the cache has not shown it yet.
	creating bool
	// wait is what the node waits for, when something does not happen on it yet
	// (see the rollout and backoff reasons); waitUntil, when that ends by itself.
	wait      Reason
	waitUntil time.Time
	// failures counts the DaemonSet's failed pods on the node (failedpods.go),
	// when one is there.
	failures int
}

// view is a Snapshot arranged for the rules: claimed pods grouped by node, with the
// DaemonSet's current revision.
type view struct {
	ds     *apps.DaemonSet
	hash   string
	gen    int64
	hasGen bool
	// dupHashes are hashes of duplicate revisions of the current template: their
	// pods run the current template and are being relabelled.
	dupHashes map[string]bool
	// stable, when set, is the template for nodes that join mid-rollout, given to
	// those that stableGate does not let the rollout update now.
	stable     *v1.PodTemplateSpec
	stableGate *gate
	now        time.Time
	// minHealthy is the rollout's healthy-time bake (see healthy.go); zero for none.
	minHealthy time.Duration
	inflight   InFlight
	failures   map[string]int // Snapshot.Failures
	nodes      []*nodeState   // the snapshot's nodes in its order, then gone nodes with pods
	// settled: no write is in flight and the placement rules planned none, so a
	// RollingUpdate was assessed.
	settled bool
	// portBlocked are the nodes whose surge pods wait for host ports their old pods
	// hold (see hostport.go), found by the rollout.
	portBlocked []portBlock
	// inPlace, when set, lets the update change old pods in place (inplace.go).
	inPlace        *inPlace
	inPlaceRefused map[types.UID]bool // Snapshot.InPlaceRefused
	records        map[types.UID]decodedRecord

	// What a Memo needs to repeat the per-node rules (see newMemo).
	elig     *Eligibility
	selector labels.Selector
	surge    bool
	claimed  int  // pods claimed
	memoable bool // no policy, no duplicate revisions: the rules are per node
}

// deleting reports whether pod is on its way out: marked for deletion, or deleted by
// us already.
func (v *view) deleting(pod *v1.Pod) bool {
	return pod.DeletionTimestamp != nil || v.deleteInFlight(pod)
}

// deleteInFlight reports whether pod's delete was sent and is not yet seen.
func (v *view) deleteInFlight(pod *v1.Pod) bool {
	return len(v.inflight.Deletes) > 0 && v.inflight.Deletes[pod.UID]
}

// hasLivePod reports whether a pod on n is neither finished nor on its way out.
func (v *view) hasLivePod(n *nodeState) bool {
	for _, pod := range n.pods {
		if !v.deleting(pod) && !isTerminal(pod) {
			return true
		}
	}
	return false
}

func (v *view) updated(pod *v1.Pod) bool {
	return isUpdated(pod, v.hash, v.gen, v.hasGen) || v.dupHashes[pod.Labels[HashLabel]]
}

func (v *view) available(pod *v1.Pod) bool {
	return IsAvailable(pod, v.ds.Spec.MinReadySeconds, v.now)
}

// newView groups the claimed pods by their target node. Pods pinned to no node are
// left out: nothing can be decided about them.
func newView(s *Snapshot, elig *Eligibility, hash string, claimed []*v1.Pod) *view {
	v := &view{ds: s.DaemonSet, hash: hash, now: s.Now, inflight: s.InFlight, failures: s.Failures, elig: elig, claimed: len(claimed),
		inPlaceRefused: s.InPlaceRefused}
	v.gen, v.hasGen = templateGeneration(s.DaemonSet.Annotations)
	states := make([]nodeState, len(s.Nodes))
	byName := make(map[string]*nodeState, len(s.Nodes))
	v.nodes = make([]*nodeState, 0, len(s.Nodes))
	for i, node := range s.Nodes {
		st := &states[i]
		st.name, st.node, st.verdict = node.Name, node, elig.Check(node)
		st.pods = st.one[:0]
		st.creating = len(s.InFlight.Creates) > 0 && s.InFlight.Creates[node.Name]
		byName[node.Name] = st
		v.nodes = append(v.nodes, st)
	}
	for _, pod := range claimed {
		if isTerminal(pod) && pod.DeletionTimestamp != nil {
			continue
		}
		name, ok := TargetNode(pod)
		if !ok {
			continue
		}
		st := byName[name]
		if st == nil {
			st = &nodeState{name: name, verdict: Verdict{node: name, Reason: ReasonNodeGone}}
			byName[name] = st
			v.nodes = append(v.nodes, st)
		}
		st.pods = append(st.pods, pod)
	}
	return v
}
