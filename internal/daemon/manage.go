package daemon

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// place is the placement stage: it applies the placement rules to every node of the
// view, planning the pod creates and deletes they call for.
func (v *view) place(backoff map[string]time.Time, p *Plan) {
	for _, n := range v.nodes {
		v.manage(n, v.surge, backoff, p)
	}
}

// manage applies the placement rules to one node: a pod where one belongs, none where
// none may run, failed and finished pods replaced, excess pods removed.
//
// Rules:
//   - eligible node, no pod (and none being created): create one;
//   - a pod may stay (KeepRunning): failed pods are deleted unless the node's backoff
//     holds them, succeeded pods are deleted; of the rest, one pod is kept (the oldest
//     bound one) or, while surging, at most one old and one new pod (see keepSurge);
//   - no pod may stay: every pod not already terminating is deleted;
//   - the node no longer exists: pods never bound to it are deleted (bound ones are
//     the pod garbage collector's);
//   - terminating pods are waited for and never deleted again.
func (v *view) manage(n *nodeState, surge bool, backoff map[string]time.Time, p *Plan) {
	if n.node == nil {
		for _, pod := range n.pods {
			if pod.Spec.NodeName == "" && !v.deleting(pod) {
				p.Deletes = append(p.Deletes, PodDelete{Pod: pod, Reason: ReasonNodeGone})
			}
		}
		return
	}
	exists := len(n.pods) > 0 || n.creating
	switch {
	case n.verdict.Run && !exists:
		p.Creates = append(p.Creates, v.missingPod(n))
	case n.verdict.KeepRunning:
		running := v.pruneFinished(n, backoff, p)
		if !surge {
			if len(running) > 1 {
				slices.SortFunc(running, olderFirst)
				for _, pod := range running[1:] {
					p.Deletes = append(p.Deletes, PodDelete{Pod: pod, Reason: ReasonExcessPod})
				}
			}
			return
		}
		if len(running) == 0 {
			if n.verdict.Run && !n.creating {
				p.Creates = append(p.Creates, v.missingPod(n))
			}
			return
		}
		v.keepSurge(running, p)
	default:
		for _, pod := range n.pods {
			if !v.deleting(pod) {
				p.Deletes = append(p.Deletes, PodDelete{Pod: pod, Reason: n.verdict.Reason})
			}
		}
	}
}

// missingPod is the create for a node without a pod: from the current template, or
// from the stable one when the rollout policy keeps joining nodes on it and would not
// update this node now. A node the rollout may update gets the current template: it
// may be the very node whose old pod the rollout just deleted.
func (v *view) missingPod(n *nodeState) PodCreate {
	c := PodCreate{Node: n.name, Reason: ReasonMissingPod, FailedBefore: v.failures[n.name]}
	if v.stable != nil && (v.stableGate.admits(n) != "" || !v.stableGate.take()) {
		c.Template = v.stable
	}
	return c
}

// pruneFinished plans the deletion of the node's failed and succeeded pods and returns
// the pods that are neither finished nor terminating.
func (v *view) pruneFinished(n *nodeState, backoff map[string]time.Time, p *Plan) []*v1.Pod {
	if len(n.pods) == 1 && !v.deleting(n.pods[0]) && !isTerminal(n.pods[0]) {
		return n.pods // the usual node: one running pod, nothing to prune or copy
	}
	var running []*v1.Pod
	failedDeleted := false
	for _, pod := range n.pods {
		if v.deleting(pod) {
			continue
		}
		switch pod.Status.Phase {
		case v1.PodFailed:
			failures, until := v.failedPodBackoff(pod)
			n.failures = max(n.failures, failures, v.failures[n.name]+1)
			if memo, held := backoff[n.name]; held && memo.After(until) {
				until = memo
			}
			if v.now.Before(until) {
				p.requeueWithin(until.Sub(v.now))
				n.wait, n.waitUntil = ReasonFailedPodBackoff, until
				continue
			}
			p.Deletes = append(p.Deletes, PodDelete{Pod: pod, Reason: ReasonFailedPod})
			p.Events = append(p.Events, Event{Type: v1.EventTypeWarning, Reason: EventFailedDaemonPod,
				Message: fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, n.name)})
			failedDeleted = true
		case v1.PodSucceeded:
			p.Deletes = append(p.Deletes, PodDelete{Pod: pod, Reason: ReasonSucceededPod})
			p.Events = append(p.Events, Event{Type: v1.EventTypeNormal, Reason: EventSucceededDaemonPod,
				Message: fmt.Sprintf("Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, n.name)})
		default:
			running = append(running, pod)
		}
	}
	if failedDeleted {
		p.FailedPodNodes = append(p.FailedPodNodes, n.name)
	}
	return running
}

// keepSurge applies the surge rule to a node's running pods: the oldest pod of the
// current revision and the oldest of any other are kept, every other pod is deleted;
// the old one goes as soon as it is not Ready or the new one is available.
func (v *view) keepSurge(running []*v1.Pod, p *Plan) {
	slices.SortFunc(running, olderFirst)
	var newest, oldest *v1.Pod // the oldest pod of the current and of older revisions
	for _, pod := range running {
		switch {
		case v.updated(pod) && newest == nil:
			newest = pod
		case !v.updated(pod) && oldest == nil:
			oldest = pod
		default:
			p.Deletes = append(p.Deletes, PodDelete{Pod: pod, Reason: ReasonExcessPod})
		}
	}
	if newest == nil || oldest == nil {
		return
	}
	switch {
	case !IsReady(oldest):
		p.Deletes = append(p.Deletes, PodDelete{Pod: oldest, Reason: ReasonSurgeDone})
	case v.healthy(newest):
		p.Deletes = append(p.Deletes, PodDelete{Pod: oldest, Reason: ReasonSurgeDone})
	}
}
