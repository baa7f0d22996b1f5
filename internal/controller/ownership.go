package controller

import (
	"context"
	"encoding/json"
	"fmt"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

const (
	mergePatch     = types.MergePatchType
	strategicPatch = types.StrategicMergePatchType
)

// errBeingDeleted stops a sync that would adopt for a DaemonSet found, on a fresh
// read, to be going away.
var errBeingDeleted = fmt.Errorf("DaemonSet is being deleted; not adopting")

// applyOwnership adopts and releases the Plan's pods and revisions. Before the first
// adoption it reads the DaemonSet from the API server, not the cache, and adopts
// nothing if it is gone, replaced or being deleted: an orphan must not be tied to an
// owner the garbage collector is about to remove.
func (c *Controller) applyOwnership(ctx context.Context, ds *apps.DaemonSet, p *daemon.Plan) error {
	if len(p.Adopt)+len(p.AdoptRevisions) > 0 {
		fresh, err := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("re-reading DaemonSet before adopting: %w", err)
		}
		if fresh.UID != ds.UID || fresh.DeletionTimestamp != nil {
			return errBeingDeleted
		}
	}
	pods := func(ns string) patcher {
		return func(ctx context.Context, name string, data []byte) error {
			_, err := c.client.CoreV1().Pods(ns).Patch(ctx, name, strategicPatch, data, metav1.PatchOptions{FieldManager: c.fieldManager})
			return err
		}
	}
	revisions := func(ctx context.Context, name string, data []byte) error {
		_, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Patch(ctx, name, strategicPatch, data, metav1.PatchOptions{FieldManager: c.fieldManager})
		return err
	}
	ref := daemon.ControllerRef(ds)
	release := map[string]any{"$patch": "delete", "uid": ds.UID}
	for _, pod := range p.Adopt {
		if err := setOwner(ctx, pods(pod.Namespace), pod.Name, pod.UID, ref); err != nil {
			return fmt.Errorf("adopting pod %s: %w", pod.Name, err)
		}
	}
	for _, pod := range p.Release {
		if err := setOwner(ctx, pods(pod.Namespace), pod.Name, pod.UID, release); err != nil {
			return fmt.Errorf("releasing pod %s: %w", pod.Name, err)
		}
	}
	for _, r := range p.AdoptRevisions {
		if err := setOwner(ctx, revisions, r.Name, r.UID, ref); err != nil {
			return fmt.Errorf("adopting revision %s: %w", r.Name, err)
		}
	}
	for _, r := range p.ReleaseRevisions {
		if err := setOwner(ctx, revisions, r.Name, r.UID, release); err != nil {
			return fmt.Errorf("releasing revision %s: %w", r.Name, err)
		}
	}
	return nil
}

// patcher sends a strategic merge patch to one kind of object.
type patcher func(ctx context.Context, name string, data []byte) error

// setOwner merges one owner reference entry (a reference to add, or a deletion
// directive) into the object's owner references. The patch carries the object's UID,
// so it fails rather than touch a namesake; an object that is gone or was replaced
// needs nothing more.
func setOwner(ctx context.Context, patch patcher, name string, uid types.UID, entry any) error {
	var p ownerPatch
	p.Metadata.OwnerReferences = []any{entry}
	p.Metadata.UID = uid
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	err = patch(ctx, name, data)
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

// ownerPatch is a strategic merge patch of an object's owner references, applying
// only to the object with the given UID.
type ownerPatch struct {
	Metadata struct {
		OwnerReferences []any     `json:"ownerReferences"`
		UID             types.UID `json:"uid"`
	} `json:"metadata"`
}
