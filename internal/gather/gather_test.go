package gather

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/everynode/everynode/internal/daemon"
)

// The API and the informer caches yield the same objects: every node, and the pods
// and revisions of the DaemonSet's namespace only.
func TestListAndListersReadTheSameObjects(t *testing.T) {
	ds := &apps.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns"}}
	client := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other"}},
		&apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Namespace: "ns"}},
		&apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "x-1", Namespace: "other"}},
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fromAPI, err := List(ctx, client, ds)
	if err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(client, 0)
	l := Listers{Nodes: f.Core().V1().Nodes().Lister(), Pods: f.Core().V1().Pods().Lister(),
		Revisions: f.Apps().V1().ControllerRevisions().Lister()}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	fromCache, err := l.List(ds)
	if err != nil {
		t.Fatal(err)
	}
	for name, objs := range map[string]Objects{"the API": fromAPI, "the caches": fromCache} {
		if got := names(objs); !reflect.DeepEqual(got, []string{"n1", "n2", "p", "agent-1"}) {
			t.Errorf("from %s: %v, want every node and the namespace's pod and revision", name, got)
		}
	}
}

// A snapshot holds what it was given, the time, the controller's state and the
// rollout annotations parsed once.
func TestSnapshotCarriesTheParsedPolicy(t *testing.T) {
	ds := &apps.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns",
		Annotations: map[string]string{daemon.AnnotationPaused: "true", daemon.AnnotationWaves: "zone"}}}
	objs := Objects{Nodes: []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Snapshot(ds, objs, now, Controller{MaxCreates: 7, Backoff: map[string]time.Time{"n1": now}})
	if s.DaemonSet != ds || len(s.Nodes) != 1 || !s.Now.Equal(now) || s.MaxCreates != 7 || len(s.Backoff) != 1 {
		t.Errorf("snapshot %+v does not hold what it was given", s)
	}
	if s.Policy == nil || !s.Policy.Paused || s.Policy.WaveKey != "zone" {
		t.Errorf("policy %+v, want the annotations parsed: paused, waves by zone", s.Policy)
	}
}

// names lists the objects' names, nodes, pods, then revisions, each kind sorted:
// a lister returns objects in no particular order.
func names(objs Objects) []string {
	var nodes, pods, revisions []string
	for _, n := range objs.Nodes {
		nodes = append(nodes, n.Name)
	}
	for _, p := range objs.Pods {
		pods = append(pods, p.Name)
	}
	for _, r := range objs.Revisions {
		revisions = append(revisions, r.Name)
	}
	slices.Sort(nodes)
	slices.Sort(pods)
	slices.Sort(revisions)
	return slices.Concat(nodes, pods, revisions)
}
