package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/everynode/everynode/internal/daemon"
)

// inflightTTL bounds how long an unobserved write is waited for. A watch that drops
// an event (a pod created and deleted between two relists) must not block a node
// forever.
const inflightTTL = 5 * time.Minute

// unknownOutcomeTTL bounds how long a write that failed with an unknown outcome (its
// answer lost: it may have been carried out) is waited for before it counts as not
// done: long beside a watch that is behind or relisting, short beside inflightTTL,
// since most such writes never reached the API server.
const unknownOutcomeTTL = 30 * time.Second

// inflight tracks, per DaemonSet key, the creates (by node) and deletes (by pod UID)
// this controller made that its informers have not shown yet. Observing is
// idempotent: a graceful delete, seen first as a deletionTimestamp and later as the
// removal, is counted once.
// Each DaemonSet's writes are its dsState's inflight.
type inflight struct {
	clock clock.PassiveClock
	st    *states
}

type dsInflight struct {
	creates map[string]time.Time    // node -> when the create stops being waited for
	deletes map[types.UID]time.Time // pod UID -> when the delete stops being waited for
	updates map[types.UID]inflightUpdate
	// refused are pods whose in-place update the API server rejected, until when:
	// they are replaced instead.
	refused map[types.UID]time.Time
}

// inflightUpdate is an in-place update of a pod to the revision hash, waited for
// until until.
type inflightUpdate struct {
	hash  string
	until time.Time
}

// queuedWrite is the expiry of a write that waits in the writeQueue: it is waited for
// until it is sent (see sendingCreate) or taken back.
var queuedWrite time.Time

func newInflight(c clock.PassiveClock, st *states) *inflight {
	return &inflight{clock: c, st: st}
}

// entry returns key's writes, making them if there are none; the caller holds the
// states' lock.
func (f *inflight) entry(key string) *dsInflight {
	e := &f.st.at(key).inflight
	if e.creates == nil {
		*e = dsInflight{creates: map[string]time.Time{}, deletes: map[types.UID]time.Time{},
			updates: map[types.UID]inflightUpdate{}, refused: map[types.UID]time.Time{}}
	}
	return e
}

// peek returns key's writes, or nil; the caller holds the states' lock.
func (f *inflight) peek(key string) *dsInflight {
	if s := f.st.peek(key); s != nil && s.inflight.creates != nil {
		return &s.inflight
	}
	return nil
}

// expectCreate records a create queued for node.
func (f *inflight) expectCreate(key, node string) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	f.entry(key).creates[node] = queuedWrite
}

// sendingCreate starts the inflightTTL of a queued create about to be sent, and
// reports whether it is still expected: false when the cache has shown a pod for
// its node meanwhile, or its DaemonSet was forgotten.
func (f *inflight) sendingCreate(key, node string) bool {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	e := f.peek(key)
	if e == nil {
		return false
	}
	if _, ok := e.creates[node]; !ok {
		return false
	}
	e.creates[node] = f.clock.Now().Add(inflightTTL)
	return true
}

// createDone forgets a create: it was observed, or it failed.
func (f *inflight) createDone(key, node string) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		delete(e.creates, node)
	}
}

// expectDelete records a delete queued for the pod with uid.
func (f *inflight) expectDelete(key string, uid types.UID) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	f.entry(key).deletes[uid] = queuedWrite
}

// sendingDelete is sendingCreate for a delete.
func (f *inflight) sendingDelete(key string, uid types.UID) bool {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	e := f.peek(key)
	if e == nil {
		return false
	}
	if _, ok := e.deletes[uid]; !ok {
		return false
	}
	e.deletes[uid] = f.clock.Now().Add(inflightTTL)
	return true
}

// createUnknown keeps a create whose outcome is unknown outstanding, for at most
// unknownOutcomeTTL from now: the pod may exist without the cache showing it yet.
// A create observed meanwhile stays done.
func (f *inflight) createUnknown(key, node string) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		if until, ok := e.creates[node]; ok {
			e.creates[node] = minTime(until, f.clock.Now().Add(unknownOutcomeTTL))
		}
	}
}

// deleteUnknown is createUnknown for a delete.
func (f *inflight) deleteUnknown(key string, uid types.UID) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		if until, ok := e.deletes[uid]; ok {
			e.deletes[uid] = minTime(until, f.clock.Now().Add(unknownOutcomeTTL))
		}
	}
}

// minTime is the earlier of two expiries, where a queued write's never comes.
func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// deleteDone forgets a delete: it was observed, or it failed.
func (f *inflight) deleteDone(key string, uid types.UID) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		delete(e.deletes, uid)
	}
}

// view returns a copy of a DaemonSet's outstanding writes, dropping expired ones.
func (f *inflight) view(key string) daemon.InFlight {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	e := f.peek(key)
	if e == nil {
		return daemon.InFlight{}
	}
	now := f.clock.Now()
	var out daemon.InFlight
	for node, until := range e.creates {
		if !until.IsZero() && now.After(until) {
			delete(e.creates, node)
			continue
		}
		if out.Creates == nil {
			out.Creates = make(map[string]bool, len(e.creates))
		}
		out.Creates[node] = true
	}
	for uid, until := range e.deletes {
		if !until.IsZero() && now.After(until) {
			delete(e.deletes, uid)
			continue
		}
		if out.Deletes == nil {
			out.Deletes = make(map[types.UID]bool, len(e.deletes))
		}
		out.Deletes[uid] = true
	}
	for uid, u := range e.updates {
		if now.After(u.until) {
			delete(e.updates, uid)
			continue
		}
		if out.Updates == nil {
			out.Updates = make(map[types.UID]bool, len(e.updates))
		}
		out.Updates[uid] = true
	}
	return out
}
