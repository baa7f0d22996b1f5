package daemon

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/util/qos"
)

// In-place resize: a running pod's app containers can be given other CPU and memory
// requests and limits through the pod's resize subresource, as long as the pod's QoS
// class stays the same. An in-place update does that for a template whose app
// containers' resources differ only so (inplace.go); the kubelet then applies the new
// resources, and reports them in the container's status, without a restart.

// resizable are the resources the resize subresource changes.
var resizable = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// resourceChanges sets, in from, the resources of to's app containers that differ
// only in CPU and memory, returning them by container name; false when another
// resource differs.
func resourceChanges(from, to []v1.Container) (map[string]v1.ResourceRequirements, bool) {
	var out map[string]v1.ResourceRequirements
	for i := range from {
		f, t := &from[i].Resources, &to[i].Resources
		if sameResources(*f, *t) {
			continue
		}
		if !sameBeyond(f.Requests, t.Requests) || !sameBeyond(f.Limits, t.Limits) || len(f.Claims) != len(t.Claims) {
			return nil, false
		}
		if out == nil {
			out = map[string]v1.ResourceRequirements{}
		}
		out[to[i].Name] = *t.DeepCopy()
		from[i].Resources = *t.DeepCopy()
	}
	return out, true
}

// sameBeyond reports whether two resource lists agree on every resource the resize
// subresource does not change.
func sameBeyond(a, b v1.ResourceList) bool {
	for _, l := range []struct{ x, y v1.ResourceList }{{a, b}, {b, a}} {
		for name, q := range l.x {
			if name == v1.ResourceCPU || name == v1.ResourceMemory {
				continue
			}
			if o, ok := l.y[name]; !ok || o.Cmp(q) != 0 {
				return false
			}
		}
	}
	return true
}

// sameResources compares the CPU and memory requests and limits of two containers'
// resources, and whatever else they hold.
func sameResources(a, b v1.ResourceRequirements) bool {
	return sameList(a.Requests, b.Requests) && sameList(a.Limits, b.Limits) && len(a.Claims) == len(b.Claims)
}

func sameList(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if o, ok := b[name]; !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// sameQOS reports whether pods of both templates are of one QoS class, which a
// resize must keep.
func sameQOS(from, to *v1.PodTemplateSpec) bool {
	return qos.ComputePodQOS(&v1.Pod{Spec: from.Spec}) == qos.ComputePodQOS(&v1.Pod{Spec: to.Spec})
}

// resizePending is the pod's PodResizePending condition while it holds: the kubelet
// has seen the resize and holds it back, Deferred until the node has room for it,
// or Infeasible if the node never will (nil when it does not).
func resizePending(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == v1.PodResizePending && c.Status == v1.ConditionTrue {
			return c
		}
	}
	return nil
}

// resizeFailure says how a pod's resize fails, for the failure rules: "" unless
// the kubelet found it infeasible, which no wait ends.
func resizeFailure(pod *v1.Pod) string {
	c := resizePending(pod)
	if c == nil || c.Reason != v1.PodReasonInfeasible {
		return ""
	}
	msg := c.Message
	if len(msg) > maxWaitMessage {
		msg = msg[:maxWaitMessage] + "…"
	}
	return fmt.Sprintf("its resize is infeasible (%s)", msg)
}

// resized reports whether the kubelet reports a container running with the CPU and
// memory the update gave it.
func resized(s *v1.ContainerStatus, want v1.ResourceRequirements) bool {
	if s == nil || s.Resources == nil {
		return false
	}
	for _, name := range resizable {
		for _, l := range []struct{ got, want v1.ResourceList }{{s.Resources.Requests, want.Requests}, {s.Resources.Limits, want.Limits}} {
			w, wok := l.want[name]
			g, gok := l.got[name]
			if wok != gok || (wok && g.Cmp(w) != 0) {
				return false
			}
		}
	}
	return true
}
