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
//
// A create or delete has one record from the moment a sync queues it until it is
// seen, fails or lapses: its podWrite, which the writeQueue holds while it waits and
// these tables hold while it is in flight (queued included, so no sync plans it
// twice). A record that is taken back, sent or answered is settled by identity, so a
// newer record for the same node or pod is never settled by an older one's answer.
// Each DaemonSet's tables are its dsState's inflight.
type inflight struct {
	clock clock.PassiveClock
	st    *states
	views uint64 // numbers the views handed out, over every DaemonSet
}

type dsInflight struct {
	creates map[string]*podWrite    // by node
	deletes map[types.UID]*podWrite // by pod UID
	updates map[types.UID]inflightUpdate
	// refused are pods whose in-place update the API server rejected, until when:
	// they are replaced instead.
	refused map[types.UID]time.Time
	// nextLapse is no later than the earliest inflightTTL or unknownOutcomeTTL of a
	// sent create or delete (zero: none sent): until then no write lapses.
	nextLapse time.Time
	shown     shownInflight
}

// inflightUpdate is an in-place update of a pod to the revision hash, waited for
// until until.
type inflightUpdate struct {
	hash  string
	until time.Time
}

func newInflight(c clock.PassiveClock, st *states) *inflight {
	return &inflight{clock: c, st: st}
}

// entry returns key's writes, making them if there are none; the caller holds the
// states' lock.
func (f *inflight) entry(key string) *dsInflight {
	e := &f.st.at(key).inflight
	if e.creates == nil {
		*e = dsInflight{creates: map[string]*podWrite{}, deletes: map[types.UID]*podWrite{},
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

// expect records a write being queued. A create that takes the place of one queued
// before for the same node (prev, see writeQueue.replaceCreates) inherits its
// record's place: it is in flight only while prev still was.
func (f *inflight) expect(prev, w *podWrite) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	e := f.entry(w.key)
	if w.create == nil {
		e.putDelete(w.del.Pod.UID, w)
		return
	}
	if prev == nil || e.creates[w.node] == prev {
		e.putCreate(w.node, w)
	}
}

// sending starts the inflightTTL of a queued write about to be sent, and reports
// whether it is still expected: false when the cache has shown its pod (a pod for
// its node, or the pod gone) meanwhile, or its DaemonSet was forgotten.
func (f *inflight) sending(w *podWrite) bool {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if !f.holdsLocked(w) {
		return false
	}
	w.until = f.clock.Now().Add(inflightTTL)
	f.lapsesAt(w)
	return true
}

// holdsLocked reports whether w is the record in flight for its node or pod.
func (f *inflight) holdsLocked(w *podWrite) bool {
	e := f.peek(w.key)
	switch {
	case e == nil:
		return false
	case w.create != nil:
		return e.creates[w.node] == w
	default:
		return e.deletes[w.del.Pod.UID] == w
	}
}

// unknown keeps a write whose outcome is unknown outstanding, for at most
// unknownOutcomeTTL from now: the cache may not show what it did yet. A write
// observed meanwhile stays done.
func (f *inflight) unknown(w *podWrite) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if f.holdsLocked(w) {
		w.until = minTime(w.until, f.clock.Now().Add(unknownOutcomeTTL))
		f.lapsesAt(w)
	}
}

// settle forgets a write that failed or was taken back unsent, unless a newer
// record took its place.
func (f *inflight) settle(w *podWrite) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if !f.holdsLocked(w) {
		return
	}
	e := f.peek(w.key)
	if w.create != nil {
		e.dropCreate(w.node)
	} else {
		e.dropDelete(w.del.Pod.UID)
	}
}

// lapsesAt brings the nextLapse of w's DaemonSet forward to w's expiry; the caller
// holds the states' lock and w is in flight.
func (f *inflight) lapsesAt(w *podWrite) {
	e := f.peek(w.key)
	e.nextLapse = minTime(e.nextLapse, w.until)
}

// minTime is the earlier of two expiries, where a queued write's (zero) never comes.
func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// createDone forgets the create for node: the cache shows a pod there.
func (f *inflight) createDone(key, node string) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		e.dropCreate(node)
	}
}

// deleteDone forgets the delete of the pod with uid: the cache shows it deleting
// or gone.
func (f *inflight) deleteDone(key string, uid types.UID) {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if e := f.peek(key); e != nil {
		e.dropDelete(uid)
	}
}

// view returns a DaemonSet's outstanding writes, dropping lapsed ones, numbered and
// with the changes since the last view named (see shownInflight). Its maps stay the
// caller's until the next view of the DaemonSet.
func (f *inflight) view(key string) daemon.InFlight {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	e := f.peek(key)
	if e == nil {
		return daemon.InFlight{}
	}
	now := f.clock.Now()
	e.lapse(now)
	f.views++
	out := e.shown.next(e, f.views)
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

// lapse drops the sent writes waited for long enough, once one may have.
func (e *dsInflight) lapse(now time.Time) {
	if e.nextLapse.IsZero() || !now.After(e.nextLapse) {
		return
	}
	e.nextLapse = time.Time{}
	for node, w := range e.creates {
		if lapsed(w, now) {
			e.dropCreate(node)
		} else if !w.until.IsZero() {
			e.nextLapse = minTime(e.nextLapse, w.until)
		}
	}
	for uid, w := range e.deletes {
		if lapsed(w, now) {
			e.dropDelete(uid)
		} else if !w.until.IsZero() {
			e.nextLapse = minTime(e.nextLapse, w.until)
		}
	}
}

// lapsed reports whether a sent write has been waited for long enough; a queued one
// never lapses.
func lapsed(w *podWrite, now time.Time) bool {
	return !w.until.IsZero() && now.After(w.until)
}
