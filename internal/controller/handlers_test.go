package controller

import (
	"context"
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
)

// newIdleController builds a Controller whose informers are never started, with dss
// in its DaemonSet cache, so that handlers can be called directly.
func newIdleController(t *testing.T, dss ...*apps.DaemonSet) *Controller {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
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
	indexer := factory.Apps().V1().DaemonSets().Informer().GetIndexer()
	for _, ds := range dss {
		if err := indexer.Add(ds); err != nil {
			t.Fatal(err)
		}
	}
	return c
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
