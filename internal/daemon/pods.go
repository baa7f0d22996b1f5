package daemon

import (
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TargetNode returns the node a daemon pod belongs to: its spec.nodeName once bound,
// or before that the single node its required affinity pins it to with
// `matchFields metadata.name In [node]`. ok is false for a pod pinned to no one node.
func TargetNode(pod *v1.Pod) (node string, ok bool) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, true
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if req.Key == metav1.ObjectNameField && req.Operator == v1.NodeSelectorOpIn {
				if len(req.Values) != 1 {
					return "", false
				}
				return req.Values[0], true
			}
		}
	}
	return "", false
}

func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded
}

func readyCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(pod *v1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == v1.ConditionTrue
}

// IsAvailable reports whether the pod has been Ready for more than minReadySeconds
// at now (any time at all when minReadySeconds is zero).
func IsAvailable(pod *v1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(pod)
	if c == nil || c.Status != v1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	return !c.LastTransitionTime.IsZero() && availableAt(c, minReadySeconds).Before(now)
}

// untilAvailable returns how long a Ready pod still has to wait to count as
// available, and false if the pod is not Ready or already available.
func untilAvailable(pod *v1.Pod, minReadySeconds int32, now time.Time) (time.Duration, bool) {
	if minReadySeconds == 0 {
		return 0, false
	}
	c := readyCondition(pod)
	if c == nil || c.Status != v1.ConditionTrue || c.LastTransitionTime.IsZero() {
		return 0, false
	}
	at := availableAt(c, minReadySeconds)
	if at.Before(now) {
		return 0, false
	}
	// Availability begins strictly after the deadline: look again just past it.
	return at.Sub(now) + time.Millisecond, true
}

func availableAt(c *v1.PodCondition, minReadySeconds int32) time.Time {
	return c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
}

// templateGeneration is the DaemonSet's legacy template generation, if it records
// one that parses.
func templateGeneration(annotations map[string]string) (int64, bool) {
	s, ok := annotations[TemplateGenerationAnnotation]
	if !ok {
		return 0, false
	}
	g, err := strconv.ParseInt(s, 10, 64)
	return g, err == nil
}

// isUpdated reports whether pod runs the current template: its revision hash label
// matches hash, or its legacy template-generation label matches the DaemonSet's.
func isUpdated(pod *v1.Pod, hash string, gen int64, hasGen bool) bool {
	if hash != "" && pod.Labels[HashLabel] == hash {
		return true
	}
	return hasGen && pod.Labels[TemplateGenerationLabel] == strconv.FormatInt(gen, 10)
}

// olderFirst orders the pods on one node by which to keep: bound pods before
// unbound ones, then oldest first, then by name.
func olderFirst(a, b *v1.Pod) int {
	if aBound, bBound := a.Spec.NodeName != "", b.Spec.NodeName != ""; aBound != bBound {
		if aBound {
			return -1
		}
		return 1
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}
