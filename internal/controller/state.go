package controller

import (
	"sync"
	"time"

	"github.com/everynode/everynode/internal/daemon"
	"k8s.io/client-go/tools/cache"
)

// dsState is what the controller keeps of one DaemonSet between its syncs: every
// table of it is a field here, created with the DaemonSet's first entry and forgotten
// with it in one place (Controller.forget), so nothing of a deleted DaemonSet is left
// behind and nothing stale greets one recreated under the same name.
//
// Each part has its keeper, which documents it: inflight (the writes sent and not
// yet seen), failedBackoff (failed pods per node), eligibilityCache (the parsed
// placement rules), syncBatcher (when the last sync started), statusPace (status
// writes spaced), ownWrites (the DaemonSet as the controller last wrote it), memos
// (the decision's Memo). The pod writes still queued are the writeQueue's, which
// orders them across DaemonSets; it forgets them with the rest.
type dsState struct {
	inflight dsInflight
	backoff  dsBackoff
	elig     cachedEligibility
	memo     *daemon.Memo
	lastSync time.Time
	pace     paceState
	written  ownWrite
}

// states holds the dsState of every DaemonSet by key. One lock guards them all; the
// keepers take it for a few map operations at a time and call nothing else while
// they hold it (the write queue may call a keeper with its own lock held, never the
// other way round).
type states struct {
	mu    sync.Mutex
	byKey map[string]*dsState
}

func newStates() *states { return &states{byKey: map[string]*dsState{}} }

// at returns key's state, making it if there is none; the caller holds mu.
func (s *states) at(key string) *dsState {
	st := s.byKey[key]
	if st == nil {
		st = &dsState{}
		s.byKey[key] = st
	}
	return st
}

// peek returns key's state, or nil; the caller holds mu.
func (s *states) peek(key string) *dsState { return s.byKey[key] }

// forget drops everything kept of key.
func (s *states) forget(key string) {
	s.mu.Lock()
	delete(s.byKey, key)
	s.mu.Unlock()
}

// keys counts the DaemonSets something is kept of.
func (s *states) keys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

// forget drops everything the controller keeps of the DaemonSet key — its state, the
// pod writes it still has queued, its metrics — when it is deleted, recreated under
// the same name, or (in companion mode) no longer one the controller manages.
func (c *Controller) forget(key string) {
	c.states.forget(key)
	c.writes.forget(key)
	if namespace, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		c.metrics.forget(namespace, name)
	}
}
