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
type statusPace struct {
	interval time.Duration

	mu   sync.Mutex
	last map[string]time.Time // when each DaemonSet's status was last written
}

func newStatusPace(interval time.Duration) *statusPace {
	return &statusPace{interval: interval, last: map[string]time.Time{}}
}

// wait returns how long the write of next over cur must wait, zero for at once.
func (s *statusPace) wait(key string, cur, next *apps.DaemonSetStatus, now time.Time) time.Duration {
	if s.interval <= 0 || !countersOnly(cur, next) {
		return 0
	}
	s.mu.Lock()
	last, ok := s.last[key]
	s.mu.Unlock()
	if !ok {
		return 0
	}
	return max(s.interval-now.Sub(last), 0)
}

func (s *statusPace) wrote(key string, at time.Time) {
	s.mu.Lock()
	s.last[key] = at
	s.mu.Unlock()
}

func (s *statusPace) forget(key string) {
	s.mu.Lock()
	delete(s.last, key)
	s.mu.Unlock()
}

// countersOnly reports whether next differs from cur in the pod counters alone.
func countersOnly(cur, next *apps.DaemonSetStatus) bool {
	return next.ObservedGeneration == cur.ObservedGeneration &&
		equality.Semantic.DeepEqual(next.CollisionCount, cur.CollisionCount) &&
		equality.Semantic.DeepEqual(next.Conditions, cur.Conditions)
}
