package bench

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// For the floor controller, which writes no status, convergence is read from the
// pods: one live pod on each node the DaemonSet should run on, ready as wanted, none
// elsewhere.
func TestPodsShort(t *testing.T) {
	ds := daemonSet("pool-0")
	ds.UID = "ds-uid"
	ds.Spec.Template.Spec.NodeSelector = map[string]string{labelPool: "p0"}
	node := func(name, pool string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelPool: pool}}}
	}
	pod := func(name, node string, ready bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, UID: types.UID(name),
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)}}},
			Spec: v1.PodSpec{NodeName: node}, Status: v1.PodStatus{Phase: v1.PodRunning}}
		if ready {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		}
		return p
	}
	terminating := pod("gone", "b", true)
	terminating.DeletionTimestamp = &metav1.Time{}
	want := map[string]dsWant{ds.Name: {Desired: 2, Available: 2}}
	tests := []struct {
		name  string
		pods  []*v1.Pod
		short string // "" when converged
	}{
		{name: "a ready pod on each of its nodes", pods: []*v1.Pod{pod("1", "a", true), pod("2", "b", true)}},
		{name: "a pod being deleted does not count", pods: []*v1.Pod{pod("1", "a", true), terminating}, short: "pods on 1/2 nodes"},
		{name: "a pod not yet ready", pods: []*v1.Pod{pod("1", "a", true), pod("2", "b", false)}, short: "1 ready (want 2)"},
		{name: "a pod on a node of another pool", pods: []*v1.Pod{pod("1", "a", true), pod("2", "b", true), pod("3", "c", true)}, short: "1 misplaced"},
		{name: "two pods on one node", pods: []*v1.Pod{pod("1", "a", true), pod("2", "b", true), pod("3", "b", true)}, short: "1 misplaced"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, n := range []*v1.Node{node("a", "p0"), node("b", "p0"), node("c", "p1")} {
				_ = nodes.Add(n)
			}
			sets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			_ = sets.Add(ds)
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, p := range tc.pods {
				_ = pods.Add(p)
			}
			w := &watcher{nodeIdx: nodes, ds: appslisters.NewDaemonSetLister(sets), podList: corelisters.NewPodLister(pods)}
			got := strings.Join(w.podsShort(want), "; ")
			switch {
			case tc.short == "" && got != "":
				t.Errorf("not converged: %s", got)
			case tc.short != "" && !strings.Contains(got, tc.short):
				t.Errorf("short: %q, want it to say %q", got, tc.short)
			}
		})
	}
}
