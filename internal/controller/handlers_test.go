package controller

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// newIdleController builds a Controller whose informers are never started, with dss
// in its DaemonSet cache, so that handlers can be called directly.
func newIdleController(t *testing.T, dss ...*apps.DaemonSet) *Controller {
	t.Helper()
	c, factory := newIdleControllerFor(t, fake.NewClientset())
	indexer := factory.Apps().V1().DaemonSets().Informer().GetIndexer()
	for _, ds := range dss {
		if err := indexer.Add(ds); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// newIdleControllerFor builds a Controller on client whose informers are never
// started: the test fills their caches.
func newIdleControllerFor(t *testing.T, client *fake.Clientset) (*Controller, informers.SharedInformerFactory) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(ctx, client, factory, Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.queue.ShutDown()
		c.events.Shutdown()
		cancel()
	})
	return c, factory
}

// queued drains the queue and returns its keys.
func queued(c *Controller) []string {
	keys := []string{}
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		keys = append(keys, key)
		c.queue.Done(key)
		c.queue.Forget(key)
	}
	slices.Sort(keys)
	return keys
}

func TestNodeHandler_WakesOnlyDaemonSetsWhoseVerdictChanges(t *testing.T) {
	workers := newDaemonSet("workers")
	workers.UID = types.UID("uid-workers")
	workers.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"}
	everywhere := newDaemonSet("everywhere")
	everywhere.UID = types.UID("uid-everywhere")

	base := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0", ResourceVersion: "10",
			Labels: map[string]string{"role": "worker", v1.LabelHostname: "node-0"}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()},
		}},
	}
	for _, tc := range []struct {
		name   string
		change func(*v1.Node)
		want   []string
	}{{
		name: "heartbeat: status and resourceVersion only",
		change: func(n *v1.Node) {
			n.ResourceVersion = "11"
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Minute))
			n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
		},
	}, {
		name:   "label change that makes the node ineligible for one DaemonSet",
		change: func(n *v1.Node) { n.ResourceVersion = "11"; n.Labels["role"] = "database" },
		want:   []string{"default/workers"},
	}, {
		name:   "label change that affects no verdict",
		change: func(n *v1.Node) { n.ResourceVersion = "11"; n.Labels[v1.LabelTopologyZone] = "zone-a" },
	}, {
		name: "untolerated NoSchedule taint: new pods no longer placed",
		change: func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "example.com/dedicated", Effect: v1.TaintEffectNoSchedule}}
		},
		want: []string{"default/everywhere", "default/workers"},
	}, {
		name: "taint every daemon pod tolerates",
		change: func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}}
		},
	}, {
		name: "PreferNoSchedule taint",
		change: func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "example.com/busy", Effect: v1.TaintEffectPreferNoSchedule}}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newIdleController(t, workers, everywhere)
			cur := base.DeepCopy()
			tc.change(cur)
			c.nodeHandler(testr.New(t)).OnUpdate(base, cur)
			if got := c.queue.Len(); got != len(tc.want) {
				t.Errorf("queue length %d, want %d", got, len(tc.want))
			}
			if got := queued(c); !slices.Equal(got, tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeHandler_AddAndDeleteWakeDaemonSetsThatWantTheNode(t *testing.T) {
	workers := newDaemonSet("workers")
	workers.UID = types.UID("uid-workers")
	workers.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"}
	everywhere := newDaemonSet("everywhere")
	everywhere.UID = types.UID("uid-everywhere")
	plain := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}
	worker := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"role": "worker"}}}

	c := newIdleController(t, workers, everywhere)
	handler := c.nodeHandler(testr.New(t))
	handler.OnAdd(plain, false)
	if got, want := queued(c), []string{"default/everywhere"}; !slices.Equal(got, want) {
		t.Errorf("adding an unlabelled node queued %v, want %v", got, want)
	}
	handler.OnAdd(worker, false)
	if got, want := queued(c), []string{"default/everywhere", "default/workers"}; !slices.Equal(got, want) {
		t.Errorf("adding a worker queued %v, want %v", got, want)
	}
	handler.OnDelete(plain)
	if got, want := queued(c), []string{"default/everywhere"}; !slices.Equal(got, want) {
		t.Errorf("deleting an unlabelled node queued %v, want %v", got, want)
	}
}

