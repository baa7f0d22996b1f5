package controller

import (
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

	st *states
}

// paceState is one DaemonSet's part of the pace.
type paceState struct {
	last time.Time // when its status was last written (zero: never)
	held bool      // a write is held while its pod writes are busy
}

func newStatusPace(interval, hold time.Duration, st *states) *statusPace {
	return &statusPace{interval: interval, hold: hold, st: st}
}

// setHeld notes, or clears, a write held for key.
func (s *statusPace) setHeld(key string, held bool) {
	s.st.mu.Lock()
	if st := s.st.peek(key); st != nil || held {
		s.st.at(key).pace.held = held
	}
	s.st.mu.Unlock()
}

// wait returns how long the write of next over cur must wait, zero for at once.
// busy reports whether the DaemonSet's pod writes are queued or in flight; it is
// asked after the hold is noted, so that a drain that races with it is not missed.
func (s *statusPace) wait(key string, cur, next *apps.DaemonSetStatus, now time.Time, busy func() bool) time.Duration {
	if s.interval <= 0 || !countersOnly(cur, next) {
		return 0
	}
	s.st.mu.Lock()
	var last time.Time
	if st := s.st.peek(key); st != nil {
		last = st.pace.last
	}
	s.st.mu.Unlock()
	if last.IsZero() {
		return 0
	}
	since := now.Sub(last)
	if since < s.interval {
		return s.interval - since
	}
	if since >= s.hold {
		return 0
	}
	s.setHeld(key, true)
	if busy() {
		return s.hold - since
	}
	s.setHeld(key, false)
	return 0
}

// drained reports, once, whether the DaemonSet has a write held while its pod
// writes were busy: they have drained, and it is to be synced.
func (s *statusPace) drained(key string) bool {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	st := s.st.peek(key)
	if st == nil || !st.pace.held {
		return false
	}
	st.pace.held = false
	return true
}

func (s *statusPace) wrote(key string, at time.Time) {
	s.st.mu.Lock()
	s.st.at(key).pace = paceState{last: at}
	s.st.mu.Unlock()
}

// countersOnly reports whether next differs from cur in the pod counters alone.
func countersOnly(cur, next *apps.DaemonSetStatus) bool {
	return next.ObservedGeneration == cur.ObservedGeneration &&
		equality.Semantic.DeepEqual(next.CollisionCount, cur.CollisionCount) &&
		equality.Semantic.DeepEqual(next.Conditions, cur.Conditions)
}
