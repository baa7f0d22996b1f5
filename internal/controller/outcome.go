package controller

import (
	"context"
	"errors"
	"net"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/everynode/everynode/internal/daemon"
)

// outcomeUnknown reports whether a write that failed with err may have been carried
// out all the same: its answer was lost (the connection or stream broke, the client
// timed out) or the API server gave up waiting for it (a 504 Timeout). Any other
// answer of the API server means it was not (a ServerTimeout asks for the request
// again); so does an error from before the request was sent: the fence held it
// back, or no connection could be made. Whether such a write happened is asked of
// the API server (createHappened, deleteHappened): a write that did is waited for
// until the cache shows it, so that a pod created after all is not created twice
// and a pod deleted after all is not counted as available.
func outcomeUnknown(err error) bool {
	if err == nil || errors.Is(err, ErrNotLeading) || errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := err.(apierrors.APIStatus); ok || errors.As(err, new(apierrors.APIStatus)) {
		return apierrors.IsTimeout(err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return true
}

// createHappened asks the API server, with a consistent read, whether a pod create
// for node whose outcome is unknown was carried out: the DaemonSet has a pod there
// that the cache does not show yet. (Only the controller creates the DaemonSet's
// pods; one the cache shows is known already.)
func (c *Controller) createHappened(ctx context.Context, ds *apps.DaemonSet, node string) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return false, err
	}
	// No resourceVersion: read from etcd, not from the API server's watch cache.
	list, err := c.client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return false, err
	}
	for i := range list.Items {
		pod := &list.Items[i]
		if ref := metav1.GetControllerOfNoCopy(pod); ref == nil || ref.UID != ds.UID {
			continue
		}
		if on, ok := daemon.TargetNode(pod); !ok || on != node {
			continue
		}
		if _, cached, _ := c.pods.GetByKey(cache.MetaObjectToName(pod).String()); !cached {
			return true, nil
		}
	}
	return false, nil
}

// deleteHappened asks the API server whether a delete of pod whose outcome is
// unknown was carried out: the pod is gone, or being deleted.
func (c *Controller) deleteHappened(ctx context.Context, pod *v1.Pod) (bool, error) {
	cur, err := c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return cur.UID != pod.UID || cur.DeletionTimestamp != nil, nil
}
