package controller

import (
	"context"
	"fmt"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// LabelProbe marks the DaemonSet full mode creates at start to find out whether
// another DaemonSet controller is active; everynode itself never syncs it.
const LabelProbe = "everynode.dev/probe"

// probeInterval is how often the probe DaemonSet is read while waiting for an answer.
const probeInterval = 100 * time.Millisecond

// probeOtherController finds out, before full mode writes anything, whether another
// DaemonSet controller (kube-controller-manager's, left on) runs in the cluster: it
// creates a DaemonSet that selects no node, which any DaemonSet controller answers
// within moments by writing its status, and waits up to timeout for that. It
// returns the field manager that answered ("" for none) and deletes the probe.
func (c *Controller) probeOtherController(ctx context.Context, namespace string, timeout time.Duration) (string, error) {
	logger := klog.FromContext(ctx)
	labels := map[string]string{LabelProbe: "true"}
	probe := &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "everynode-probe-", Namespace: namespace, Labels: labels},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					// No node carries this label: the probe never runs a pod.
					NodeSelector: map[string]string{LabelProbe: "no-node-has-this-label"},
					Containers:   []v1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	dsClient := c.client.AppsV1().DaemonSets(namespace)
	created, err := dsClient.Create(ctx, probe, metav1.CreateOptions{FieldManager: c.fieldManager})
	if err != nil {
		return "", fmt.Errorf("creating the probe DaemonSet in namespace %s: %w", namespace, err)
	}
	defer func() {
		// The probe goes even when ctx has ended.
		del, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := dsClient.Delete(del, created.Name, preconditionUID(created.UID)); err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Deleting the probe DaemonSet failed; delete it by hand", "daemonset", klog.KObj(created))
		}
	}()
	var answered string
	err = wait.PollUntilContextTimeout(ctx, probeInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ds, err := dsClient.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range ds.ManagedFields {
			if wroteStatus(e) && e.Manager != c.fieldManager {
				answered = e.Manager
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil && ctx.Err() != nil {
		return "", ctx.Err()
	}
	return answered, nil
}

// isProbe reports whether ds is a probe DaemonSet, which everynode leaves alone.
func isProbe(ds *apps.DaemonSet) bool { return ds.Labels[LabelProbe] == "true" }
