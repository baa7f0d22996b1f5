package controller

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Failed-pod backoff bounds: a node whose daemon pod keeps failing is retried after
// 1s, 2s, 4s, ... up to 15 minutes.
const (
	backoffInitial = time.Second
	backoffMax     = 15 * time.Minute
)

// failedBackoff remembers, per DaemonSet and node, how long to leave the next failed
// pod alone. A change of the DaemonSet's generation (a spec change) starts over.
type failedBackoff struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byDS  map[string]*dsBackoff
}

type dsBackoff struct {
	generation int64
	nodes      map[string]backoffEntry
}

type backoffEntry struct {
	delay time.Duration
	until time.Time
}

func newFailedBackoff(c clock.PassiveClock) *failedBackoff {
	return &failedBackoff{clock: c, byDS: map[string]*dsBackoff{}}
}

// next records that a failed pod on node was deleted now, and lengthens the wait
// before the next one may be.
func (b *failedBackoff) next(key string, generation int64, node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byDS[key]
	if e == nil || e.generation != generation {
		e = &dsBackoff{generation: generation, nodes: map[string]backoffEntry{}}
		b.byDS[key] = e
	}
	now := b.clock.Now()
	prev, ok := e.nodes[node]
	delay := backoffInitial
	// An entry left alone for twice the longest delay has expired: start over.
	if ok && now.Sub(prev.until) <= 2*backoffMax {
		delay = min(2*prev.delay, backoffMax)
	}
	e.nodes[node] = backoffEntry{delay: delay, until: now.Add(delay)}
}

// view returns the nodes of a DaemonSet still in backoff, with their end times.
func (b *failedBackoff) view(key string, generation int64) map[string]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byDS[key]
	if e == nil || e.generation != generation {
		return nil
	}
	now := b.clock.Now()
	var out map[string]time.Time
	for node, entry := range e.nodes {
		if now.Before(entry.until) {
			if out == nil {
				out = map[string]time.Time{}
			}
			out[node] = entry.until
		}
	}
	return out
}

func (b *failedBackoff) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byDS, key)
}

// gc drops entries that have expired, so the table does not grow with node churn.
func (b *failedBackoff) gc() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for key, e := range b.byDS {
		for node, entry := range e.nodes {
			if now.Sub(entry.until) > 2*backoffMax {
				delete(e.nodes, node)
			}
		}
		if len(e.nodes) == 0 {
			delete(b.byDS, key)
		}
	}
}
