package nodesim

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resizeTime is how long the simulated kubelet takes to apply an in-place resize of
// a running container's CPU and memory, counted from the PodResizeInProgress
// condition it shows meanwhile (a real kubelet takes well under a second).
const resizeTime = time.Second

// applyResize plays an in-place resize. A running container whose spec now asks for
// other resources than its status reported is being resized: until resizeTime after
// the pod's PodResizeInProgress condition turned True, the container keeps reporting
// the resources it ran with (its allocated resources are already the new ones), and
// the condition shows; then the container reports the new resources and the
// condition goes. A simulated node has room for any resize: it never defers one
// (PodResizePending) as a full node does.
func applyResize(st *v1.PodStatus, old *v1.PodStatus, gen int64, now time.Time) {
	var resizing []int
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		prev := previous(old.ContainerStatuses, cs.Name)
		if cs.State.Running == nil || prev == nil || prev.State.Running == nil || prev.ContainerID != cs.ContainerID ||
			prev.Resources == nil || apiequality.Semantic.DeepEqual(prev.Resources, cs.Resources) {
			continue
		}
		resizing = append(resizing, i)
	}
	since := metav1.NewTime(now.Truncate(time.Second))
	if c := findCondition(old.Conditions, v1.PodResizeInProgress); c != nil {
		since = c.LastTransitionTime
	}
	if len(resizing) == 0 || !now.Before(since.Add(resizeTime)) {
		st.Conditions = slices.DeleteFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.PodResizeInProgress })
		return
	}
	for _, i := range resizing {
		cs := &st.ContainerStatuses[i]
		cs.Resources = previous(old.ContainerStatuses, cs.Name).Resources.DeepCopy()
	}
	if findCondition(st.Conditions, v1.PodResizeInProgress) == nil {
		st.Conditions = append(st.Conditions, v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: gen, LastTransitionTime: since})
	}
}

// resizingUntil is how long until a resize in progress is applied (0: none is).
func resizingUntil(st *v1.PodStatus, now time.Time) time.Duration {
	c := findCondition(st.Conditions, v1.PodResizeInProgress)
	if c == nil {
		return 0
	}
	return max(c.LastTransitionTime.Add(resizeTime).Sub(now), time.Millisecond)
}

func findCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
