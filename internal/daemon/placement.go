package daemon

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// The placement stage: which pods must exist where. From the snapshot alone — each
// node's verdict, the DaemonSet's pods pinned to it and the writes in flight — it
// decides node by node where a pod is missing and which pods must go (failed,
// finished, excess, on a node that no longer qualifies or no longer exists), and it
// counts the status counters. Of the update it knows one thing, from the update
// strategy: whether a node may hold an old and a new pod together (a surge). It never
// reads the rollout annotations. Its answer, a Placement, is read-only once made: the
// update stage reads it and writes elsewhere.

// nodeState is one node as placement sees it: its verdict and the DaemonSet's pods
// pinned to it.
type nodeState struct {
	name    string
	node    *v1.Node // nil when the node no longer exists
	verdict Verdict  // zero (nothing allowed) when the node no longer exists
	// pods are the DaemonSet's pods for this node, terminating ones included, but not
	// those that both finished and are being deleted: those are gone for our purposes.
	pods []*v1.Pod
	// one backs pods for the usual single pod, sparing an allocation per node.
	one [1]*v1.Pod
	// creating: a pod was created for this node and the cache has not shown it yet.
	creating bool
	// backoffUntil: a failed pod here is left alone until then (zero when none is).
	backoffUntil time.Time
	// failures counts the DaemonSet's failed pods on the node, when one is there.
	failures int
	// surgeNew and surgeOld are the pods a surging node keeps: the oldest of the
	// current revision and the oldest of any other; nil unless it holds both.
	surgeNew, surgeOld *v1.Pod
	// shuttingDown: the node is shutting down, and left alone (shutdown.go).
	shuttingDown bool
}

// placed is what the placement rules call for.
type placed struct {
	creates        []PodCreate
	deletes        []PodDelete
	events         []Event
	failedPodNodes []string // nodes whose failed pods are deleted: their back-off grows
	recheck        recheck
}

// recheck is how soon a stage wants another look even if nothing changes; zero for
// no such wish.
type recheck time.Duration

// within keeps the sooner of the two.
func (r *recheck) within(d time.Duration) {
	if d > 0 && (*r == 0 || d < time.Duration(*r)) {
		*r = recheck(d)
	}
}

// Placement is the placement stage's answer for one DaemonSet.
type Placement struct {
	ds        *apps.DaemonSet
	hash      string
	gen       int64
	hasGen    bool
	dupHashes map[string]bool // duplicate revisions of the current template (history.go)
	now       time.Time
	inflight  InFlight
	failures  map[string]int // Snapshot.Failures
	surge     bool           // a node may hold an old and a new pod during an update
	elig      *Eligibility
	claimed   int // pods claimed
	// finished counts the claimed pods of the current template that are finished and
	// marked for deletion: like every finished pod on its way out, left out.
	finished int
	nodes    []*nodeState // the snapshot's nodes in its order, then gone nodes with pods
	byName   map[string]*nodeState
	// placed is what the rules called for; counts, the status counters, and
	// countRecheck, when the next Ready pod becomes available (zero for none).
	placed
	counts       counts
	countRecheck recheck
}

// arrange groups the claimed pods by their target node and counts the status
// counters; it applies no rule. Pods pinned to no node are left out: nothing can be
// decided about them.
func arrange(s *Snapshot, elig *Eligibility, hash string, dupHashes map[string]bool, claimed []*v1.Pod) *Placement {
	pl := &Placement{ds: s.DaemonSet, hash: hash, dupHashes: dupHashes, now: s.Now, inflight: s.InFlight,
		failures: s.Failures, elig: elig, claimed: len(claimed)}
	pl.gen, pl.hasGen = templateGeneration(s.DaemonSet.Annotations)
	states := make([]nodeState, len(s.Nodes))
	pl.byName = make(map[string]*nodeState, len(s.Nodes))
	pl.nodes = make([]*nodeState, 0, len(s.Nodes))
	for i, node := range s.Nodes {
		st := &states[i]
		st.name, st.node, st.verdict = node.Name, node, elig.Check(node)
		st.pods = st.one[:0]
		st.creating = len(s.InFlight.Creates) > 0 && s.InFlight.Creates[node.Name]
		pl.byName[node.Name] = st
		pl.nodes = append(pl.nodes, st)
	}
	for _, pod := range claimed {
		if isTerminal(pod) && pod.DeletionTimestamp != nil {
			if pl.updated(pod) {
				pl.finished++
			}
			continue
		}
		name, ok := TargetNode(pod)
		if !ok {
			continue
		}
		st := pl.byName[name]
		if st == nil {
			st = &nodeState{name: name, verdict: Verdict{node: name, Reason: ReasonNodeGone}}
			pl.byName[name] = st
			pl.nodes = append(pl.nodes, st)
		}
		st.pods = append(st.pods, pod)
	}
	pl.counts = pl.count(&pl.countRecheck)
	return pl
}