// A DaemonSet update that changes only its status (the controller's own status
// writes) wakes nothing; a change of annotations, generation or collision count does,
// and so does a resync.
func TestDaemonSetHandler_StatusOnlyUpdatesWakeNothing(t *testing.T) {
	base := newDaemonSet("agent")
	base.UID, base.ResourceVersion = "uid-agent", "1"
	c := newIdleController(t, base)
	h := c.daemonSetHandler(testr.New(t))
	tests := []struct {
		name   string
		change func(*apps.DaemonSet)
		wake   bool
	}{
		{name: "status counters", change: func(ds *apps.DaemonSet) { ds.Status.NumberReady = 3 }},
		{name: "status conditions", change: func(ds *apps.DaemonSet) {
			ds.Status.Conditions = []apps.DaemonSetCondition{{Type: "Progressing", Status: v1.ConditionTrue}}
		}},
		{name: "collision count", change: func(ds *apps.DaemonSet) { ds.Status.CollisionCount = new(int32) }, wake: true},
		{name: "annotation", change: func(ds *apps.DaemonSet) { ds.Annotations["rollout.everynode.dev/paused"] = "true" }, wake: true},
		{name: "generation", change: func(ds *apps.DaemonSet) { ds.Generation++ }, wake: true},
		{name: "being deleted", change: func(ds *apps.DaemonSet) { now := metav1.Now(); ds.DeletionTimestamp = &now }, wake: true},
		{name: "resync", change: func(ds *apps.DaemonSet) { ds.ResourceVersion = "1" }, wake: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := base.DeepCopy()
			cur.ResourceVersion = "2"
			tt.change(cur)
			h.OnUpdate(base, cur)
			got := queued(c)
			if woke := len(got) == 1; woke != tt.wake {
				t.Errorf("queued %v after a %s change; want a wake: %v", got, tt.name, tt.wake)
			}
		})
	}
}

// flushWrites sends the queued pod writes of a controller that is not running, one
// after another, in order.
func flushWrites(ctx context.Context, c *Controller) {
	for c.writes.len() > 0 {
		w, ok := c.writes.next(ctx, nil)
		if !ok {
			return
		}
		c.send(ctx, w)
	}
}

// sameControllerRef must agree with reflect.DeepEqual on controller references: on
// nil, on each field changed alone, and on equal flags held in different pointers.
func TestSameControllerRefIsDeepEqual(t *testing.T) {
	if n := reflect.TypeFor[metav1.OwnerReference]().NumField(); n != 6 {
		t.Fatalf("OwnerReference has %d fields, sameControllerRef compares 6: compare the new ones too", n)
	}
	base := func() *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u1",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	}
	variants := map[string]*metav1.OwnerReference{"nil": nil, "same": base()}
	for name, change := range map[string]func(*metav1.OwnerReference){
		"apiVersion":             func(r *metav1.OwnerReference) { r.APIVersion = "apps/v2" },
		"kind":                   func(r *metav1.OwnerReference) { r.Kind = "ReplicaSet" },
		"name":                   func(r *metav1.OwnerReference) { r.Name = "other" },
		"uid":                    func(r *metav1.OwnerReference) { r.UID = "u2" },
		"controller false":       func(r *metav1.OwnerReference) { r.Controller = ptr.To(false) },
		"controller nil":         func(r *metav1.OwnerReference) { r.Controller = nil },
		"blockOwnerDeletion":     func(r *metav1.OwnerReference) { r.BlockOwnerDeletion = ptr.To(false) },
		"blockOwnerDeletion nil": func(r *metav1.OwnerReference) { r.BlockOwnerDeletion = nil },
	} {
		r := base()
		change(r)
		variants[name] = r
	}
	a := base()
	for name, b := range variants {
		if got, want := sameControllerRef(a, b), reflect.DeepEqual(a, b); got != want {
			t.Errorf("%s: sameControllerRef %v, reflect.DeepEqual %v", name, got, want)
		}
		if got, want := sameControllerRef(b, nil), reflect.DeepEqual(b, (*metav1.OwnerReference)(nil)); got != want {
			t.Errorf("%s against nil: sameControllerRef %v, reflect.DeepEqual %v", name, got, want)
		}
	}
}
