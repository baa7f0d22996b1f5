package controller

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// The shared list follows the cache only when marked stale, and then shows the cache
// as it is.
func TestNodeListIsTheCacheAsOfTheLastStaleMark(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	node := func(name, rv string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	if err := store.Add(node("node-a", "1")); err != nil {
		t.Fatal(err)
	}
	l := newNodeList(corelisters.NewNodeLister(store))
	names := func() map[string]string {
		t.Helper()
		nodes, err := l.list()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, n := range nodes {
			got[n.Name] = n.ResourceVersion
		}
		return got
	}
	if got := names(); len(got) != 1 || got["node-a"] != "1" {
		t.Fatalf("first list: %v", got)
	}
	// A status-only update is not marked: the list keeps the object it had.
	if err := store.Update(node("node-a", "2")); err != nil {
		t.Fatal(err)
	}
	if err := store.Add(node("node-b", "3")); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 1 || got["node-a"] != "1" {
		t.Fatalf("before the mark the list changed: %v", got)
	}
	l.stale()
	if got := names(); len(got) != 2 || got["node-a"] != "2" || got["node-b"] != "3" {
		t.Fatalf("after the mark: %v, want node-a at 2 and node-b at 3", got)
	}
	if err := store.Delete(node("node-a", "2")); err != nil {
		t.Fatal(err)
	}
	l.stale()
	if got := names(); len(got) != 1 || got["node-b"] != "3" {
		t.Fatalf("after a delete and the mark: %v", got)
	}
}
