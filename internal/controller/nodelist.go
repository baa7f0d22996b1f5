package controller

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// nodeList is the node cache's list as the placement rules see it, shared by the syncs
// until a node event that can change a verdict (a node added or deleted, its labels or
// taints changed) marks it stale. Listing every node is a pass over the cache's map
// per sync; at thousands of nodes and many syncs a second, most of those passes would
// return the same list. An event that changes only a node's status (heartbeats,
// conditions) leaves the list as it is: nothing in a node's status decides where a
// daemon pod runs.
//
// The node handler marks the list stale before it enqueues the DaemonSets the event
// affects, so their syncs see the node as the event left it.
type nodeList struct {
	lister corelisters.NodeLister

	mu    sync.Mutex
	nodes []*v1.Node
	fresh bool
}

func newNodeList(lister corelisters.NodeLister) *nodeList {
	return &nodeList{lister: lister}
}

// list returns the nodes; callers must not modify the slice.
func (l *nodeList) list() ([]*v1.Node, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fresh {
		return l.nodes, nil
	}
	nodes, err := l.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	l.nodes, l.fresh = nodes, true
	return nodes, nil
}

// stale makes the next list read the cache again.
func (l *nodeList) stale() {
	l.mu.Lock()
	l.fresh = false
	l.nodes = nil
	l.mu.Unlock()
}
