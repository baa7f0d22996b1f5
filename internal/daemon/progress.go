package daemon

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// Reasons a rollout fails.
const (
	ReasonProgressDeadlineExceeded Reason = "ProgressDeadlineExceeded"
	ReasonRestartLimitExceeded     Reason = "PodRestartLimitExceeded"
)

// rollout is the rollout policy applied to one settled sync of a RollingUpdate.
type rollout struct {
	pol     *Policy
	current *apps.ControllerRevision   // the current template's revision
	unsaved bool                       // current is created by this Plan: nothing to mark yet
	old     []*apps.ControllerRevision // every other revision, oldest first
	gate    *gate
	// oldNodes counts the nodes that should run the pod and run only an older one.
	oldNodes int
	// waiting: a pod of the current revision is not available yet.
	waiting bool
	// failed says why the current revision's rollout failed ("" if it has not);
	// fresh when that was found in this sync.
	failed  Reason
	failMsg string
	fresh   bool
	// recheck is when the progress deadline of a waiting pod runs out.
	recheck time.Duration
	// restoring: current is a revision a rollback restored, not yet available
	// everywhere since (restore.go).
	restoring bool
	restored  restoreMark
}

// assess applies pol to the view: what holds the rollout, and whether it failed.
// since is when the rollout last started moving (a hold ended or a new revision
// began): the progress deadline counts from no earlier than that.
func (v *view) assess(pol *Policy, current *apps.ControllerRevision, old []*apps.ControllerRevision, since time.Time, desired int) *rollout {
	r := &rollout{pol: pol, current: current, old: old, gate: openGate()}
	if !pol.Set {
		return r
	}
	for _, n := range v.nodes {
		if n.node == nil || !n.verdict.Run {
			continue
		}
		cur, old, ok := v.podsOnNode(n)
		if ok && cur == nil && old != nil {
			r.oldNodes++
		}
		if cur != nil && !cur.healthy {
			r.waiting = true
		}
	}
	g := r.gate
	if len(pol.Problems) > 0 {
		g.hold = ReasonInvalidAnnotation
	}
	r.restored, r.restoring = restoring(current)
	if reason, msg, ok := failedMark(current); ok {
		r.failed, r.failMsg = reason, msg
	} else if pol.watchesProgress() && !r.released() {
		// Once available everywhere, a revision is released: a pod that restarts or
		// goes unavailable later is an operational matter, not a failed rollout.
		r.failed, r.failMsg, r.recheck = v.failure(pol, since)
		r.fresh = r.failed != ""
	}
	if r.failed != "" && g.hold == "" {
		g.hold = r.failed
	}
	if pol.Paused && g.hold == "" {
		g.hold = ReasonPaused
	}
	g.canary = pol.Canary
	g.deleteFirst = pol.SurgeDeleteFirst
	if pol.Partition != nil {
		keep, _ := scaled(pol.Partition, desired)
		g.updatable = max(0, r.oldNodes-keep)
	}
	v.setWaves(g, pol)
	return r
}

// released reports whether the current revision was available on every node since
// it last began rolling out.
func (r *rollout) released() bool {
	_, ok := r.current.Annotations[MarkAvailable]
	return ok && !r.restoring
}

