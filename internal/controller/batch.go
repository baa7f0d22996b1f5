package controller

import (
	"time"

	"k8s.io/utils/clock"
)

// syncBatcher spaces the syncs that pod and node events ask for: at most one per
// period for each DaemonSet. An event after a quiet period is synced at once; one that
// comes sooner waits for the rest of the period, and the events meanwhile share that
// sync: the first asks the queue for it, the others find it asked for (a busy
// DaemonSet's pods send hundreds of events a second; each delayed add would wake the
// queue's timer loop for nothing).
// Each DaemonSet's last start is its dsState's lastSync, and the delayed sync asked
// for its batchedFor.
type syncBatcher struct {
	period time.Duration
	clock  clock.PassiveClock
	st     *states
}

func newSyncBatcher(period time.Duration, c clock.PassiveClock, st *states) *syncBatcher {
	return &syncBatcher{period: period, clock: c, st: st}
}

// delay is how long a sync of key asked for now should wait, and false when a
// delayed sync asked for since the last sync started comes no later: the queue holds
// it, and since it starts after now it reads what made this one be asked for. A
// caller given true and a delay must add key to the queue after it.
func (b *syncBatcher) delay(key string) (time.Duration, bool) {
	if b.period <= 0 {
		return 0, true
	}
	b.st.mu.Lock()
	defer b.st.mu.Unlock()
	s := b.st.peek(key)
	if s == nil || s.lastSync.IsZero() {
		return 0, true
	}
	now := b.clock.Now()
	d := max(b.period-now.Sub(s.lastSync), 0)
	if d == 0 {
		return 0, true
	}
	at := now.Add(d)
	if s.batchedFor.After(now) && !s.batchedFor.After(at) {
		return d, false
	}
	s.batchedFor = at
	return d, true
}

// started records that a sync of key starts now. The delayed sync asked for before
// may be this one: the queue keeps one delayed add of a key, the earliest, so a
// retry's sooner add takes its place. The next event asks again.
func (b *syncBatcher) started(key string) {
	if b.period <= 0 {
		return
	}
	b.st.mu.Lock()
	s := b.st.at(key)
	s.lastSync, s.batchedFor = b.clock.Now(), time.Time{}
	b.st.mu.Unlock()
}
