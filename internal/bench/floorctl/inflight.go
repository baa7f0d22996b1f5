package floorctl

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// flightExpiry is how long a write is remembered without the cache showing it: a
// bound on what a lost watch event could hold back.
const flightExpiry = time.Minute

// flights remembers, per node, the writes the pod cache does not show yet, so that a
// node decided again before its watch caught up gets no second pod. Each write is
// noted under the same lock as the cache's answer to "do you show it already?", and
// forgotten when the cache shows it: a pod seen (created) or seen going (deleted).
type flights struct {
	mu    sync.Mutex
	nodes map[string]*nodeFlights
}

type nodeFlights struct {
	created map[types.UID]flight // created pod → its DaemonSet
	deleted map[types.UID]time.Time
}

type flight struct {
	ds types.UID
	at time.Time
}

func newFlights() *flights { return &flights{nodes: map[string]*nodeFlights{}} }

func (f *flights) node(name string) *nodeFlights {
	n := f.nodes[name]
	if n == nil {
		n = &nodeFlights{created: map[types.UID]flight{}, deleted: map[types.UID]time.Time{}}
		f.nodes[name] = n
	}
	return n
}

// created notes that pod of ds was created on node, unless shown (asked under the
// lock) says the cache has it already.
func (f *flights) created(node string, pod, ds types.UID, at time.Time, shown func() bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !shown() {
		f.node(node).created[pod] = flight{ds: ds, at: at}
	}
}

// deleted notes that pod on node was deleted, unless shown (asked under the lock)
// says the cache shows it going already.
func (f *flights) deleted(node string, pod types.UID, at time.Time, shown func() bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !shown() {
		f.node(node).deleted[pod] = at
	}
}

// seen forgets the writes of pod: the cache shows it, or shows it going.
func (f *flights) seen(node string, pod types.UID, going bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[node]
	if n == nil {
		return
	}
	delete(n.created, pod)
	if going {
		delete(n.deleted, pod)
	}
	if len(n.created) == 0 && len(n.deleted) == 0 {
		delete(f.nodes, node)
	}
}

// of returns node's writes in flight at now, dropping those older than flightExpiry.
func (f *flights) of(node string, now time.Time) inFlight {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := inFlight{}
	n := f.nodes[node]
	if n == nil {
		return out
	}
	for pod, w := range n.created {
		if now.Sub(w.at) > flightExpiry {
			delete(n.created, pod)
			continue
		}
		if out.created == nil {
			out.created = map[types.UID]types.UID{}
		}
		out.created[pod] = w.ds
	}
	for pod, at := range n.deleted {
		if now.Sub(at) > flightExpiry {
			delete(n.deleted, pod)
			continue
		}
		if out.deleted == nil {
			out.deleted = map[types.UID]bool{}
		}
		out.deleted[pod] = true
	}
	return out
}
