package nodesim

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// A real node turns Ready only once its network plugin runs, and the plugin is
// itself a pod (a CNI agent's DaemonSet pod, which tolerates the node's not-ready
// taints). The simulator plays that when asked (Config.NodeReadyRequires, or a
// node's AnnotationReadyRequires): the node reports NotReady, network not ready,
// until a pod matching the selector is Running on it.

// readyRequires is the selector a node's readiness waits for: nil for none.
func (s *Simulator) readyRequires(node *v1.Node) (labels.Selector, error) {
	raw, ok := node.Annotations[AnnotationReadyRequires]
	if !ok {
		raw = s.cfg.NodeReadyRequires
	}
	if raw == "" {
		return nil, nil
	}
	return labels.Parse(raw)
}

// networkReady reports whether the node's network is up: nothing is required, a
// pod that matches what is required is Running on it, or the node is Ready already
// (a network plugin, once set up, outlives a restart of its agent's pod). An
// invalid selector on the node is logged and requires nothing.
func (s *Simulator) networkReady(logger klog.Logger, node *v1.Node) bool {
	if i := findNodeCondition(node.Status.Conditions, v1.NodeReady); i >= 0 && node.Status.Conditions[i].Status == v1.ConditionTrue {
		return true
	}
	sel, err := s.readyRequires(node)
	if err != nil {
		if s.warnOnce(node.Name, "ready-requires\x00"+node.Annotations[AnnotationReadyRequires]) {
			logger.Info("Ignoring invalid simulation annotation", "node", klog.KObj(node), "annotation", AnnotationReadyRequires, "err", err)
		}
		return true
	}
	if sel == nil {
		return true
	}
	objs, _ := s.podIndex.ByIndex(podsByNodeIndex, node.Name)
	for _, obj := range objs {
		if pod, ok := obj.(*v1.Pod); ok && pod.DeletionTimestamp == nil && pod.Status.Phase == v1.PodRunning && sel.Matches(labels.Set(pod.Labels)) {
			return true
		}
	}
	return false
}

// podGatesNode queues the node a pod is bound to when the pod's phase or presence
// changes: it may be what the node's readiness waits for.
func (s *Simulator) podGatesNode(old, cur *v1.Pod) {
	pod := cur
	if pod == nil {
		pod = old
	}
	if pod == nil || pod.Spec.NodeName == "" {
		return
	}
	if old != nil && cur != nil && old.Status.Phase == cur.Status.Phase && (old.DeletionTimestamp == nil) == (cur.DeletionTimestamp == nil) {
		return
	}
	if s.simulatedNode(pod.Spec.NodeName) != nil {
		s.nodeQueue.Add(pod.Spec.NodeName)
	}
}
