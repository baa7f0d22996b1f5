package controller

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Pod cache indexes.
const (
	// byController keys a pod by its controller's UID, or an orphan by
	// orphanKey(namespace): a DaemonSet's candidate pods are two index reads.
	byController = "everynode/by-controller"
)

func orphanKey(namespace string) string { return "orphan/" + namespace }

func podIndexers() cache.Indexers {
	return cache.Indexers{
		byController: func(obj interface{}) ([]string, error) {
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return nil, fmt.Errorf("expected a pod, got %T", obj)
			}
			if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
				return []string{string(ref.UID)}, nil
			}
			return []string{orphanKey(pod.Namespace)}, nil
		},
	}
}
