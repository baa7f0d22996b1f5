package controller

import (
	"maps"
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
// A sync reads a DaemonSet's pods as one slice, shared by the syncs until a pod of it
// changes: the changes since the last read are applied to a copy at the next read.
// Every change is numbered, by one count across the index, and logged per key
// (changeLog), so that a sync can ask which pods changed since the snapshot its Memo
// was made from.
type podIndex struct {
	mu    sync.Mutex
	byKey map[string]*podSet
	keyOf map[types.UID]string
	seq   uint64 // changes counted
	// gone holds, for each key whose set emptied and went, the number of the change
	// that emptied it: a reader from before then saw pods the index cannot name any
	// more. Entries below floor are dropped, and a reader from below floor, told to
	// compare everything.
	gone  map[string]uint64
	floor uint64
}

// goneReach is how far back in changes the index keeps the sets that went.
const goneReach = 1 << 20

// podSet is the pods held under one key.
type podSet struct {
	pods sharedSet[types.UID, *v1.Pod]
	held int // pods held, pending changes included
	log  changeLog[types.UID]
}

func newPodIndex() *podIndex {
	return &podIndex{byKey: map[string]*podSet{}, keyOf: map[types.UID]string{}, gone: map[string]uint64{}}
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
	was, held := x.keyOf[pod.UID]
	if held && (!ok || was != key) {
		x.removeLocked(pod.UID, was)
		held = false
	}
	if !ok {
		return
	}
	set := x.byKey[key]
	if set == nil {
		set = &podSet{pods: newSharedSet(func(p *v1.Pod) types.UID { return p.UID })}
		x.byKey[key] = set
	}
	if !held {
		set.held++
	}
	x.seq++
	set.pods.set(pod.UID, pod)
	set.log.add(x.seq, pod.UID)
	x.keyOf[pod.UID] = key
}

func (x *podIndex) holds(uid types.UID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, held := x.keyOf[uid]
	return held
}

// remove forgets the pod with uid, wherever it was held.
func (x *podIndex) remove(uid types.UID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if was, held := x.keyOf[uid]; held {
		x.removeLocked(uid, was)
	}
}

func (x *podIndex) removeLocked(uid types.UID, key string) {
	delete(x.keyOf, uid)
	set := x.byKey[key]
	x.seq++
	if set.held--; set.held == 0 {
		delete(x.byKey, key) // with its log
		x.gone[key] = x.seq
		if len(x.gone) > 1024 && x.seq > goneReach {
			x.floor = x.seq - goneReach
			maps.DeleteFunc(x.gone, func(_ string, seq uint64) bool { return seq < x.floor })
		}
		return
	}
	set.pods.set(uid, nil)
	set.log.add(x.seq, uid)
}

// read returns the pods held under keys (callers must not modify the slice) and the
// number of the last change they show; with since, also the pods changed under keys
// after change number from, by UID, as they are now (nil: gone), unless one of the
// keys' logs no longer reaches back that far, or a key's set emptied and went since
// (ok false).
func (x *podIndex) read(keys []string, from uint64, since bool) (pods []*v1.Pod, at uint64, changed map[types.UID]*v1.Pod, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var held [][]*v1.Pod
	n := 0
	for _, k := range keys {
		if set := x.byKey[k]; set != nil {
			held = append(held, set.pods.read())
			n += len(held[len(held)-1])
		}
	}
	switch len(held) {
	case 0:
	case 1:
		pods = held[0]
	default:
		pods = make([]*v1.Pod, 0, n)
		for _, h := range held {
			pods = append(pods, h...)
		}
	}
	if since {
		changed, ok = x.changedSince(keys, from)
	}
	return pods, x.seq, changed, ok
}

// changes is read with since, without the pods: it copies none of them, so its
// cost is that of the changes alone.
func (x *podIndex) changes(keys []string, from uint64) (at uint64, changed map[types.UID]*v1.Pod, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	changed, ok = x.changedSince(keys, from)
	return x.seq, changed, ok
}

// changedSince is the pods changed under keys after change number from, by UID, as
// they are now (nil: gone), unless the logs no longer reach back that far (see
// read). The caller locks.
func (x *podIndex) changedSince(keys []string, from uint64) (map[types.UID]*v1.Pod, bool) {
	changed := map[types.UID]*v1.Pod{}
	ok := from >= x.floor
	var sets []*podSet
	for _, k := range keys {
		ok = ok && x.gone[k] <= from
		if set := x.byKey[k]; set != nil {
			sets = append(sets, set)
		}
	}
	for _, set := range sets {
		ok = ok && set.log.since(from, func(uid types.UID) { changed[uid] = nil })
	}
	for uid := range changed {
		for _, set := range sets {
			if pod := set.pods.now(uid); pod != nil {
				changed[uid] = pod
			}
		}
	}
	return changed, ok
}

// onNode returns the pods held under key whose node is node.
func (x *podIndex) onNode(key, node string) []*v1.Pod {
	x.mu.Lock()
	defer x.mu.Unlock()
	set := x.byKey[key]
	if set == nil {
		return nil
	}
	var out []*v1.Pod
	for _, pod := range set.pods.read() {
		if n, ok := daemon.TargetNode(pod); ok && n == node {
			out = append(out, pod)
		}
	}
	return out
}
