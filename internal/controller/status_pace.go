package controller

import (
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// statusPace spaces out a DaemonSet's status writes that change only its counters:
// while pods flip readiness one by one, one write per interval carries them all,
// instead of one write per sync. A write that raises observedGeneration or changes a
// condition goes out at once.
//
// While the DaemonSet's pod writes are queued or in flight (busy), a counters-only
// write is held longer, up to hold after the last write: the counters are about to
// change again with each of those writes, and a status write would share the client
// rate limit with them. The DaemonSet is synced again as soon as its pod writes
// drain (drained), so the status is written then.
type statusPace struct {
	interval time.Duration
	hold     time.Duration

	mu   sync.Mutex
	last map[string]time.Time // when each DaemonSet's status was last written
	held map[string]bool      // DaemonSets with a write held while busy
}

func newStatusPace(interval, hold time.Duration) *statusPace {
	return &statusPace{interval: interval, hold: hold, last: map[string]time.Time{}, held: map[string]bool{}}
}

// wait returns how long the write of next over cur must wait, zero for at once.
// busy reports whether the DaemonSet's pod writes are queued or in flight; it is
// asked after the hold is noted, so that a drain that races with it is not missed.
func (s *statusPace) wait(key string, cur, next *apps.DaemonSetStatus, now time.Time, busy func() bool) time.Duration {
	if s.interval <= 0 || !countersOnly(cur, next) {
		return 0
	}
	s.mu.Lock()
	last, ok := s.last[key]
	s.mu.Unlock()
	if !ok {
		return 0
	}
	since := now.Sub(last)
	if since < s.interval {
		return s.interval - since
	}
	if since >= s.hold {
		return 0
	}
	s.mu.Lock()
	s.held[key] = true
	s.mu.Unlock()
	if busy() {
		return s.hold - since
	}
	s.mu.Lock()
	delete(s.held, key)
	s.mu.Unlock()
	return 0
}

// drained reports, once, whether the DaemonSet has a write held while its pod
// writes were busy: they have drained, and it is to be synced.
func (s *statusPace) drained(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held[key] {
		return false
	}
	delete(s.held, key)
	return true
}

func (s *statusPace) wrote(key string, at time.Time) {
	s.mu.Lock()
	s.last[key] = at
	delete(s.held, key)
	s.mu.Unlock()
}

func (s *statusPace) forget(key string) {
	s.mu.Lock()
	delete(s.last, key)
	delete(s.held, key)
	s.mu.Unlock()
}

// countersOnly reports whether next differs from cur in the pod counters alone.
func countersOnly(cur, next *apps.DaemonSetStatus) bool {
	return next.ObservedGeneration == cur.ObservedGeneration &&
		equality.Semantic.DeepEqual(next.CollisionCount, cur.CollisionCount) &&
		equality.Semantic.DeepEqual(next.Conditions, cur.Conditions)
}
