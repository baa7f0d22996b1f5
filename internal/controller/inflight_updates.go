package controller

import (
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// In-place updates in flight: a pod patched to a revision is waited for until the
// cache shows it carrying that revision's hash (or it is gone), as creates and
// deletes are.

func (f *inflight) expectUpdate(key string, uid types.UID, hash string) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	f.entry(key).updates[uid] = inflightUpdate{hash: hash, until: f.clock.Now().Add(inflightTTL)}
}

// updateSeen forgets an in-place update once the cache shows the pod with hash.
func (f *inflight) updateSeen(key string, uid types.UID, hash string) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		if u, ok := e.updates[uid]; ok && u.hash == hash {
			delete(e.updates, uid)
		}
	}
}

// updateDone forgets an in-place update: it failed, or the pod is gone.
func (f *inflight) updateDone(key string, uid types.UID) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		delete(e.updates, uid)
	}
}

// updateUnknown is createUnknown for an in-place update.
func (f *inflight) updateUnknown(key string, uid types.UID) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		if u, ok := e.updates[uid]; ok {
			u.until = minTime(u.until, f.clock.Now().Add(unknownOutcomeTTL))
			e.updates[uid] = u
		}
	}
}

// refuse records that the API server rejected the in-place update of a pod: for
// inflightTTL, the update replaces it instead.
func (f *inflight) refuse(key string, uid types.UID) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	f.entry(key).refused[uid] = f.clock.Now().Add(inflightTTL)
}

// refusedUpdates are the pods of a DaemonSet whose in-place update was rejected
// lately; nil when none was.
func (f *inflight) refusedUpdates(key string) map[types.UID]bool {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	e := f.peek(key)
	if e == nil || len(e.refused) == 0 {
		return nil
	}
	now := f.clock.Now()
	maps.DeleteFunc(e.refused, func(_ types.UID, until time.Time) bool { return now.After(until) })
	out := make(map[types.UID]bool, len(e.refused))
	for uid := range e.refused {
		out[uid] = true
	}
	return out
}
