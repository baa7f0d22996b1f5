package controller

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func indexedPod(name string, controller *metav1.OwnerReference) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
	if controller != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	return pod
}

func controllerRef(kind, uid string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: uid, UID: types.UID(uid), Controller: new(true)}
}

// list returns the pods held under each of keys, as a sync reads them.
func (x *podIndex) list(keys ...string) []*v1.Pod {
	pods, _, _, _ := x.read(keys, 0, false)
	return pods
}

func heldNames(pods []*v1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// The index follows each pod's controller through adoption, release and deletion,
// holds the newest object, and never holds pods of other kinds of controller.
func TestPodIndex(t *testing.T) {
	ds, other := controllerRef("DaemonSet", "ds-1"), controllerRef("DaemonSet", "ds-2")
	rs := controllerRef("ReplicaSet", "rs-1")
	orphans := orphanKey("default")
	x := newPodIndex()
	type want map[string][]string // by key, the pod names held
	steps := []struct {
		what string
		do   func()
		want want
	}{
		{"a DaemonSet's pod and an orphan added", func() {
			x.put(indexedPod("a", ds))
			x.put(indexedPod("b", nil))
		}, want{"ds-1": {"a"}, orphans: {"b"}}},
		{"a ReplicaSet's pod is not held", func() { x.put(indexedPod("c", rs)) },
			want{"ds-1": {"a"}, orphans: {"b"}, "rs-1": nil}},
		{"the orphan adopted", func() { x.put(indexedPod("b", ds)) }, want{"ds-1": {"a", "b"}, orphans: nil}},
		{"a pod released, then taken by a ReplicaSet", func() {
			x.put(indexedPod("a", nil))
			x.put(indexedPod("a", rs))
		}, want{"ds-1": {"b"}, orphans: nil}},
		{"a pod moved to another DaemonSet", func() { x.put(indexedPod("b", other)) },
			want{"ds-1": nil, "ds-2": {"b"}}},
		{"a pod deleted, its last known state stale", func() { x.remove(indexedPod("b", nil).UID) },
			want{"ds-2": nil, orphans: nil}},
	}
	for _, s := range steps {
		s.do()
		for key, pods := range s.want {
			if got := heldNames(x.list(key)); !slices.Equal(got, pods) {
				t.Errorf("%s: %s holds %v, want %v", s.what, key, got, pods)
			}
		}
	}
	if len(x.byKey) != 0 || len(x.keyOf) != 0 {
		t.Errorf("after every pod went: %d keys, %d pods held; want none", len(x.byKey), len(x.keyOf))
	}

	newer := indexedPod("d", ds)
	x.put(indexedPod("d", ds))
	x.put(newer)
	x.put(indexedPod("e", nil))
	if got := x.list("ds-1", orphans); len(got) != 2 || !slices.Contains(got, newer) {
		t.Errorf("list of ds-1 and the orphans = %v, want d as last put, and e", heldNames(got))
	}
}

// A read names the pods changed under its keys since an earlier one, as they are
// now: a DaemonSet's pod changed or gone, an orphan that came; a key whose pods all
// went since (and maybe came back) cannot say.
func TestPodIndexChanges(t *testing.T) {
	ds := controllerRef("DaemonSet", "ds-1")
	keys := []string{"ds-1", orphanKey("default")}
	x := newPodIndex()
	x.put(indexedPod("a", ds))
	x.put(indexedPod("b", ds))
	first, at, _, _ := x.read(keys, 0, false)

	newer := indexedPod("a", ds)
	x.put(newer)
	x.remove(indexedPod("b", nil).UID)
	x.put(indexedPod("c", nil))
	// The changes alone, before any read applied them to the shared pods.
	alone, changed, ok := x.changes(keys, at)
	if !ok || len(changed) != 3 || changed["uid-a"] != newer || changed["uid-b"] != nil || changed["uid-c"] == nil {
		t.Errorf("changes alone: ok %v, %v; want a as last put, b gone, c", ok, changed)
	}
	pods, now, changed, ok := x.read(keys, at, true)
	if alone != now {
		t.Errorf("changes alone stood at change %d, the read at %d", alone, now)
	}
	if got := heldNames(pods); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("after the changes: %v", got)
	}
	if got := heldNames(first); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("the earlier reader's pods changed under it: %v", got)
	}
	if !ok || len(changed) != 3 || changed["uid-a"] != newer || changed["uid-b"] != nil || changed["uid-c"] == nil {
		t.Errorf("changes: ok %v, %v; want a as last put, b gone, c", ok, changed)
	}
	if _, _, changed, ok := x.read(keys, now, true); !ok || len(changed) != 0 {
		t.Errorf("changes since the last read: ok %v, %v; want none", ok, changed)
	}

	x.remove("uid-a")
	x.put(indexedPod("d", ds)) // ds-1's set went with a, and came back
	if _, _, _, ok := x.read(keys, now, true); ok {
		t.Error("a set that went and came back answered for the time before")
	}
	x.remove("uid-d")
	if _, _, _, ok := x.read(keys, now, true); ok {
		t.Error("a DaemonSet whose pods all went answered")
	}
	if _, _, ok := x.changes(keys, now); ok {
		t.Error("a DaemonSet whose pods all went answered its changes alone")
	}
}
