package controller

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// nodeList is the node cache as the placement rules see it, kept by the node
// handler: a node's object is replaced when an event can change a verdict (a node
// added or deleted, its labels, taints or health changed). An event that changes
// only a node's status otherwise (heartbeats, other conditions) leaves the object it
// had: nothing else in a node's status decides where a daemon pod runs.
//
// The syncs share one slice of the nodes until the next change; the changes since
// the last read are applied to a copy at the next read, so a read is a pass over the
// nodes only when something changed, and listing the cache, a pass over its map,
// never happens. Every change is numbered and logged (changeLog), so that a sync can
// ask which nodes changed since the snapshot its Memo was made from and look at those
// alone.
//
// The node handler records a change before it enqueues the DaemonSets the event
// affects, so their syncs see the node as the event left it.
type nodeList struct {
	lister corelisters.NodeLister

	mu    sync.Mutex
	nodes sharedSet[string, *v1.Node]
	seq   uint64 // changes counted
	log   changeLog[string]
}

func newNodeList(lister corelisters.NodeLister) *nodeList {
	return &nodeList{lister: lister, nodes: newSharedSet(func(n *v1.Node) string { return n.Name })}
}

// put records node as it is now.
func (l *nodeList) put(node *v1.Node) { l.record(node.Name, node) }

// remove records that the node named name is gone.
func (l *nodeList) remove(name string) { l.record(name, nil) }

func (l *nodeList) record(name string, node *v1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.nodes.set(name, node)
	l.log.add(l.seq, name)
}

// read returns the nodes (callers must not modify the slice) and the number of the
// last change they show; with since, also the nodes changed after change number from,
// by name, as they are now (nil: deleted), unless the log no longer reaches back
// that far (ok false).
func (l *nodeList) read(from uint64, since bool) (nodes []*v1.Node, at uint64, changed map[string]*v1.Node, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nodes = l.nodes.read()
	if since {
		changed, ok = l.changedSince(from)
	}
	return nodes, l.seq, changed, ok
}

// changes is read with since, without the nodes: it copies none of them, so its
// cost is that of the changes alone.
func (l *nodeList) changes(from uint64) (at uint64, changed map[string]*v1.Node, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed, ok = l.changedSince(from)
	return l.seq, changed, ok
}

// changedSince is the nodes changed after change number from, by name, as they are
// now (nil: deleted), unless the log no longer reaches back that far. The caller
// locks.
func (l *nodeList) changedSince(from uint64) (map[string]*v1.Node, bool) {
	changed := map[string]*v1.Node{}
	ok := l.log.since(from, func(name string) { changed[name] = l.nodes.now(name) })
	return changed, ok
}
