package nodesim

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// syncNode registers a configured node that is missing, gives a simulated node a
// pod range if it has none, and writes its status when it differs from
// desiredNodeStatus.
func (s *Simulator) syncNode(ctx context.Context, name string) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	node, err := s.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		if _, ok := s.registering.value(name); ok {
			return 0, s.register(ctx, name)
		}
		s.indexes.release(name)
		s.nodeWarnings.remove(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !isSimulated(node) {
		return 0, nil
	}
	s.registering.remove(name)
	index, err := s.indexes.assign(name, node.Spec.PodCIDR)
	if err != nil {
		return 0, err
	}
	if node.Spec.PodCIDR == "" {
		node = node.DeepCopy()
		cidr := podCIDR(index).String()
		node.Spec.PodCIDR, node.Spec.PodCIDRs = cidr, []string{cidr}
		if node, err = s.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return 0, fmt.Errorf("setting pod range of node %s: %w", name, err)
		}
		logger.V(2).Info("Gave node a pod range", "node", klog.KObj(node), "podCIDR", cidr)
	}
	ready, readyErr := nodeReadyKnob(node)
	_, failErr := nodeFailures(node)
	stopped, kubeletErr := kubeletStopped(node)
	shutdown, shutdownErr := shuttingDown(node)
	if knobErr := errors.Join(readyErr, failErr, kubeletErr, shutdownErr); knobErr == nil {
		s.nodeWarnings.remove(name)
	} else if raw := node.Annotations[AnnotationReady] + "\x00" + node.Annotations[AnnotationFail] + "\x00" + node.Annotations[AnnotationKubelet] + "\x00" + node.Annotations[AnnotationShutdown]; s.warnOnce(name, raw) {
		logger.Info("Ignoring invalid simulation annotation", "node", klog.KObj(node), "err", knobErr)
	}
	if stopped {
		return 0, nil // a kubelet that is down reports nothing
	}
	notReady := ""
	switch {
	case shutdown:
		notReady = messageShuttingDown
	case !ready:
		notReady = messageKubeletNotReady
	case !s.networkReady(logger, node):
		notReady = messageNetworkNotReady
	}
	status := desiredNodeStatus(node, index, notReady, s.clock.Now())
	if apiequality.Semantic.DeepEqual(&status, &node.Status) {
		return 0, nil
	}
	node = node.DeepCopy()
	node.Status = status
	if _, err := s.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("updating status of node %s: %w", name, err)
	}
	logger.V(2).Info("Updated node status", "node", klog.KObj(node), "ready", notReady == "")
	return 0, nil
}

// warnOnce reports whether the invalid value of a node's knob is new.
func (s *Simulator) warnOnce(node, value string) bool {
	if last, ok := s.nodeWarnings.value(node); ok && last == value {
		return false
	}
	s.nodeWarnings.add(node, value)
	return true
}

// register creates one of the configured nodes.
func (s *Simulator) register(ctx context.Context, name string) error {
	index, err := s.indexes.assign(name, "")
	if err != nil {
		return err
	}
	node := newNode(name, index, s.clock.Now())
	if s.cfg.NodeReadyRequires != "" {
		// No pod runs on a node that registers: it starts out waiting for its network.
		node.Status = desiredNodeStatus(node, index, messageNetworkNotReady, s.clock.Now())
	}
	_, err = s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		// Either our own earlier create, not yet in the cache, or a node someone
		// else made without the label: then it is theirs, and left alone.
		klog.FromContext(ctx).V(2).Info("Node already exists; not registering it", "node", klog.KRef("", name))
	case err != nil:
		return fmt.Errorf("registering node %s: %w", name, err)
	default:
		klog.FromContext(ctx).V(2).Info("Registered node", "node", klog.KRef("", name), "index", index)
	}
	s.registering.remove(name)
	return nil
}
