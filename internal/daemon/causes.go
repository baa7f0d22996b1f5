package daemon

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Why a pod is unavailable: every node that should run the DaemonSet's pod and has
// no available one is given one cause, from one vocabulary, so that "3 unavailable"
// says whether a release, a node or an eviction is to blame. The node comes first (a
// sick or stopping node explains its pod), then the pod.

// The causes of an unavailable pod, besides the node's troubles (ReasonNodeNotReady,
// ReasonNodeShuttingDown, ReasonNodeMaintenance).
const (
	CauseUpdating Reason = "Updating" // the rollout took the node's old pod away; the new one is not there yet
	CauseStarting Reason = "Starting" // the node's pod is being created, or has not been available for minReadySeconds yet
	CauseFailing  Reason = "Failing"  // a container fails (Detail: the kubelet's reason), or the pod failed
	CauseEvicted  Reason = "Evicted"  // the pod was evicted: by the kubelet for pressure, the eviction API, preemption or a taint
	CauseUnknown  Reason = "Unknown"  // not Ready, for no reason the pod or node tells
)

// Causes lists every cause of an unavailable pod.
func Causes() []Reason {
	return []Reason{CauseUpdating, CauseStarting, CauseFailing, ReasonNodeNotReady, ReasonNodeShuttingDown, ReasonNodeMaintenance, CauseEvicted, CauseUnknown}
}

// Unavailable is why one node has no available pod.
type Unavailable struct {
	Cause Reason
	// Detail is the container's reason when Cause is CauseFailing (CrashLoopBackOff,
	// ErrImagePull, OOMKilled, ...), or the failed pod's; "" otherwise.
	Detail string
}

// CauseCount counts the nodes whose pod is unavailable for one cause.
type CauseCount struct {
	Unavailable
	Nodes int
}

// unavailableOn says why node n, which should run the pod, has no available one;
// ok is false when it has one (or should not run one).
func (pl *Placement) unavailableOn(n *nodeState) (Unavailable, bool) {
	if n.node == nil || !n.verdict.Run {
		return Unavailable{}, false
	}
	var pod *v1.Pod
	if len(n.pods) > 0 {
		pod = slices.MinFunc(n.pods, olderFirst) // the pod the status counters read
		if IsReady(pod) && pl.available(pod) {
			return Unavailable{}, false
		}
	}
	if cause, _, _ := NodeTrouble(n.node); cause != "" {
		return Unavailable{Cause: cause}, true
	}
	if n.shuttingDown {
		return Unavailable{Cause: ReasonNodeShuttingDown}, true
	}
	switch {
	case pod == nil:
		return Unavailable{Cause: CauseStarting}, true
	case pl.deleting(pod) && !pl.updated(pod):
		return Unavailable{Cause: CauseUpdating}, true
	case pl.deleting(pod):
		return Unavailable{Cause: CauseUnknown}, true
	case pod.Status.Phase == v1.PodFailed:
		if evicted(pod) {
			return Unavailable{Cause: CauseEvicted}, true
		}
		return Unavailable{Cause: CauseFailing, Detail: failedPodReason(pod)}, true
	}
	if reason := failingContainer(pod); reason != "" {
		return Unavailable{Cause: CauseFailing, Detail: reason}, true
	}
	if pl.updated(pod) {
		return Unavailable{Cause: CauseStarting}, true
	}
	return Unavailable{Cause: CauseUnknown}, true
}

// unavailable counts the causes over every node, most nodes first.
func (pl *Placement) unavailable() []CauseCount {
	if pl.counts.available >= pl.counts.desired {
		return nil
	}
	byCause := map[Unavailable]int{}
	for _, n := range pl.nodes {
		if u, ok := pl.unavailableOn(n); ok {
			byCause[u]++
		}
	}
	return causeCounts(byCause)
}

// causeCounts lists the counts of byCause, most nodes first; nil when none is
// above zero.
func causeCounts(byCause map[Unavailable]int) []CauseCount {
	var out []CauseCount
	for u, nodes := range byCause {
		if nodes > 0 {
			out = append(out, CauseCount{Unavailable: u, Nodes: nodes})
		}
	}
	slices.SortFunc(out, func(a, b CauseCount) int {
		if c := cmp.Compare(b.Nodes, a.Nodes); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Cause, b.Cause), cmp.Compare(a.Detail, b.Detail))
	})
	return out
}

// evicted reports whether the pod was evicted rather than failed by itself.
func evicted(pod *v1.Pod) bool {
	if pod.Status.Reason == "Evicted" {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason != v1.PodReasonTerminationByKubelet {
			return true
		}
	}
	return false
}

// failingContainer is the kubelet's reason for the first failing container of the
// pod, init containers first; "" when none fails.
func failingContainer(pod *v1.Pod) string {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if reason, _ := failingReason(cs); reason != "" && (reason != oomKilled || !cs.Ready) {
				return reason
			}
		}
	}
	return ""
}

// failedPodReason is the reason a failed pod gives: its own, else its first
// terminated container's.
func failedPodReason(pod *v1.Pod) string {
	if pod.Status.Reason != "" {
		return pod.Status.Reason
	}
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && t.Reason != "" {
				return t.Reason
			}
		}
	}
	return ""
}

// String is the cause, with its detail in parentheses when there is one.
func (u Unavailable) String() string {
	if u.Detail == "" {
		return string(u.Cause)
	}
	return string(u.Cause) + " (" + u.Detail + ")"
}

// FormatCauses says the counts on one line, most first: "2 NodeNotReady, 1 Failing
// (CrashLoopBackOff)"; "" for none.
func FormatCauses(causes []CauseCount) string {
	parts := make([]string, len(causes))
	for i, c := range causes {
		parts[i] = strconv.Itoa(c.Nodes) + " " + c.String()
	}
	return strings.Join(parts, ", ")
}
