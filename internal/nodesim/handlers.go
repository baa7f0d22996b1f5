package nodesim

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// podsByNodeIndex indexes the pod cache by spec.nodeName.
const podsByNodeIndex = "nodeName"

func podsByNode(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// stripManagedFields drops managed fields from cached objects: the simulator never
// reads them, and at thousands of pods they are most of the cache. Objects without
// any are left untouched, not even written to.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok && len(m.GetManagedFields()) > 0 {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// nodeHandler queues a simulated node's status and lease, and its pods when
// something they depend on changes.
func (s *Simulator) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			node, ok := obj.(*v1.Node)
			if !ok || !isSimulated(node) {
				return
			}
			s.nodeQueue.Add(node.Name)
			s.leaseQueue.Add(node.Name)
			s.enqueuePodsOn(node.Name)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Node)
			cur, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || !isSimulated(cur) {
				return
			}
			s.nodeQueue.Add(cur.Name)
			if !isSimulated(old) {
				s.leaseQueue.Add(cur.Name)
			}
			if !isSimulated(old) || podsDependOnChange(old, cur) {
				s.enqueuePodsOn(cur.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if node, ok := obj.(*v1.Node); ok {
				s.nodeQueue.Add(node.Name)
			}
		},
	}
}

// podsDependOnChange reports whether a node change can change its pods' status.
func podsDependOnChange(old, cur *v1.Node) bool {
	return old.Annotations[AnnotationReady] != cur.Annotations[AnnotationReady] ||
		old.Annotations[AnnotationKubelet] != cur.Annotations[AnnotationKubelet] ||
		old.Annotations[AnnotationShutdown] != cur.Annotations[AnnotationShutdown] ||
		old.Annotations[AnnotationFail] != cur.Annotations[AnnotationFail] ||
		old.Annotations[AnnotationUnpullable] != cur.Annotations[AnnotationUnpullable] ||
		old.Spec.PodCIDR != cur.Spec.PodCIDR ||
		internalIP(old) != internalIP(cur)
}

func (s *Simulator) enqueuePodsOn(node string) {
	objs, err := s.podIndex.ByIndex(podsByNodeIndex, node)
	if err != nil {
		return
	}
	for _, obj := range objs {
		if pod, ok := obj.(*v1.Pod); ok {
			s.podQueue.Add(podKey(pod))
		}
	}
}

// podHandler queues the pods bound to simulated nodes, and every deleted pod so
// that what the simulator holds for it is released.
func (s *Simulator) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			s.enqueuePod(obj)
			if pod, ok := obj.(*v1.Pod); ok {
				s.podGatesNode(nil, pod)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			s.enqueuePod(newObj)
			old, ok1 := oldObj.(*v1.Pod)
			cur, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 {
				s.podGatesNode(old, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				s.podQueue.Add(key)
			}
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				s.podGatesNode(pod, nil)
			}
		},
	}
}

func (s *Simulator) enqueuePod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || s.simulatedNode(pod.Spec.NodeName) == nil {
		return
	}
	s.podQueue.Add(podKey(pod))
}
