package nodesim

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// syncPod plays kubelet for one pod: it gathers what decidePod needs, then
// carries out its decision.
func (s *Simulator) syncPod(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := s.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		s.forgetPod(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	node := s.simulatedNode(pod.Spec.NodeName)
	if node == nil {
		s.forgetPod(key)
		return 0, nil
	}
	if stopped, _ := kubeletStopped(node); stopped {
		return 0, nil // looked at again when the kubelet starts (podsDependOnChange)
	}
	if isTerminal(pod.Status.Phase) && pod.DeletionTimestamp == nil {
		// Finished for good: its IP goes back to the node's range.
		s.forgetPod(key)
		return 0, nil
	}
	in := podInput{
		Pod:       pod,
		Behaviour: s.behaviours.of(klog.FromContext(ctx), key, pod),
		HostIP:    internalIP(node),
		StopDelay: s.cfg.PodStopDelay,
		// The kubelet's back-off, as the node's configuration sets it.
		CrashLoopBackOff: s.cfg.CrashLoopBackOff,
	}
	in.NodeReady, _ = nodeReadyKnob(node)
	in.ShuttingDown, _ = shuttingDown(node)
	if fs, err := nodeFailures(node); err == nil && len(fs) > 0 {
		if !started(pod) {
			in.Behaviour.Failures = append(slices.Clip(in.Behaviour.Failures), fs...)
		}
		in.PullFails = pullFailure(fs)
	}
	if in.Unpullable = unpullable(node); len(in.Unpullable) > 0 && !started(pod) {
		in.Behaviour.Failures = append(slices.Clip(in.Behaviour.Failures), unpullableFailures(pod, in.Unpullable)...)
	}
	if pod.DeletionTimestamp == nil {
		if in.HostIP == "" || (!pod.Spec.HostNetwork && node.Spec.PodCIDR == "" && pod.Status.PodIP == "") {
			// The node is not set up yet; its update queues the pod again.
			return 0, nil
		}
		if !pod.Spec.HostNetwork {
			if in.PodIP, err = s.ips.assign(key, pod.UID, node.Name, node.Spec.PodCIDR, pod.Status.PodIP); err != nil {
				return 0, err
			}
		}
	}
	d := decidePod(in, s.clock.Now())
	switch {
	case d.Delete:
		return 0, s.removePod(ctx, pod)
	case d.Status != nil:
		if err := s.writePodStatus(ctx, pod, d.Status); err != nil {
			return 0, err
		}
	}
	return d.RequeueAfter, nil
}

// forgetPod releases what the simulator holds for a pod.
func (s *Simulator) forgetPod(key string) {
	s.ips.release(key)
	s.behaviours.forget(key)
}

func (s *Simulator) writePodStatus(ctx context.Context, pod *v1.Pod, status *v1.PodStatus) error {
	updated := pod.DeepCopy()
	updated.Status = *status
	if _, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("updating status of pod %s: %w", podKey(pod), err)
	}
	var restarts int32
	for _, cs := range status.ContainerStatuses {
		restarts = max(restarts, cs.RestartCount)
	}
	klog.FromContext(ctx).V(4).Info("Updated pod status", "pod", klog.KObj(pod), "node", pod.Spec.NodeName,
		"phase", status.Phase, "ready", podReady(status), "restarts", restarts)
	return nil
}

// removePod finishes the deletion of a pod, unless it is already gone or replaced.
func (s *Simulator) removePod(ctx context.Context, pod *v1.Pod) error {
	err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or the name now belongs to another pod.
	case err != nil:
		return fmt.Errorf("removing pod %s: %w", podKey(pod), err)
	default:
		klog.FromContext(ctx).V(4).Info("Removed pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
	}
	return nil
}

func podReady(status *v1.PodStatus) bool {
	for _, c := range status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
