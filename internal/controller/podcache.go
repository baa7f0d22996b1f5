package controller

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// cachedPod is what the pod cache keeps of pod, which holds every pod of the
// cluster. A pod another kind of controller controls (a ReplicaSet's, a Job's, a
// node's static pod) can never be adopted, and no decision reads it: only its
// metadata is kept, as a PartialObjectMetadata of its identity, its controller and
// its deletion, about a fifth of the memory of even an empty v1.Pod. Any other pod
// is kept as daemon.SlimPod: what the decisions read.
//
// The pod handler therefore meets both types, and a pod whose controller changes
// moves between them. No pod lister may be made over this cache: a lister's List
// would meet the metadata where it expects a *v1.Pod.
func cachedPod(pod *v1.Pod) any {
	ref := metav1.GetControllerOfNoCopy(pod)
	if daemonSetMayHold(ref) {
		return daemon.SlimPod(pod)
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
			OwnerReferences: []metav1.OwnerReference{*ref},
		},
	}
}

// daemonSetMayHold reports whether a pod whose controller reference is ref may be a
// DaemonSet's: one controls it, or nothing does (an orphan, which one may adopt).
func daemonSetMayHold(ref *metav1.OwnerReference) bool {
	return ref == nil || ref.Kind == "DaemonSet"
}
