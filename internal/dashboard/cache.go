package dashboard

import (
	"context"
	"fmt"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/gather"
	"github.com/everynode/everynode/internal/inspect"
)

// Cache is the dashboard's view of the cluster: watches of the DaemonSets, nodes,
// pods and ControllerRevisions, and a signal that any of them changed.
type Cache struct {
	client    kubernetes.Interface
	namespace string
	factory   informers.SharedInformerFactory
	daemons   appslisters.DaemonSetLister
	objects   gather.Listers // nodes, pods and revisions

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, at each change
}

// NewCache watches the DaemonSets, pods and revisions of namespace ("" for every
// namespace) and every node. Pods are cached slim, as the controller caches them.
func NewCache(client kubernetes.Interface, namespace string) *Cache {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTransform(func(obj any) (any, error) {
			if pod, ok := obj.(*v1.Pod); ok {
				return daemon.SlimPod(pod), nil
			}
			return obj, nil
		}))
	c := &Cache{client: client, namespace: namespace, factory: f, changed: make(chan struct{}),
		daemons: f.Apps().V1().DaemonSets().Lister(),
		objects: gather.Listers{Nodes: f.Core().V1().Nodes().Lister(), Pods: f.Core().V1().Pods().Lister(),
			Revisions: f.Apps().V1().ControllerRevisions().Lister()},
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.notify() },
		UpdateFunc: func(any, any) { c.notify() },
		DeleteFunc: func(any) { c.notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		f.Apps().V1().DaemonSets().Informer(), f.Core().V1().Nodes().Informer(),
		f.Core().V1().Pods().Informer(), f.Apps().V1().ControllerRevisions().Informer(),
	} {
		if _, err := inf.AddEventHandler(h); err != nil {
			// Adding a handler fails only to an informer that has stopped.
			panic(err)
		}
	}
	return c
}

// Start watches until ctx ends, and waits for the first lists. It fails at once,
// saying what is missing, when the kubeconfig may not list what the dashboard
// watches (a watch would otherwise retry for ever).
func (c *Cache) Start(ctx context.Context) error {
	one := metav1.ListOptions{Limit: 1}
	for what, list := range map[string]func() error{
		"daemonsets": func() error { _, err := c.client.AppsV1().DaemonSets(c.namespace).List(ctx, one); return err },
		"nodes":      func() error { _, err := c.client.CoreV1().Nodes().List(ctx, one); return err },
		"pods":       func() error { _, err := c.client.CoreV1().Pods(c.namespace).List(ctx, one); return err },
		"controllerrevisions": func() error {
			_, err := c.client.AppsV1().ControllerRevisions(c.namespace).List(ctx, one)
			return err
		},
	} {
		if err := list(); err != nil {
			return fmt.Errorf("the dashboard cannot list %s (it needs list and watch on daemonsets, nodes, pods and controllerrevisions): %w", what, err)
		}
	}
	c.factory.Start(ctx.Done())
	for typ, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the dashboard stopped before its watch of %v was ready", typ)
		}
	}
	return nil
}

func (c *Cache) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.changed)
	c.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change.
func (c *Cache) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// DaemonSets returns the summaries of every DaemonSet, by namespace and name.
func (c *Cache) DaemonSets() ([]Summary, error) {
	list, err := c.daemons.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return Summaries(list), nil
}

// Explain explains DaemonSet ns/name from the caches, as `everynode explain` does
// from the API, and returns the nodes by name. It returns nil when the DaemonSet does
// not exist.
func (c *Cache) Explain(ns, name string, now time.Time) (*inspect.Explanation, map[string]*v1.Node, error) {
	ds, err := c.daemons.DaemonSets(ns).Get(name)
	if err != nil {
		return nil, nil, err
	}
	objs, err := c.objects.List(ds)
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string]*v1.Node, len(objs.Nodes))
	for _, n := range objs.Nodes {
		byName[n.Name] = n
	}
	// The core does not change its input; the listers' objects are shared.
	s := gather.Snapshot(ds, objs, now, gather.Controller{})
	return inspect.ExplainSnapshot(s), byName, nil
}

// DaemonSet returns DaemonSet ns/name from the cache.
func (c *Cache) DaemonSet(ns, name string) (*apps.DaemonSet, error) {
	return c.daemons.DaemonSets(ns).Get(name)
}
