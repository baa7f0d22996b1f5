package floorctl

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func poolSet(name, pool string) *daemonSet {
	ds := &apps.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
		Spec: apps.DaemonSetSpec{Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec:       v1.PodSpec{NodeSelector: map[string]string{"pool": pool}, Containers: []v1.Container{{Name: "c", Image: "i"}}},
		}}}
	return newDaemonSet(ds)
}

func nodeIn(pool string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": pool}}, Spec: v1.NodeSpec{Taints: taints}}
}

func podOf(s *daemonSet, name string, created time.Time) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
		CreationTimestamp: metav1.NewTime(created),
		OwnerReferences:   []metav1.OwnerReference{{Kind: "DaemonSet", Name: s.ds.Name, UID: s.ds.UID, Controller: ptr.To(true)}}},
		Spec: v1.PodSpec{NodeName: "n1"}, Status: v1.PodStatus{Phase: v1.PodRunning}}
}

func names[T any](items []T, name func(T) string) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, name(it))
	}
	return out
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a1, a2, b1, b2 := poolSet("a1", "a"), poolSet("a2", "a"), poolSet("b1", "b"), poolSet("b2", "b")
	sets := []*daemonSet{a1, a2, b1, b2}
	noExecute := v1.Taint{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute}
	noSchedule := v1.Taint{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}
	terminating := podOf(a1, "a1-gone", t0)
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	failed := podOf(a1, "a1-failed", t0)
	failed.Status.Phase = v1.PodFailed
	orphan := podOf(a1, "orphan", t0)
	orphan.OwnerReferences = nil
	tests := []struct {
		name         string
		node         *v1.Node
		pods         []*v1.Pod
		flight       inFlight
		create, gone []string
	}{
		{name: "a node moved from pool a to pool b: two creates, two deletes", node: nodeIn("b"),
			pods: []*v1.Pod{podOf(a1, "a1-x", t0), podOf(a2, "a2-x", t0)}, create: []string{"b1", "b2"}, gone: []string{"a1-x", "a2-x"}},
		{name: "a node with its pool's pods needs nothing", node: nodeIn("a"),
			pods: []*v1.Pod{podOf(a1, "a1-x", t0), podOf(a2, "a2-x", t0)}},
		{name: "a pod being deleted does not count", node: nodeIn("a"),
			pods: []*v1.Pod{terminating, podOf(a2, "a2-x", t0)}, create: []string{"a1"}},
		{name: "a finished pod is deleted and replaced", node: nodeIn("a"),
			pods: []*v1.Pod{failed, podOf(a2, "a2-x", t0)}, create: []string{"a1"}, gone: []string{"a1-failed"}},
		{name: "a pod no DaemonSet controls is left alone", node: nodeIn("a"),
			pods: []*v1.Pod{orphan, podOf(a1, "a1-x", t0), podOf(a2, "a2-x", t0)}},
		{name: "the second pod of a DaemonSet goes, the oldest stays", node: nodeIn("a"),
			pods: []*v1.Pod{podOf(a1, "a1-new", t0.Add(time.Second)), podOf(a1, "a1-old", t0), podOf(a2, "a2-x", t0)}, gone: []string{"a1-new"}},
		{name: "a create in flight counts as a pod", node: nodeIn("a"),
			pods:   []*v1.Pod{podOf(a2, "a2-x", t0)},
			flight: inFlight{created: map[types.UID]types.UID{"a1-flying": "a1"}}},
		{name: "a delete in flight counts as gone", node: nodeIn("b"),
			pods:   []*v1.Pod{podOf(a1, "a1-x", t0), podOf(a2, "a2-x", t0)},
			flight: inFlight{deleted: map[types.UID]bool{"a1-x": true}}, create: []string{"b1", "b2"}, gone: []string{"a2-x"}},
		{name: "an untolerated NoSchedule taint keeps running pods and places none", node: nodeIn("a", noSchedule),
			pods: []*v1.Pod{podOf(a1, "a1-x", t0)}},
		{name: "an untolerated NoExecute taint removes the pods", node: nodeIn("a", noExecute),
			pods: []*v1.Pod{podOf(a1, "a1-x", t0), podOf(a2, "a2-x", t0)}, gone: []string{"a1-x", "a2-x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(tc.node, sets, tc.pods, tc.flight)
			create := names(d.create, func(s *daemonSet) string { return s.ds.Name })
			gone := names(d.remove, func(p *v1.Pod) string { return p.Name })
			if !equalSets(create, tc.create) {
				t.Errorf("creates %v, want %v", create, tc.create)
			}
			if !equalSets(gone, tc.gone) {
				t.Errorf("deletes %v, want %v", gone, tc.gone)
			}
		})
	}
}

func equalSets(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	in := map[string]int{}
	for _, s := range got {
		in[s]++
	}
	for _, s := range want {
		in[s]--
	}
	for _, n := range in {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestNewPodsCarryTheDaemonTolerations(t *testing.T) {
	s := poolSet("a1", "a")
	d := decide(nodeIn("a"), []*daemonSet{s}, nil, inFlight{})
	if len(d.create) != 1 {
		t.Fatalf("creates %d pods, want 1", len(d.create))
	}
	terms := d.create[0].template.Spec.Tolerations
	if len(terms) == 0 {
		t.Error("the template carries no daemon tolerations")
	}
}
