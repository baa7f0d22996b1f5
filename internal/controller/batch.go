package controller

import (
	"time"

	"k8s.io/utils/clock"
)

// syncBatcher spaces the syncs that pod and node events ask for: at most one per
// period for each DaemonSet. An event after a quiet period is synced at once; one that
// comes sooner waits for the rest of the period, and the events meanwhile share that
// sync (the queue keeps a key's earliest delayed add).
// Each DaemonSet's last start is its dsState's lastSync.
type syncBatcher struct {
	period time.Duration
	clock  clock.PassiveClock
	st     *states
}

func newSyncBatcher(period time.Duration, c clock.PassiveClock, st *states) *syncBatcher {
	return &syncBatcher{period: period, clock: c, st: st}
}

// delay is how long a sync of key asked for now should wait.
func (b *syncBatcher) delay(key string) time.Duration {
	if b.period <= 0 {
		return 0
	}
	b.st.mu.Lock()
	defer b.st.mu.Unlock()
	s := b.st.peek(key)
	if s == nil || s.lastSync.IsZero() {
		return 0
	}
	return max(b.period-b.clock.Since(s.lastSync), 0)
}

// started records that a sync of key starts now.
func (b *syncBatcher) started(key string) {
	if b.period <= 0 {
		return
	}
	b.st.mu.Lock()
	b.st.at(key).lastSync = b.clock.Now()
	b.st.mu.Unlock()
}
