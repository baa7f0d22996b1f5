package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
)

// apply executes a Plan for ds, in the Plan's field order. Ownership and revision
// writes come first and stop the sync on failure, since everything after them assumes
// they happened. Pod changes are all attempted; their errors are returned together.
// The status is written even when pod changes failed, so that it stays true.
func (c *Controller) apply(ctx context.Context, ds *apps.DaemonSet, key string, p *daemon.Plan) error {
	if err := c.applyOwnership(ctx, ds, p); err != nil {
		if errors.Is(err, errBeingDeleted) {
			return nil // the DaemonSet's update event brings it back, to be left alone
		}
		return err
	}
	if err := c.applyHistory(ctx, ds, p); err != nil {
		if isNamespaceTerminating(err) {
			return nil // nothing more can be created here; the namespace's deletion ends it
		}
		return err
	}
	podErr := errors.Join(c.deletePods(ctx, ds, key, p.Deletes), c.createPods(ctx, ds, key, p), c.updatePods(ctx, ds, key, p.Hash, p.Updates))
	for _, node := range p.FailedPodNodes {
		c.backoff.next(key, ds.Generation, node, failedBefore(p.Deletes, node))
		c.metrics.failedPods.Inc()
	}
	markErr := c.markRevisions(ctx, ds, p)
	var pruneErr error
	for _, r := range p.PruneRevisions {
		if err := c.client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, preconditionUID(r.UID)); err != nil && !apierrors.IsNotFound(err) {
			pruneErr = fmt.Errorf("deleting old revision %s: %w", r.Name, err)
		}
	}
	statusErr := errors.Join(c.writeStatus(ctx, ds, key, p.Status), c.writeConditions(ctx, ds, key, p.Conditions))
	c.metrics.observeWaiting(ds, p.Waiting)
	c.metrics.observeUnavailable(ds, p.Unavailable)
	c.metrics.observeProgressing(ds, progressingAfter(ds, p))
	for _, e := range p.Events {
		c.recorder.Event(ds, e.Type, e.Reason, e.Message)
	}
	var rollbackErr error
	if markErr == nil {
		rollbackErr = c.rollBack(ctx, ds, key, p)
	}
	return errors.Join(podErr, markErr, pruneErr, statusErr, rollbackErr)
}

// applyHistory writes the revision changes: missing hash labels, the current
// revision (created or renumbered), then pods of duplicate revisions relabelled before
// the duplicates are deleted.
func (c *Controller) applyHistory(ctx context.Context, ds *apps.DaemonSet, p *daemon.Plan) error {
	revisions := c.client.AppsV1().ControllerRevisions(ds.Namespace)
	for _, r := range p.LabelRevisions {
		if _, err := revisions.Update(ctx, r, metav1.UpdateOptions{FieldManager: c.fieldManager}); err != nil {
			return fmt.Errorf("labelling revision %s: %w", r.Name, err)
		}
	}
	if r := p.CreateRevision; r != nil {
		if err := c.createRevision(ctx, ds, r); err != nil {
			return err
		}
	}
	if r := p.RenumberRevision; r != nil {
		if _, err := revisions.Update(ctx, r, metav1.UpdateOptions{FieldManager: c.fieldManager}); err != nil {
			return fmt.Errorf("renumbering revision %s: %w", r.Name, err)
		}
	}
	for _, pod := range p.Relabel {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, daemon.HashLabel, p.Hash)
		if _, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, mergePatch, patch, metav1.PatchOptions{FieldManager: c.fieldManager}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("relabelling pod %s to revision %s: %w", pod.Name, p.Hash, err)
		}
	}
	for _, r := range p.DedupRevisions {
		if err := revisions.Delete(ctx, r.Name, preconditionUID(r.UID)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting duplicate revision %s: %w", r.Name, err)
		}
	}
	return nil
}

