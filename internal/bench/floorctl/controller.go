package floorctl

import (
	"context"
	"fmt"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
)

// byNode indexes pods by the node they are for.
const byNode = "node"

// Controller keeps one pod of every DaemonSet on every node its rules allow, one
// node at a time: its queue holds node names, and a node's sync decides that node
// for every DaemonSet and writes what it needs, its writes in parallel.
type Controller struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	dsList  appslisters.DaemonSetLister
	nodes   corelisters.NodeLister
	pods    cache.Indexer
	queue   workqueue.TypedRateLimitingInterface[string]
	flights *flights
	workers int

	mu    sync.Mutex
	parse map[types.UID]*daemonSet // by DaemonSet UID, for its generation
}

// New makes a floor controller that syncs workers nodes at a time.
func New(client kubernetes.Interface, workers int) (*Controller, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(dropManagedFields))
	c := &Controller{
		client:  client,
		factory: factory,
		dsList:  factory.Apps().V1().DaemonSets().Lister(),
		nodes:   factory.Core().V1().Nodes().Lister(),
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		flights: newFlights(),
		workers: max(1, workers),
		parse:   map[types.UID]*daemonSet{},
	}
	podInf := factory.Core().V1().Pods().Informer()
	if err := podInf.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		if node, ok := daemon.TargetNode(obj.(*v1.Pod)); ok {
			return []string{node}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	c.pods = podInf.GetIndexer()
	// Watched like everynode watches them; the floor writes none and reads none.
	factory.Apps().V1().ControllerRevisions().Informer()
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{factory.Apps().V1().DaemonSets().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.enqueueAllNodes() },
			UpdateFunc: c.daemonSetUpdated,
			DeleteFunc: func(any) { c.enqueueAllNodes() },
		}},
		{factory.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.queue.Add(obj.(*v1.Node).Name) },
			UpdateFunc: c.nodeUpdated,
		}},
		{podInf, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.podSeen(obj, false) },
			UpdateFunc: func(_, obj any) { c.podSeen(obj, false) },
			DeleteFunc: func(obj any) { c.podSeen(obj, true) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func (c *Controller) enqueueAllNodes() {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		c.queue.Add(n.Name)
	}
}

func (c *Controller) daemonSetUpdated(old, cur any) {
	if old.(*apps.DaemonSet).Generation != cur.(*apps.DaemonSet).Generation {
		c.enqueueAllNodes()
	}
}

// nodeUpdated enqueues a node whose labels or taints changed: nothing else of a node
// enters the decision.
func (c *Controller) nodeUpdated(old, cur any) {
	o, n := old.(*v1.Node), cur.(*v1.Node)
	if !labels.Equals(o.Labels, n.Labels) || !taintsEqual(o.Spec.Taints, n.Spec.Taints) {
		c.queue.Add(n.Name)
	}
}

func taintsEqual(a, b []v1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].MatchTaint(&b[i]) || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}

// podSeen forgets the writes the cache now shows. A pod gone from the cache also
// enqueues its node, so that a pod deleted by someone else is replaced.
func (c *Controller) podSeen(obj any, gone bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	node, ok := daemon.TargetNode(pod)
	if !ok {
		return
	}
	c.flights.seen(node, pod.UID, gone || pod.DeletionTimestamp != nil)
	if gone && controllerUID(pod) != "" {
		c.queue.Add(node)
	}
}

// Run starts the informers and the workers, and returns when ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	for typ, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the cache of %v did not sync", typ)
		}
	}
	klog.FromContext(ctx).Info("Floor controller running", "workers", c.workers)
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *Controller) next(ctx context.Context) bool {
	node, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(node)
	if err := c.sync(ctx, node); err != nil {
		klog.FromContext(ctx).V(2).Info("Node sync failed", "node", node, "err", err)
		c.queue.AddRateLimited(node)
		return true
	}
	c.queue.Forget(node)
	return true
}

// sync decides one node for every DaemonSet and makes the writes it needs.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil // its pods go with it, through the pod garbage collector
	}
	if err != nil {
		return err
	}
	objs, err := c.pods.ByIndex(byNode, name)
	if err != nil {
		return err
	}
	pods := make([]*v1.Pod, len(objs))
	for i, o := range objs {
		pods[i] = o.(*v1.Pod)
	}
	sets, err := c.daemonSets()
	if err != nil {
		return err
	}
	d := decide(node, sets, pods, c.flights.of(name, time.Now()))
	errs := make(chan error, len(d.create)+len(d.remove))
	var wg sync.WaitGroup
	for _, s := range d.create {
		wg.Go(func() { errs <- c.create(ctx, name, s) })
	}
	for _, pod := range d.remove {
		wg.Go(func() { errs <- c.remove(ctx, name, pod) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// daemonSets are the cached DaemonSets with their parsed rules.
func (c *Controller) daemonSets() ([]*daemonSet, error) {
	list, err := c.dsList.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*daemonSet, len(list))
	for i, ds := range list {
		s := c.parse[ds.UID]
		if s == nil || s.ds.Generation != ds.Generation {
			s = newDaemonSet(ds)
			c.parse[ds.UID] = s
		}
		out[i] = s
	}
	return out, nil
}

func (c *Controller) create(ctx context.Context, node string, s *daemonSet) error {
	pod := daemon.PodForNode(s.ds, s.template, node)
	created, err := c.client.CoreV1().Pods(s.ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating a pod of %s/%s: %w", s.ds.Namespace, s.ds.Name, err)
	}
	c.flights.created(node, created.UID, s.ds.UID, time.Now(), func() bool {
		_, ok, _ := c.pods.GetByKey(created.Namespace + "/" + created.Name)
		return ok
	})
	return nil
}

func (c *Controller) remove(ctx context.Context, node string, pod *v1.Pod) error {
	uid := pod.UID
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or another pod of that name
	}
	if err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	c.flights.deleted(node, uid, time.Now(), func() bool {
		obj, ok, _ := c.pods.GetByKey(pod.Namespace + "/" + pod.Name)
		return !ok || obj.(*v1.Pod).UID != uid || obj.(*v1.Pod).DeletionTimestamp != nil
	})
	return nil
}