// newPlacement is the placement stage: the pods arranged by node, then the placement
// rules applied to every node. surge lets a node hold an old and a new pod.
func newPlacement(s *Snapshot, elig *Eligibility, hash string, dupHashes map[string]bool, claimed []*v1.Pod, surge bool) *Placement {
	pl := arrange(s, elig, hash, dupHashes, claimed)
	pl.surge = surge
	for _, n := range pl.nodes {
		pl.placeNode(n, s.Backoff, &pl.placed)
	}
	return pl
}

// placeNode applies the placement rules to one node: a pod where one belongs, none
// where none may run, failed and finished pods replaced, excess pods removed.
//
// Rules:
//   - eligible node, no pod (and none being created): create one;
//   - a pod may stay (KeepRunning): failed pods are deleted unless the node's backoff
//     holds them, succeeded pods are deleted; of the rest, one pod is kept (the oldest
//     bound one) or, while surging, the oldest of the current revision and the oldest
//     of any other;
//   - no pod may stay: every pod not already terminating is deleted;
//   - the node no longer exists: pods never bound to it are deleted (bound ones are
//     the pod garbage collector's);
//   - terminating pods are waited for and never deleted again;
//   - a node shutting down is left alone until it is back (shutdown.go).
func (pl *Placement) placeNode(n *nodeState, backoff map[string]time.Time, out *placed) {
	if n.node != nil && nodeShuttingDown(n) {
		n.shuttingDown = true
		return
	}
	if n.node == nil {
		for _, pod := range n.pods {
			if pod.Spec.NodeName == "" && !pl.deleting(pod) {
				out.deletes = append(out.deletes, PodDelete{Pod: pod, Reason: ReasonNodeGone})
			}
		}
		return
	}
	exists := len(n.pods) > 0 || n.creating
	switch {
	case n.verdict.Run && !exists:
		out.creates = append(out.creates, pl.missingPod(n))
	case n.verdict.KeepRunning:
		running := pl.pruneFinished(n, backoff, out)
		if !pl.surge {
			if len(running) > 1 {
				slices.SortFunc(running, olderFirst)
				for _, pod := range running[1:] {
					out.deletes = append(out.deletes, PodDelete{Pod: pod, Reason: ReasonExcessPod})
				}
			}
			return
		}
		if len(running) == 0 {
			if n.verdict.Run && !n.creating {
				out.creates = append(out.creates, pl.missingPod(n))
			}
			return
		}
		pl.keepSurgePair(n, running, out)
	default:
		for _, pod := range n.pods {
			if !pl.deleting(pod) {
				out.deletes = append(out.deletes, PodDelete{Pod: pod, Reason: n.verdict.Reason})
			}
		}
	}
}

// missingPod is the create for a node without a pod, from the current template (the
// update stage may give a joining node an older one).
func (pl *Placement) missingPod(n *nodeState) PodCreate {
	return PodCreate{Node: n.name, Reason: ReasonMissingPod, FailedBefore: pl.failures[n.name]}
}

