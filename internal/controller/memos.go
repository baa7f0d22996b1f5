package controller

import (
	"sync"

	"github.com/everynode/everynode/internal/daemon"
)

// memos keeps each DaemonSet's decision Memo between its syncs, so that the sync of a
// DaemonSet whose work is per node looks only at the nodes and pods that changed and
// those with writes in flight (see daemon.Memo).
// The workqueue never syncs one key twice at once, so a Memo has one user at a time.
type memos struct {
	mu    sync.Mutex
	byKey map[string]*daemon.Memo
}

func newMemos() *memos {
	return &memos{byKey: map[string]*daemon.Memo{}}
}

func (m *memos) get(key string) *daemon.Memo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byKey[key]
}

// set keeps memo for key; nil forgets it.
func (m *memos) set(key string, memo *daemon.Memo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if memo == nil {
		delete(m.byKey, key)
		return
	}
	m.byKey[key] = memo
}
