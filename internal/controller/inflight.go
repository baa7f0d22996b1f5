package controller

import (
	"sync"
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
type inflight struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byDS  map[string]*dsInflight
}

type dsInflight struct {
	creates map[string]time.Time    // node -> when the create stops being waited for
	deletes map[types.UID]time.Time // pod UID -> when the delete stops being waited for
}

func newInflight(c clock.PassiveClock) *inflight {
	return &inflight{clock: c, byDS: map[string]*dsInflight{}}
}

func (f *inflight) entry(key string) *dsInflight {
	e := f.byDS[key]
	if e == nil {
		e = &dsInflight{creates: map[string]time.Time{}, deletes: map[types.UID]time.Time{}}
		f.byDS[key] = e
	}
	return e
}

func (f *inflight) expectCreate(key, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entry(key).creates[node] = f.clock.Now().Add(inflightTTL)
}

// createDone forgets a create: it was observed, or it failed.
func (f *inflight) createDone(key, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.byDS[key]; e != nil {
		delete(e.creates, node)
	}
}

func (f *inflight) expectDelete(key string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entry(key).deletes[uid] = f.clock.Now().Add(inflightTTL)
}

// createUnknown keeps a create whose outcome is unknown outstanding, for at most
// unknownOutcomeTTL from now: the pod may exist without the cache showing it yet.
// A create observed meanwhile stays done.
func (f *inflight) createUnknown(key, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.byDS[key]; e != nil {
		if until, ok := e.creates[node]; ok {
			e.creates[node] = minTime(until, f.clock.Now().Add(unknownOutcomeTTL))
		}
	}
}

// deleteUnknown is createUnknown for a delete.
func (f *inflight) deleteUnknown(key string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.byDS[key]; e != nil {
		if until, ok := e.deletes[uid]; ok {
			e.deletes[uid] = minTime(until, f.clock.Now().Add(unknownOutcomeTTL))
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// deleteDone forgets a delete: it was observed, or it failed.
func (f *inflight) deleteDone(key string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.byDS[key]; e != nil {
		delete(e.deletes, uid)
	}
}

// forget drops everything tracked for a DaemonSet that no longer exists.
func (f *inflight) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byDS, key)
}

// view returns a copy of a DaemonSet's outstanding writes, dropping expired ones.
func (f *inflight) view(key string) daemon.InFlight {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.byDS[key]
	if e == nil {
		return daemon.InFlight{}
	}
	now := f.clock.Now()
	var out daemon.InFlight
	for node, until := range e.creates {
		if now.After(until) {
			delete(e.creates, node)
			continue
		}
		if out.Creates == nil {
			out.Creates = make(map[string]bool, len(e.creates))
		}
		out.Creates[node] = true
	}
	for uid, until := range e.deletes {
		if now.After(until) {
			delete(e.deletes, uid)
			continue
		}
		if out.Deletes == nil {
			out.Deletes = make(map[types.UID]bool, len(e.deletes))
		}
		out.Deletes[uid] = true
	}
	return out
}
