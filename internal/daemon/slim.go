package daemon

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SlimPod is the part of a pod the controller reads, for a cache that holds every
// pod of the cluster: most of a pod is what the kubelet and the scheduler need, not
// what decides a DaemonSet's rollout.
//
//   - A pod controlled by something other than a DaemonSet (a ReplicaSet, a Job, a
//     node for a static pod) can never be adopted: only what proves that is kept —
//     its identity, its controller reference, its deletion.
//   - Any other pod keeps what Decide reads: labels, owners, the annotations it
//     records failures and in-place updates in, creation and deletion; the node it
//     is bound or pinned to, its host ports; its phase and its reason, conditions
//     and container states.
//
// Decide gives the same Plan for slim pods as for whole ones (a property test
// holds it to that). The slim pod is a new object; pod is not changed.
func SlimPod(pod *v1.Pod) *v1.Pod {
	meta := metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind != "DaemonSet" {
		meta.OwnerReferences = []metav1.OwnerReference{*ref}
		return &v1.Pod{ObjectMeta: meta, Spec: v1.PodSpec{NodeName: pod.Spec.NodeName}}
	}
	meta.Labels = pod.Labels
	meta.OwnerReferences = pod.OwnerReferences
	_, inPlace := pod.Annotations[AnnotationInPlaceUpdate]
	for _, key := range []string{AnnotationFailedBefore, AnnotationInPlaceUpdate} {
		if v, ok := pod.Annotations[key]; ok {
			if meta.Annotations == nil {
				meta.Annotations = map[string]string{}
			}
			meta.Annotations[key] = v
		}
	}
	slim := &v1.Pod{ObjectMeta: meta}
	slim.Spec.NodeName = pod.Spec.NodeName
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		slim.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
	}
	slim.Spec.InitContainers = portsOnly(pod.Spec.InitContainers)
	slim.Spec.Containers = portsOnly(pod.Spec.Containers)
	slim.Status = v1.PodStatus{
		Phase:                 pod.Status.Phase,
		Reason:                pod.Status.Reason,
		Conditions:            slimConditions(pod.Status.Conditions),
		InitContainerStatuses: slimStatuses(pod.Status.InitContainerStatuses, inPlace),
		ContainerStatuses:     slimStatuses(pod.Status.ContainerStatuses, inPlace),
	}
	return slim
}

// portsOnly keeps of each container its name and the ports that take a host port.
func portsOnly(cs []v1.Container) []v1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]v1.Container, len(cs))
	for i, c := range cs {
		out[i].Name = c.Name
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				out[i].Ports = append(out[i].Ports, v1.ContainerPort{HostPort: p.HostPort, Protocol: p.Protocol})
			}
		}
	}
	return out
}

// slimConditions keeps the conditions Decide reads: Ready (availability, the bake),
// PodScheduled (a surge blocked by a host port), PodResizePending (a resize the
// kubelet holds back) and DisruptionTarget (a pod a node shutdown stopped).
func slimConditions(conds []v1.PodCondition) []v1.PodCondition {
	var out []v1.PodCondition
	for _, c := range conds {
		switch c.Type {
		case v1.PodReady:
			out = append(out, v1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		case v1.PodScheduled, v1.PodResizePending:
			out = append(out, v1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		case v1.DisruptionTarget:
			out = append(out, v1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
		}
	}
	return out
}

// slimStatuses keeps of each container status its name, restarts and states,
// whose reasons and times Decide reads (failing containers, the bake), and, of a
// pod updated in place (withImage), the image and resources it reports.
func slimStatuses(ss []v1.ContainerStatus, withImage bool) []v1.ContainerStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, len(ss))
	for i, s := range ss {
		out[i] = v1.ContainerStatus{Name: s.Name, RestartCount: s.RestartCount, Ready: s.Ready,
			State: slimState(s.State), LastTerminationState: slimState(s.LastTerminationState)}
		if withImage {
			out[i].Image, out[i].Resources = s.Image, s.Resources
		}
	}
	return out
}

func slimState(s v1.ContainerState) v1.ContainerState {
	var out v1.ContainerState
	if w := s.Waiting; w != nil {
		out.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if r := s.Running; r != nil {
		out.Running = &v1.ContainerStateRunning{StartedAt: r.StartedAt}
	}
	if t := s.Terminated; t != nil {
		out.Terminated = &v1.ContainerStateTerminated{Reason: t.Reason, ExitCode: t.ExitCode}
	}
	return out
}