// createRevision creates the current revision. If the name is taken by the very
// revision we want (our own earlier create, not yet in the cache) that is success;
// anything else is returned, and the next sync, seeing the holder in its cache,
// decides what the collision means.
func (c *Controller) createRevision(ctx context.Context, ds *apps.DaemonSet, r *apps.ControllerRevision) error {
	revisions := c.client.AppsV1().ControllerRevisions(ds.Namespace)
	_, err := revisions.Create(ctx, r, metav1.CreateOptions{FieldManager: c.fieldManager})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating revision %s: %w", r.Name, err)
		}
		return nil
	}
	existing, getErr := revisions.Get(ctx, r.Name, metav1.GetOptions{})
	if getErr != nil {
		return fmt.Errorf("reading revision %s after a name clash: %w", r.Name, getErr)
	}
	if ref := metav1.GetControllerOfNoCopy(existing); ref != nil && ref.UID == ds.UID && string(existing.Data.Raw) == string(r.Data.Raw) {
		return nil
	}
	return fmt.Errorf("revision name %s is taken by a different revision; retrying once the cache shows it", r.Name)
}

// writeStatus stores status, if there is one to store, unless the status pace holds
// it back: then the DaemonSet is looked at again when the pace allows. A conflict
// means the cache is behind: the DaemonSet's update event requeues it with fresher
// data.
func (c *Controller) writeStatus(ctx context.Context, ds *apps.DaemonSet, key string, status *apps.DaemonSetStatus) error {
	if status == nil {
		c.metrics.observeStatus(ds, &ds.Status)
		return nil
	}
	now := c.clock.Now()
	busy := func() bool { return c.writes.busy(key) }
	if wait := c.pace.wait(key, &ds.Status, status, now, busy); wait > 0 {
		klog.FromContext(ctx).V(4).Info("Status write held back by the status pace", "wait", wait)
		c.queue.AddAfter(key, wait)
		return nil
	}
	next := ds.DeepCopy()
	next.Status = *status
	written, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: c.fieldManager})
	if err != nil {
		if apierrors.IsConflict(err) {
			// A newer DaemonSet exists than the one this sync built on: another
			// writer's, or an earlier write of ours whose answer was lost. Its
			// update event may change only the status, which wakes nothing, and
			// when the watch is behind it may be long on its way: read it now, and
			// let the next sync, shortly, build on it as on a write of ours.
			klog.FromContext(ctx).V(4).Info("Status write conflicted; reading the newer DaemonSet")
			if fresh, getErr := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{}); getErr == nil {
				c.written.note(key, ds.ResourceVersion, fresh)
			}
			c.queue.AddAfter(key, statusConflictDelay)
			return nil
		}
		return fmt.Errorf("writing status: %w", err)
	}
	c.written.note(key, ds.ResourceVersion, written)
	c.pace.wrote(key, now)
	c.metrics.observeStatus(ds, status)
	return nil
}

// statusConflictDelay is how long after a status write conflict the DaemonSet is
// looked at again.
const statusConflictDelay = 50 * time.Millisecond

// preconditionUID makes a delete apply only to the object with that UID, never to a
// namesake created since the cache last saw it.
func preconditionUID(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(uid))}
}

// isNamespaceTerminating reports an error from creating in a namespace being deleted:
// every further create would fail the same way, and nothing needs doing.
func isNamespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause)
}

// failedBefore is the most failures recorded before any failed pod of node the Plan
// deletes (daemon.AnnotationFailedBefore).
func failedBefore(deletes []daemon.PodDelete, node string) int {
	n := 0
	for _, d := range deletes {
		if d.Reason == daemon.ReasonFailedPod && d.Pod.Spec.NodeName == node {
			n = max(n, daemon.FailedBefore(d.Pod))
		}
	}
	return n
}

// progressingAfter is the DaemonSet's Progressing condition once the Plan is
// applied: the one it writes, else the one it has.
func progressingAfter(ds *apps.DaemonSet, p *daemon.Plan) *apps.DaemonSetCondition {
	if c := daemon.Condition(p.Conditions, daemon.ConditionProgressing); c != nil {
		return c
	}
	status := &ds.Status
	if p.Status != nil {
		status = p.Status
	}
	return daemon.Progressing(status)
}
