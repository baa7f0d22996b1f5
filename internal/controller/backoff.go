package controller

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/everynode/everynode/internal/daemon"
)

// failedBackoff remembers, per DaemonSet and node, how many failed pods were
// deleted there and how long to leave the next one alone: daemon.FailedPodDelay of
// that count. A change of the DaemonSet's generation (a spec change) starts over.
// Each DaemonSet's is its dsState's backoff.
type failedBackoff struct {
	clock clock.PassiveClock
	st    *states
}

type dsBackoff struct {
	generation int64
	nodes      map[string]backoffEntry
}

type backoffEntry struct {
	failures int
	until    time.Time
}

func newFailedBackoff(c clock.PassiveClock, st *states) *failedBackoff {
	return &failedBackoff{clock: c, st: st}
}

// entry returns key's back-off, or nil when it has none; the caller holds the
// states' lock.
func (b *failedBackoff) entry(key string) *dsBackoff {
	if s := b.st.peek(key); s != nil && s.backoff.nodes != nil {
		return &s.backoff
	}
	return nil
}

// next records that a failed pod on node was deleted now, before which before
// others had failed there (as the pod recorded: a restarted controller takes the
// count up again), and lengthens the wait before the next one may be.
func (b *failedBackoff) next(key string, generation int64, node string, before int) {
	b.st.mu.Lock()
	defer b.st.mu.Unlock()
	e := &b.st.at(key).backoff
	if e.nodes == nil || e.generation != generation {
		*e = dsBackoff{generation: generation, nodes: map[string]backoffEntry{}}
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
	b.st.mu.Lock()
	defer b.st.mu.Unlock()
	e := b.entry(key)
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
	b.st.mu.Lock()
	defer b.st.mu.Unlock()
	e := b.entry(key)
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

// gc drops entries that have expired, so the table does not grow with node churn.
func (b *failedBackoff) gc() {
	b.st.mu.Lock()
	defer b.st.mu.Unlock()
	now := b.clock.Now()
	for _, s := range b.st.byKey {
		e := &s.backoff
		for node, entry := range e.nodes {
			if now.Sub(entry.until) > 2*daemon.FailedPodBackoffMax {
				delete(e.nodes, node)
			}
		}
		if len(e.nodes) == 0 {
			*e = dsBackoff{}
		}
	}
}

// tracked counts the DaemonSets with a back-off entry.
func (b *failedBackoff) tracked() int {
	b.st.mu.Lock()
	defer b.st.mu.Unlock()
	n := 0
	for _, s := range b.st.byKey {
		if len(s.backoff.nodes) > 0 {
			n++
		}
	}
	return n
}
