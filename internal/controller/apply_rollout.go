package controller

import (
	"context"
	"encoding/json"
	"fmt"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
)

// markRevisions writes the rollout's marks on revisions, one patch per revision. A
// failed revision is marked before the DaemonSet leaves it, so it is not tried again.
func (c *Controller) markRevisions(ctx context.Context, ds *apps.DaemonSet, p *daemon.Plan) error {
	revisions := c.client.AppsV1().ControllerRevisions(ds.Namespace)
	var order []string
	marks := map[string]map[string]any{}
	for _, m := range p.MarkRevisions {
		name := m.Revision.Name
		if marks[name] == nil {
			marks[name] = map[string]any{}
			order = append(order, name)
		}
		var value any = m.Value
		if m.Remove {
			value = nil // a merge patch removes a key set to null
		}
		marks[name][m.Key] = value
	}
	for _, name := range order {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": marks[name]}})
		if err != nil {
			return err
		}
		if _, err := revisions.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: c.fieldManager}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking revision %s: %w", name, err)
		}
	}
	return nil
}

// rollBack restores the template of the Plan's rollback revision. It comes after the
// status write, which records why, since it changes the DaemonSet under that write.
//
// The rollback was decided from the cache, which can be behind the API server. The
// patch therefore names the resourceVersion of the newest DaemonSet this sync knows
// (the one its own status writes returned, else the one it decided from): if the
// DaemonSet changed since — a user's newer template — the API server refuses it with
// a Conflict, and the next sync decides again from the newer DaemonSet. The
// DaemonSet the patch returns is noted as the controller's own write, so that the
// syncs that come before the cache shows it decide from the rolled-back template,
// not from the failed one again.
func (c *Controller) rollBack(ctx context.Context, ds *apps.DaemonSet, key string, p *daemon.Plan) error {
	r := p.Rollback
	if r == nil {
		return nil
	}
	base := ds.ResourceVersion
	if w := c.written.last(key); w != nil && w.UID == ds.UID {
		base = w.ResourceVersion
	}
	// The revision's Data is a strategic merge patch that replaces the template,
	// exactly what `kubectl rollout undo` applies.
	var patch map[string]any
	if err := json.Unmarshal(r.Data.Raw, &patch); err != nil {
		return fmt.Errorf("reading revision %s to roll back to: %w", r.Name, err)
	}
	patch["metadata"] = map[string]any{"resourceVersion": base}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	rolled, err := c.client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: c.fieldManager})
	if err != nil {
		if apierrors.IsConflict(err) {
			klog.FromContext(ctx).V(2).Info("Rollback not written: the DaemonSet changed since it was decided; deciding again", "revision", r.Revision)
		}
		return fmt.Errorf("rolling back to revision %d (%s): %w", r.Revision, r.Name, err)
	}
	c.written.note(key, base, rolled)
	klog.FromContext(ctx).Info("Rolled back", "revision", r.Revision, "controllerRevision", r.Name)
	return nil
}

// writeConditions stores conditions of the DaemonSet's status on their own: a
// strategic merge patch of the status's conditions, which merge by type, touches no
// counter and no other condition. Companion mode stores the rollout's conditions so
// (and full mode its ControllerConflict): the cluster's own DaemonSet controller
// writes the rest of the status with resourceVersion preconditions, so neither
// write can undo the other.
func (c *Controller) writeConditions(ctx context.Context, ds *apps.DaemonSet, key string, conds []apps.DaemonSetCondition) error {
	if len(conds) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return err
	}
	written, err := c.client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: c.fieldManager}, "status")
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the %s condition: %w", conds[0].Type, err)
	}
	c.written.note(key, ds.ResourceVersion, written)
	return nil
}
