package controller

import (
	"context"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/fakeapi"
)

// A sync that runs before the cache has seen the controller's previous status write
// still stores its status: it builds on the object that write returned instead of
// the stale cached one, which the API server would refuse with a Conflict.
func TestSync_StatusBuildsOnOwnWriteWhileCacheLags(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	fakeapi.Install(client, fakeapi.Options{})
	c, factory := newIdleControllerFor(t, client)
	add := func(inf cache.SharedIndexInformer, obj any) {
		t.Helper()
		if err := inf.GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	node, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: map[string]string{v1.LabelHostname: "node-0"}},
		Status:     v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add(factory.Core().V1().Nodes().Informer(), node)
	c.nodes.put(node) // as the node handler would
	cached, err := client.AppsV1().DaemonSets(testNamespace).Create(ctx, newDaemonSet("agent"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add(factory.Apps().V1().DaemonSets().Informer(), cached)
	key := testNamespace + "/agent"

	// First sync: a pod for node-0 and a status counting it as desired.
	if _, err := c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	flushWrites(ctx, c)
	pods, err := client.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("after the first sync: pods %v, err %v; want one", len(pods.Items), err)
	}
	revs, err := client.AppsV1().ControllerRevisions(testNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(revs.Items) != 1 {
		t.Fatalf("after the first sync: revisions %v, err %v; want one", len(revs.Items), err)
	}
	add(factory.Apps().V1().ControllerRevisions().Informer(), &revs.Items[0])

	// The pod shows up in the cache Running and Ready; the DaemonSet in the cache is
	// still the one from before the status write.
	pod := pods.Items[0].DeepCopy()
	pod.Spec.NodeName = "node-0"
	pod.Status.Phase = v1.PodRunning
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	add(factory.Core().V1().Pods().Informer(), pod)
	c.podHandler(klog.Background()).OnAdd(pod, false)

	if _, err := c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	stored, err := client.AppsV1().DaemonSets(testNamespace).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := stored.Status; s.NumberReady != 1 || s.NumberAvailable != 1 || s.ObservedGeneration != stored.Generation {
		t.Errorf("stored status after the second sync = %+v; want the ready pod counted and generation %d observed", s, stored.Generation)
	}
}

func TestOwnWrites_UsedOnlyWhileTheCacheLags(t *testing.T) {
	ds := func(rv string, uid types.UID) *apps.DaemonSet {
		return &apps.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", ResourceVersion: rv, UID: uid}}
	}
	w := newOwnWrites(newStates())
	if got := w.freshest("k", ds("1", "a")); got.ResourceVersion != "1" {
		t.Fatalf("no write yet: got %s, want the cached 1", got.ResourceVersion)
	}
	w.note("k", "1", ds("2", "a"))
	w.note("k", "2", ds("3", "a")) // a write built on the previous one
	if got := w.freshest("k", ds("1", "a")); got.ResourceVersion != "3" {
		t.Errorf("cache at 1 after writes from 1: got %s, want the latest write 3", got.ResourceVersion)
	}
	if got := w.freshest("k", ds("2", "a")); got.ResourceVersion != "3" {
		t.Errorf("cache at the first write of the chain: got %s, want the latest write 3", got.ResourceVersion)
	}
	if got := w.freshest("k", ds("1", "b")); got.ResourceVersion != "1" || got.UID != "b" {
		t.Errorf("a DaemonSet recreated under the same name: got %s/%s, want the cached one", got.ResourceVersion, got.UID)
	}
	w.note("k", "1", ds("2", "a"))
	if got := w.freshest("k", ds("2", "a")); got.ResourceVersion != "2" {
		t.Errorf("cache caught up: got %s, want 2", got.ResourceVersion)
	}
	if got := w.freshest("k", ds("1", "a")); got.ResourceVersion != "1" {
		t.Errorf("record dropped once the cache moved: got %s, want the cached 1", got.ResourceVersion)
	}
}