// failure checks the current revision's pods against the policy. Under
// max-restarts, a pod whose containers restarted more than that many times, or one
// with a failing container (containerFailure), fails the rollout at once. With a
// progress deadline, the rollout fails when a pod has been waiting to become available
// for that long while no other pod of the revision became available. Otherwise it
// returns when to check again.
func (v *view) failure(pol *Policy, since time.Time) (Reason, string, time.Duration) {
	var lastAvailable, firstWaiting time.Time
	var waiting *v1.Pod
	var waitingOn string
	for _, n := range v.nodes {
		if n.node == nil {
			continue
		}
		for _, pod := range n.pods {
			if !v.updated(pod) || v.deleting(pod) || isTerminal(pod) {
				continue
			}
			if pol.MaxRestarts >= 0 {
				if restarts := v.podRestarts(pod); int64(restarts) > pol.MaxRestarts {
					return ReasonRestartLimitExceeded, fmt.Sprintf("pod %s on node %s restarted %d times, more than max-restarts %d",
						pod.Name, n.name, restarts, pol.MaxRestarts), 0
				}
				if container, how := v.containerFailure(pod); container != "" {
					return ReasonContainerFailing, fmt.Sprintf("pod %s on node %s: container %s %s", pod.Name, n.name, container, how), 0
				}
			}
			if v.healthy(pod) {
				if at := v.healthyAt(pod); at.After(lastAvailable) {
					lastAvailable = at
				}
			} else if since := v.waitingSince(pod); waiting == nil || since.Before(firstWaiting) {
				waiting, waitingOn, firstWaiting = pod, n.name, since
			}
		}
	}
	if waiting == nil || pol.ProgressDeadline == 0 {
		return "", "", 0
	}
	from := latest(firstWaiting, lastAvailable, since)
	if left := from.Add(pol.ProgressDeadline).Sub(v.now); left > 0 {
		return "", "", left
	}
	return ReasonProgressDeadlineExceeded, fmt.Sprintf("no pod of the new revision became available for %v; pod %s on node %s is still not available",
		pol.ProgressDeadline, waiting.Name, waitingOn), 0
}

func restartCount(pod *v1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.InitContainerStatuses {
		n += s.RestartCount
	}
	for _, s := range pod.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// failedMark reads a revision's MarkFailed. A mark counts only while the revision
// keeps the number it failed under: a template changed away and back is renumbered,
// and is tried again.
func failedMark(r *apps.ControllerRevision) (Reason, string, bool) {
	val, ok := r.Annotations[MarkFailed]
	if !ok {
		return "", "", false
	}
	num, rest, _ := strings.Cut(val, " ")
	if n, err := strconv.ParseInt(num, 10, 64); err != nil || n != r.Revision {
		return "", "", false
	}
	reason, msg, _ := strings.Cut(rest, ": ")
	return Reason(reason), msg, true
}

func failedMarkValue(r *apps.ControllerRevision, reason Reason, msg string) string {
	return fmt.Sprintf("%d %s: %s", r.Revision, reason, msg)
}

// rollbackTarget is the revision a failed rollout returns to: the newest one that
// was once available on every node, else the newest earlier one, as
// `kubectl rollout undo` picks. Revisions that failed themselves are passed over.
func rollbackTarget(old []*apps.ControllerRevision) *apps.ControllerRevision {
	var newest *apps.ControllerRevision
	for i := len(old) - 1; i >= 0; i-- {
		r := old[i]
		if _, _, failed := failedMark(r); failed {
			continue
		}
		if _, ok := r.Annotations[MarkAvailable]; ok {
			return r
		}
		if newest == nil {
			newest = r
		}
	}
	return newest
}

// newNodeGate is the gate a node without a pod meets under new-nodes: stable: it gets
// the stable revision unless this gate admits it. The rollout's own gate is assessed
// the same way, except that here nodes without a live pod count against the
// partition as old ones: a node whose old pod the rollout deleted keeps the allowance
// it was updated under, and a node that joins gets the stable revision only when the
// partition would otherwise keep fewer nodes on older revisions than it asks.
func (v *view) newNodeGate(pol *Policy, current *apps.ControllerRevision, old []*apps.ControllerRevision, since time.Time) *gate {
	desired, podless := 0, 0
	for _, n := range v.nodes {
		if n.node == nil || !n.verdict.Run {
			continue
		}
		desired++
		if cur, old, ok := v.podsOnNode(n); ok && cur == nil && old == nil {
			podless++
		}
	}
	r := v.assess(pol, current, old, since, desired)
	if pol.Partition != nil {
		keep, _ := scaled(pol.Partition, desired)
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
