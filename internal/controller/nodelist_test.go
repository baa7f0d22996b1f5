package controller

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The list shows every node as last put, none removed; a reader holding an earlier
// list keeps it as it was; the changes since a read name every node put or removed
// after it, as it is now, until the log no longer reaches back.
func TestNodeListChanges(t *testing.T) {
	node := func(name, rv string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	l := newNodeList(nil)
	versions := func(nodes []*v1.Node) map[string]string {
		got := map[string]string{}
		for _, n := range nodes {
			got[n.Name] = n.ResourceVersion
		}
		return got
	}
	l.put(node("a", "1"))
	l.put(node("b", "1"))
	first, at, _, _ := l.read(0, false)
	if got := versions(first); len(got) != 2 || got["a"] != "1" || got["b"] != "1" {
		t.Fatalf("first read: %v", got)
	}
	if again, _, _, _ := l.read(0, false); &again[0] != &first[0] {
		t.Error("a read with no change in between copied the list")
	}

	l.put(node("a", "2"))
	l.put(node("c", "1"))
	l.remove("b")
	// The changes alone, before any read applied them to the shared list.
	alone, changed, ok := l.changes(at)
	if !ok || len(changed) != 3 || changed["a"].ResourceVersion != "2" || changed["c"].ResourceVersion != "1" || changed["b"] != nil {
		t.Errorf("changes alone since the first read: ok %v, %v; want a at 2, c at 1, b deleted", ok, versions(nonNil(changed)))
	}
	nodes, now, changed, ok := l.read(at, true)
	if alone != now {
		t.Errorf("changes alone stood at change %d, the read at %d", alone, now)
	}
	if got := versions(nodes); len(got) != 2 || got["a"] != "2" || got["c"] != "1" {
		t.Errorf("after a change, an add and a delete: %v", got)
	}
	if got := versions(first); len(got) != 2 || got["a"] != "1" || got["b"] != "1" {
		t.Errorf("the earlier reader's list changed under it: %v", got)
	}
	if !ok || len(changed) != 3 || changed["a"].ResourceVersion != "2" || changed["c"].ResourceVersion != "1" || changed["b"] != nil {
		t.Errorf("changes since the first read: ok %v, %v; want a at 2, c at 1, b deleted", ok, versions(nonNil(changed)))
	}
	if _, _, changed, ok := l.read(now, true); !ok || len(changed) != 0 {
		t.Errorf("changes since the last read: ok %v, %d nodes; want none", ok, len(changed))
	}

	for i := range maxChangeLog + 1 {
		l.put(node("a", string(rune('a'+i%26))))
	}
	if _, _, _, ok := l.read(now, true); ok {
		t.Error("the log still reaches back past more changes than it keeps")
	}
	if _, _, ok := l.changes(now); ok {
		t.Error("the changes alone still reach back past more changes than the log keeps")
	}
}

func nonNil(m map[string]*v1.Node) []*v1.Node {
	var out []*v1.Node
	for _, n := range m {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}
