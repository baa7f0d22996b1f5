package controller

import (
	"context"
	"encoding/json"
	"fmt"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
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
func (c *Controller) rollBack(ctx context.Context, ds *apps.DaemonSet, p *daemon.Plan) error {
	if r := p.Rollback; r != nil {
		// The revision's Data is a strategic merge patch that replaces the template,
		// exactly what `kubectl rollout undo` applies.
		if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.StrategicMergePatchType, r.Data.Raw, metav1.PatchOptions{FieldManager: c.fieldManager}); err != nil {
			return fmt.Errorf("rolling back to revision %d (%s): %w", r.Revision, r.Name, err)
		}
		// The template changed under the status just written: syncs wait for the
		// cache to show the rolled-back DaemonSet.
		c.written.forget(cache.MetaObjectToName(ds).String())
		klog.FromContext(ctx).Info("Rolled back", "revision", r.Revision, "controllerRevision", r.Name)
	}
	return nil
}

// writeCondition stores one condition of the DaemonSet's status on its own: a
// strategic merge patch of the status's conditions, which merge by type, touches no
// counter and no other condition. Companion mode stores its Progressing condition so:
// the cluster's own DaemonSet controller writes the rest of the status with
// resourceVersion preconditions, so neither write can undo the other.
func (c *Controller) writeCondition(ctx context.Context, ds *apps.DaemonSet, key string, cond *apps.DaemonSetCondition) error {
	if cond == nil {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []apps.DaemonSetCondition{*cond}}})
	if err != nil {
		return err
	}
	written, err := c.client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: c.fieldManager}, "status")
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the %s condition: %w", cond.Type, err)
	}
	c.written.note(key, ds.ResourceVersion, written)
	return nil
}
