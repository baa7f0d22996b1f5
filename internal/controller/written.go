package controller

import (
	apps "k8s.io/api/apps/v1"
)

// ownWrites remembers, per DaemonSet key, the object the API server returned for the
// controller's latest write of that DaemonSet (a status write or a rollback, or the
// read that follows a status write's conflict), with
// the resourceVersions the cache may show before it has caught up with that write.
//
// A DaemonSet's own status writes wake nothing, and pod events often wake it again
// before the cache has seen the write. A sync then would compute its status from the
// stale object and write it with a stale resourceVersion: a certain 409 Conflict, and
// a retry; or, after a rollback, decide the rollback again. As long as the cache still
// shows the version a write was made from, or an earlier write of the same chain, the
// object that write returned is the newer truth, and syncs use it instead.
// Each DaemonSet's record is its dsState's written.
type ownWrites struct{ st *states }

type ownWrite struct {
	// behind are the resourceVersions the cache shows while it has not caught up
	// with obj: the one the first write of the chain was made from, and those the
	// chain's earlier writes returned (a lagging watch delivers them one by one).
	behind map[string]bool
	obj    *apps.DaemonSet
}

func newOwnWrites(st *states) *ownWrites { return &ownWrites{st: st} }

// record returns key's record, or nil; the caller holds the states' lock.
func (w *ownWrites) record(key string) *ownWrite {
	if s := w.st.peek(key); s != nil && s.written.obj != nil {
		return &s.written
	}
	return nil
}

// freshest returns the newest DaemonSet the controller knows for key, given cached,
// the one in the cache. Once the cache shows a version outside the chain of writes
// (the last write itself, or something newer), it holds that write or something
// newer, and the record is dropped.
func (w *ownWrites) freshest(key string, cached *apps.DaemonSet) *apps.DaemonSet {
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	rec := w.record(key)
	if rec == nil {
		return cached
	}
	if rec.behind[cached.ResourceVersion] && rec.obj.UID == cached.UID {
		return rec.obj
	}
	*rec = ownWrite{}
	return cached
}

// note records obj, returned by a write of the DaemonSet at resourceVersion from.
// When from is the object of the previous record, the write extends that chain.
func (w *ownWrites) note(key, from string, obj *apps.DaemonSet) {
	if obj == nil || obj.ResourceVersion == "" {
		return
	}
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	behind := map[string]bool{from: true}
	if rec := w.record(key); rec != nil && rec.obj.ResourceVersion == from {
		for rv := range rec.behind {
			behind[rv] = true
		}
	}
	w.st.at(key).written = ownWrite{behind: behind, obj: obj}
}

// last returns the object of the latest write recorded for key, or nil. Within a
// sync, which began from freshest, it is the newest DaemonSet the controller knows.
func (w *ownWrites) last(key string) *apps.DaemonSet {
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	if rec := w.record(key); rec != nil {
		return rec.obj
	}
	return nil
}
