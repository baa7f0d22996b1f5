package controller

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

// podIndex holds the pods a DaemonSet's sync reads: those a DaemonSet controls, by
// the controller's UID, and the orphans, by orphanKey(namespace). The pod handler
// keeps it, first thing on every event, so it shows a pod no later than the handler
// forgets that pod's write in flight (see Controller.snapshot).
//
// A sync reads it as a set of pointers: an informer index would look every pod up
// again by its namespace/name key at every sync, which at a few hundred pods a
// DaemonSet and ten syncs a second cost more than the decision itself.
type podIndex struct {
	mu    sync.RWMutex
	byKey map[string]map[types.UID]*v1.Pod
	keyOf map[types.UID]string
}

func newPodIndex() *podIndex {
	return &podIndex{byKey: map[string]map[types.UID]*v1.Pod{}, keyOf: map[types.UID]string{}}
}

func orphanKey(namespace string) string { return "orphan/" + namespace }

// podIndexKey is where pod belongs: its DaemonSet controller's UID, or its
// namespace's orphans. Pods of other controllers are not held: no DaemonSet can adopt
// them.
func podIndexKey(pod *v1.Pod) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	switch {
	case !daemonSetMayHold(ref):
		return "", false
	case ref == nil:
		return orphanKey(pod.Namespace), true
	}
	return string(ref.UID), true
}

// put records pod as it is now, moving it if its controller changed.
func (x *podIndex) put(pod *v1.Pod) {
	key, ok := podIndexKey(pod)
	if !ok && !x.holds(pod.UID) {
		return // the common case in a big cluster: another controller's pod
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if was, held := x.keyOf[pod.UID]; held && (!ok || was != key) {
		x.removeLocked(pod.UID, was)
	}
	if !ok {
		return
	}
	set := x.byKey[key]
	if set == nil {
		set = map[types.UID]*v1.Pod{}
		x.byKey[key] = set
	}
	set[pod.UID] = pod
	x.keyOf[pod.UID] = key
}

func (x *podIndex) holds(uid types.UID) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, held := x.keyOf[uid]
	return held
}

// remove forgets the pod with uid, wherever it was held. Another controller's pod,
// the common case, costs a read lock only.
func (x *podIndex) remove(uid types.UID) {
	if !x.holds(uid) {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if was, held := x.keyOf[uid]; held {
		x.removeLocked(uid, was)
	}
}

func (x *podIndex) removeLocked(uid types.UID, key string) {
	delete(x.keyOf, uid)
	set := x.byKey[key]
	delete(set, uid)
	if len(set) == 0 {
		delete(x.byKey, key)
	}
}

// list returns the pods held under each of keys.
func (x *podIndex) list(keys ...string) []*v1.Pod {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := 0
	for _, k := range keys {
		n += len(x.byKey[k])
	}
	out := make([]*v1.Pod, 0, n)
	for _, k := range keys {
		for _, pod := range x.byKey[k] {
			out = append(out, pod)
		}
	}
	return out
}

// onNode returns the pods held under key whose node is node.
func (x *podIndex) onNode(key, node string) []*v1.Pod {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []*v1.Pod
	for _, pod := range x.byKey[key] {
		if n, ok := daemon.TargetNode(pod); ok && n == node {
			out = append(out, pod)
		}
	}
	return out
}
