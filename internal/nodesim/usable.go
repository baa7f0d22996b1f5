package nodesim

import v1 "k8s.io/api/core/v1"

// Usable reports whether a node is ready for pods the way a user waits for it: its
// Ready condition is True and the node lifecycle controller has lifted the not-ready
// and unreachable taints it places on new or failing nodes.
func Usable(node *v1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
