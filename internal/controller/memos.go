package controller

import "github.com/everynode/everynode/internal/daemon"

// memos keeps each DaemonSet's decision Memo between its syncs, so that the sync of a
// DaemonSet whose work is per node looks only at the nodes and pods that changed and
// those with writes in flight (see daemon.Memo).
// The workqueue never syncs one key twice at once, so a Memo has one user at a time.
type memos struct{ st *states }

func newMemos(st *states) *memos { return &memos{st: st} }

func (m *memos) get(key string) *daemon.Memo {
	m.st.mu.Lock()
	defer m.st.mu.Unlock()
	if s := m.st.peek(key); s != nil {
		return s.memo
	}
	return nil
}

// set keeps memo for key; nil drops it.
func (m *memos) set(key string, memo *daemon.Memo) {
	m.st.mu.Lock()
	defer m.st.mu.Unlock()
	if s := m.st.peek(key); s != nil || memo != nil {
		m.st.at(key).memo = memo
	}
}
