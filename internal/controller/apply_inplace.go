package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
)

// updatePods carries out the Plan's in-place updates in parallel: one strategic
// merge patch per pod, which names the pod's UID so that it cannot change a namesake.
// Each is in flight from before it is sent until the cache shows the pod with the
// new revision's hash. A patch the API server rejects (an admission plugin, a field
// it will not change) is remembered, and the pod is replaced instead at the next
// sync.
func (c *Controller) updatePods(ctx context.Context, ds *apps.DaemonSet, key, hash string, updates []daemon.PodUpdate) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, u := range updates {
		c.inflight.expectUpdate(key, u.Pod.UID, hash)
		wg.Go(func() {
			err := c.updatePod(ctx, u)
			switch {
			case err == nil:
				c.metrics.podsUpdated.WithLabelValues(string(u.Reason)).Inc()
				klog.FromContext(ctx).V(4).Info("Updated pod in place", "pod", klog.KObj(u.Pod), "revision", hash)
				c.recorder.Eventf(ds, v1.EventTypeNormal, daemon.EventInPlaceUpdate, "Updated pod in place: %v", u.Pod.Name)
				return
			case apierrors.IsNotFound(err):
				c.inflight.updateDone(key, u.Pod.UID)
				return
			case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
				c.inflight.updateDone(key, u.Pod.UID)
				c.inflight.refuse(key, u.Pod.UID)
				klog.FromContext(ctx).V(2).Info("In-place update rejected; the pod will be replaced", "pod", klog.KObj(u.Pod), "err", err)
				c.queue.Add(key)
			default:
				c.writeFailed(ctx, key, err, func(ctx context.Context) (bool, error) { return c.updateHappened(ctx, u.Pod, hash) },
					func() { c.inflight.updateUnknown(key, u.Pod.UID) }, func() { c.inflight.updateDone(key, u.Pod.UID) })
			}
			c.recorder.Eventf(ds, v1.EventTypeWarning, daemon.EventFailedInPlaceUpdate, "Error updating pod %s in place: %v", u.Pod.Name, err)
			mu.Lock()
			errs = append(errs, fmt.Errorf("updating pod %s in place: %w", u.Pod.Name, err))
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// updatePod sends one in-place update. Tolerations have no merge key, so a patch
// that adds some replaces the whole list: the pod is read first, and the patch
// carries its resourceVersion so that it applies to what was read.
//
// New CPU and memory go first, through the pod's resize subresource (the only way to
// change them), named by the same UID; the patch that makes the pod current follows.
func (c *Controller) updatePod(ctx context.Context, u daemon.PodUpdate) error {
	pods := c.client.CoreV1().Pods(u.Pod.Namespace)
	if len(u.Resources) > 0 {
		if _, err := pods.Patch(ctx, u.Pod.Name, types.StrategicMergePatchType, resizePatch(u), metav1.PatchOptions{FieldManager: c.fieldManager}, "resize"); err != nil {
			return fmt.Errorf("resizing: %w", err)
		}
	}
	var current *v1.Pod
	if len(u.AddTolerations) > 0 {
		var err error
		if current, err = pods.Get(ctx, u.Pod.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		if current.UID != u.Pod.UID {
			return apierrors.NewNotFound(v1.Resource("pods"), u.Pod.Name)
		}
	}
	patch, err := inPlacePatch(u, current)
	if err != nil {
		return err
	}
	_, err = pods.Patch(ctx, u.Pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: c.fieldManager})
	return err
}

// inPlacePatch is the strategic merge patch of an in-place update. current, when
// given, is the pod as just read, whose tolerations the patch extends.
func inPlacePatch(u daemon.PodUpdate, current *v1.Pod) ([]byte, error) {
	type container struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	containers := func(images map[string]string) []container {
		var out []container
		for _, name := range slices.Sorted(maps.Keys(images)) {
			out = append(out, container{Name: name, Image: images[name]})
		}
		return out
	}
	meta := map[string]any{"uid": u.Pod.UID, "labels": u.Labels, "annotations": u.Annotations}
	spec := map[string]any{}
	if cs := containers(u.Images); cs != nil {
		spec["containers"] = cs
	}
	if cs := containers(u.InitImages); cs != nil {
		spec["initContainers"] = cs
	}
	if current != nil {
		meta["resourceVersion"] = current.ResourceVersion
		tolerations := append([]v1.Toleration(nil), current.Spec.Tolerations...)
		for _, t := range u.AddTolerations {
			if !daemon.ContainsToleration(tolerations, t) {
				tolerations = append(tolerations, t)
			}
		}
		spec["tolerations"] = tolerations
	}
	return json.Marshal(map[string]any{"metadata": meta, "spec": spec})
}

// resizePatch is the patch of the resize subresource that gives containers their
// new CPU and memory.
func resizePatch(u daemon.PodUpdate) []byte {
	type container struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources"`
	}
	var cs []container
	for _, name := range slices.Sorted(maps.Keys(u.Resources)) {
		cs = append(cs, container{Name: name, Resources: u.Resources[name]})
	}
	raw, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": u.Pod.UID}, "spec": map[string]any{"containers": cs}})
	return raw
}

// updateHappened reads a pod whose in-place update failed with an unknown outcome:
// it happened if the pod carries the revision's hash (or is gone or replaced).
func (c *Controller) updateHappened(ctx context.Context, pod *v1.Pod, hash string) (bool, error) {
	cur, err := c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return cur.UID != pod.UID || cur.Labels[daemon.HashLabel] == hash, nil
}
