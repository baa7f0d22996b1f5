package controller

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/everynode/everynode/internal/daemon"
)

// failedBackoff remembers, per DaemonSet and node, how many failed pods were
// deleted there and how long to leave the next one alone: daemon.FailedPodDelay of
// that count. A change of the DaemonSet's generation (a spec change) starts over.
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
	failures int
	until    time.Time
}

func newFailedBackoff(c clock.PassiveClock) *failedBackoff {
	return &failedBackoff{clock: c, byDS: map[string]*dsBackoff{}}
}

// next records that a failed pod on node was deleted now, before which before
// others had failed there (as the pod recorded: a restarted controller takes the
// count up again), and lengthens the wait before the next one may be.
func (b *failedBackoff) next(key string, generation int64, node string, before int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byDS[key]
	if e == nil || e.generation != generation {
		e = &dsBackoff{generation: generation, nodes: map[string]backoffEntry{}}
		b.byDS[key] = e
	}
	now := b.clock.Now()
	failures := before
	// An entry left alone for twice the longest delay has expired: start over.
	if prev, ok := e.nodes[node]; ok && now.Sub(prev.until) <= 2*daemon.FailedPodBackoffMax {
		failures = max(failures, prev.failures)
	}
	failures++
	e.nodes[node] = backoffEntry{failures: failures, until: now.Add(daemon.FailedPodDelay(failures))}
}

// failures returns, per node of a DaemonSet, how many failed pods were deleted there
// at this generation, for the entries that have not expired.
func (b *failedBackoff) failures(key string, generation int64) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byDS[key]
	if e == nil || e.generation != generation {
		return nil
	}
	now := b.clock.Now()
	var out map[string]int
	for node, entry := range e.nodes {
		if now.Sub(entry.until) <= 2*daemon.FailedPodBackoffMax {
			if out == nil {
				out = map[string]int{}
			}
			out[node] = entry.failures
		}
	}
	return out
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
			if now.Sub(entry.until) > 2*daemon.FailedPodBackoffMax {
				delete(e.nodes, node)
			}
		}
		if len(e.nodes) == 0 {
			delete(b.byDS, key)
		}
	}
}
