package controller

import (
	"sync"

	apps "k8s.io/api/apps/v1"
)

// ownWrites remembers, per DaemonSet key, the object the API server returned for the
// controller's latest write of that DaemonSet (a status write or a rollback), with
// the resourceVersion the cache showed when the write was made.
//
// A DaemonSet's own status writes wake nothing, and pod events often wake it again
// before the cache has seen the write. A sync then would compute its status from the
// stale object and write it with a stale resourceVersion: a certain 409 Conflict, and
// a retry. As long as the cache still shows the version a write was made from, the
// object that write returned is the newer truth, and syncs use it instead.
type ownWrites struct {
	mu    sync.Mutex
	byKey map[string]ownWrite
}

type ownWrite struct {
	base string // the cache's resourceVersion when the write was made
	obj  *apps.DaemonSet
}

func newOwnWrites() *ownWrites {
	return &ownWrites{byKey: map[string]ownWrite{}}
}

// freshest returns the newest DaemonSet the controller knows for key, given cached,
// the one in the cache. Once the cache has moved past the version the last write was
// made from, it holds that write or something newer, and the record is dropped.
func (w *ownWrites) freshest(key string, cached *apps.DaemonSet) *apps.DaemonSet {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, ok := w.byKey[key]
	if !ok {
		return cached
	}
	if rec.base == cached.ResourceVersion && rec.obj.UID == cached.UID {
		return rec.obj
	}
	delete(w.byKey, key)
	return cached
}

// note records obj, returned by a write of the DaemonSet at resourceVersion from.
// When from is the object of the previous record, the chain still rests on the
// version the cache showed then.
func (w *ownWrites) note(key, from string, obj *apps.DaemonSet) {
	if obj == nil || obj.ResourceVersion == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	base := from
	if rec, ok := w.byKey[key]; ok && rec.obj.ResourceVersion == from {
		base = rec.base
	}
	w.byKey[key] = ownWrite{base: base, obj: obj}
}

func (w *ownWrites) forget(key string) {
	w.mu.Lock()
	delete(w.byKey, key)
	w.mu.Unlock()
}
