package controller

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// syncBatcher spaces the syncs that pod and node events ask for: at most one per
// period for each DaemonSet. An event after a quiet period is synced at once; one that
// comes sooner waits for the rest of the period, and the events meanwhile share that
// sync (the queue keeps a key's earliest delayed add).
type syncBatcher struct {
	period time.Duration
	clock  clock.PassiveClock
	mu     sync.Mutex
	last   map[string]time.Time // DaemonSet key -> when its last sync started
}

func newSyncBatcher(period time.Duration, c clock.PassiveClock) *syncBatcher {
	return &syncBatcher{period: period, clock: c, last: map[string]time.Time{}}
}

// delay is how long a sync of key asked for now should wait.
func (b *syncBatcher) delay(key string) time.Duration {
	if b.period <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	last, ok := b.last[key]
	if !ok {
		return 0
	}
	return max(b.period-b.clock.Since(last), 0)
}

// started records that a sync of key starts now.
func (b *syncBatcher) started(key string) {
	if b.period <= 0 {
		return
	}
	b.mu.Lock()
	b.last[key] = b.clock.Now()
	b.mu.Unlock()
}

// forget drops a DaemonSet that no longer exists.
func (b *syncBatcher) forget(key string) {
	b.mu.Lock()
	delete(b.last, key)
	b.mu.Unlock()
}