// pruneFinished plans the deletion of the node's failed and succeeded pods and returns
// the pods that are neither finished nor terminating.
func (pl *Placement) pruneFinished(n *nodeState, backoff map[string]time.Time, out *placed) []*v1.Pod {
	if len(n.pods) == 1 && !pl.deleting(n.pods[0]) && !isTerminal(n.pods[0]) {
		return n.pods // the usual node: one running pod, nothing to prune or copy
	}
	var running []*v1.Pod
	failedDeleted := false
	for _, pod := range n.pods {
		if pl.deleting(pod) {
			continue
		}
		switch pod.Status.Phase {
		case v1.PodFailed:
			failures, until := pl.failedPodBackoff(pod)
			n.failures = max(n.failures, failures, pl.failures[n.name]+1)
			if memo, held := backoff[n.name]; held && memo.After(until) {
				until = memo
			}
			if pl.now.Before(until) {
				out.recheck.within(until.Sub(pl.now))
				n.backoffUntil = until
				continue
			}
			out.deletes = append(out.deletes, PodDelete{Pod: pod, Reason: ReasonFailedPod})
			out.events = append(out.events, Event{Type: v1.EventTypeWarning, Reason: EventFailedDaemonPod,
				Message: fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, n.name)})
			failedDeleted = true
		case v1.PodSucceeded:
			out.deletes = append(out.deletes, PodDelete{Pod: pod, Reason: ReasonSucceededPod})
			out.events = append(out.events, Event{Type: v1.EventTypeNormal, Reason: EventSucceededDaemonPod,
				Message: fmt.Sprintf("Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, n.name)})
		default:
			running = append(running, pod)
		}
	}
	if failedDeleted {
		out.failedPodNodes = append(out.failedPodNodes, n.name)
	}
	return running
}

// keepSurgePair applies the surge rule to a node's running pods: the oldest pod of
// the current revision and the oldest of any other are kept, every other pod is
// deleted. When both are kept, the update stage decides when the old one goes.
func (pl *Placement) keepSurgePair(n *nodeState, running []*v1.Pod, out *placed) {
	slices.SortFunc(running, olderFirst)
	var newest, oldest *v1.Pod
	for _, pod := range running {
		switch {
		case pl.updated(pod) && newest == nil:
			newest = pod
		case !pl.updated(pod) && oldest == nil:
			oldest = pod
		default:
			out.deletes = append(out.deletes, PodDelete{Pod: pod, Reason: ReasonExcessPod})
		}
	}
	if newest != nil && oldest != nil {
		n.surgeNew, n.surgeOld = newest, oldest
	}
}

// failedPodBackoff is what a failed pod's own record says of its node's back-off:
// the failures there so far, this one included, and until when this pod is left
// alone (zero when it is not). A pod of another template generation started over.
func (pl *Placement) failedPodBackoff(pod *v1.Pod) (int, time.Time) {
	if pl.hasGen && pod.Labels[TemplateGenerationLabel] != strconv.FormatInt(pl.gen, 10) {
		return 1, time.Time{}
	}
	before := FailedBefore(pod)
	if before == 0 {
		return 1, time.Time{}
	}
	return before + 1, pod.CreationTimestamp.Add(FailedPodDelay(before))
}

// The failed-pod back-off: a node whose pods keep failing gets its next pod later
// each time.

// AnnotationFailedBefore on a pod the controller creates: how many of the
// DaemonSet's pods had failed on that node, at that template generation, before it
// — the step the node's failed-pod back-off had reached. It lets anyone reading the
// cluster (everynode explain) see the back-off, and a restarted controller take it
// up where it was. Pods created while nothing failed do not carry it.
const AnnotationFailedBefore = "everynode.dev/failed-pods-before"

// Failed-pod back-off bounds: the n-th failed pod on a node holds the next one for
// 1s, 2s, 4s, ... up to 15 minutes.
const (
	FailedPodBackoffInitial = time.Second
	FailedPodBackoffMax     = 15 * time.Minute
)

// FailedPodDelay is how long, after the n-th failed pod on a node is deleted
// (n ≥ 1), the next failed pod there is left alone.
func FailedPodDelay(n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := FailedPodBackoffInitial
	for i := 1; i < n && d < FailedPodBackoffMax; i++ {
		d *= 2
	}
	return min(d, FailedPodBackoffMax)
}

// FailedBefore reads a pod's AnnotationFailedBefore: 0 when absent or invalid.
func FailedBefore(pod *v1.Pod) int {
	n, err := strconv.Atoi(pod.Annotations[AnnotationFailedBefore])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// SetFailedBefore records on a new pod how many pods failed on its node before it.
func SetFailedBefore(pod *v1.Pod, n int) {
	if n <= 0 {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationFailedBefore] = strconv.Itoa(n)
}

// The status counters, as placement counts them.

// counts are the DaemonSet status counters.
type counts struct {
	desired, current, misscheduled, ready, available, updated int32
}

// count computes the status counters over the existing nodes:
//   - desired: nodes where the pod should run (Verdict.Run);
//   - current: of those, nodes with a pod; misscheduled: other nodes with a pod;
//   - ready, available, updated: of the current nodes, those whose oldest pod (bound
//     first) is Ready, available for minReadySeconds, and of the current revision.
//
// It also returns how long until the next Ready pod on an existing node becomes
// available (zero if none is waiting), so the counters can be refreshed and the rollout
// resumed then. Every pod counts, not only the one the counters look at: while
// surging, the new pod beside an older one waits out minReadySeconds before the old
// pod may go, and nothing else would prompt another look.
func (pl *Placement) count(next *recheck) counts {
	var c counts
	for _, n := range pl.nodes {
		next.within(pl.countNode(n, &c))
	}
	return c
}

// countNode adds one node's share to c and returns how long until a Ready pod on it
// becomes available (zero if none is waiting).
func (pl *Placement) countNode(n *nodeState, c *counts) time.Duration {
	var wait time.Duration
	if n.node == nil {
		return 0
	}
	for _, pod := range n.pods {
		if d, ok := untilAvailable(pod, pl.ds.Spec.MinReadySeconds, pl.now); ok && (wait == 0 || d < wait) {
			wait = d
		}
	}
	if !n.verdict.Run {
		if len(n.pods) > 0 {
			c.misscheduled++
		}
		return wait
	}
	c.desired++
	if len(n.pods) == 0 {
		return wait
	}
	c.current++
	pod := slices.MinFunc(n.pods, olderFirst)
	if IsReady(pod) {
		c.ready++
		if pl.available(pod) {
			c.available++
		}
	}
	if pl.updated(pod) {
		c.updated++
	}
	return wait
}
