package controller

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/everynode/everynode/internal/daemon"
)

// shownInflight is what a DaemonSet's last view of its writes in flight showed:
// which nodes have a create and which pods a delete in flight. Every change of the
// tables names its node or pod here (putCreate, dropCreate, putDelete, dropDelete),
// and the next view brings only those up to date and names them in its Changes, so
// that a view, and a Memo's decision with it, cost what changed rather than what is
// in flight: at thousands of queued creates, the difference between a sync that
// grows with the backlog and one that does not.
//
// The maps a view hands out are these: they are the caller's (one sync at a time
// per DaemonSet) until its next view, which updates them. A caller that takes a node
// out of its view (hideCreates) has it named again by the next.
type shownInflight struct {
	creates map[string]bool // nil: nothing shown yet, the next view copies the tables
	deletes map[types.UID]bool
	at      uint64 // the last view's At
	// changedCreates and changedDeletes are the nodes and pods whose writes changed
	// since the last view.
	changedCreates map[string]struct{}
	changedDeletes map[types.UID]struct{}
}

// next brings the shown writes up to e's tables and returns them as the view
// numbered at.
func (s *shownInflight) next(e *dsInflight, at uint64) daemon.InFlight {
	since := s.at
	s.at = at
	if s.creates == nil {
		s.creates = make(map[string]bool, len(e.creates))
		s.deletes = make(map[types.UID]bool, len(e.deletes))
		for node := range e.creates {
			s.creates[node] = true
		}
		for uid := range e.deletes {
			s.deletes[uid] = true
		}
		clear(s.changedCreates)
		clear(s.changedDeletes)
		return daemon.InFlight{Creates: s.creates, Deletes: s.deletes, At: at}
	}
	ch := &daemon.InFlightChanges{Since: since,
		Creates: refresh(s.creates, e.creates, s.changedCreates),
		Deletes: refresh(s.deletes, e.deletes, s.changedDeletes)}
	return daemon.InFlight{Creates: s.creates, Deletes: s.deletes, At: at, Changes: ch}
}

// refresh brings the shown keys that changed up to table, forgets them as changed,
// and returns them.
func refresh[K comparable](shown map[K]bool, table map[K]*podWrite, changed map[K]struct{}) []K {
	out := make([]K, 0, len(changed))
	for k := range changed {
		if _, in := table[k]; in {
			shown[k] = true
		} else {
			delete(shown, k)
		}
		out = append(out, k)
	}
	clear(changed)
	return out
}

func (s *shownInflight) createChanged(node string) { mark(&s.changedCreates, node) }

func (s *shownInflight) deleteChanged(uid types.UID) { mark(&s.changedDeletes, uid) }

// mark adds k to the set, making the set if there is none.
func mark[K comparable](set *map[K]struct{}, k K) {
	if *set == nil {
		*set = map[K]struct{}{}
	}
	(*set)[k] = struct{}{}
}

// putCreate, dropCreate, putDelete and dropDelete are the only changes of the
// create and delete tables.
func (e *dsInflight) putCreate(node string, w *podWrite) {
	e.creates[node] = w
	e.shown.createChanged(node)
}

func (e *dsInflight) dropCreate(node string) {
	if _, ok := e.creates[node]; ok {
		delete(e.creates, node)
		e.shown.createChanged(node)
	}
}

func (e *dsInflight) putDelete(uid types.UID, w *podWrite) {
	e.deletes[uid] = w
	e.shown.deleteChanged(uid)
}

func (e *dsInflight) dropDelete(uid types.UID) {
	if _, ok := e.deletes[uid]; ok {
		delete(e.deletes, uid)
		e.shown.deleteChanged(uid)
	}
}

// hideCreates takes nodes' creates out of v, the last view of key's writes: the sync
// decides those nodes as if no create were in flight for them (the creates still
// queued it replaces). v names them as changed, and so will the next view.
func (f *inflight) hideCreates(key string, v *daemon.InFlight, nodes []string) {
	if len(nodes) == 0 {
		return
	}
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	e := f.peek(key)
	for _, node := range nodes {
		delete(v.Creates, node)
		if v.Changes != nil {
			v.Changes.Creates = append(v.Changes.Creates, node)
		}
		if e != nil {
			e.shown.createChanged(node)
		}
	}
}
