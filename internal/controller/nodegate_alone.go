package controller

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// GateFieldManager names the node gate run alone (RunNodeGate) on its writes.
const GateFieldManager = "everynode-node-gate"

// RunNodeGate runs the node gate alone, as a controller of its own beside a
// DaemonSet controller that knows nothing of it (kube-controller-manager's): the
// benchmark's measure of what the gate costs and takes when it is not part of the
// DaemonSet controller. It reads through informers of its own and returns when ctx
// ends.
func RunNodeGate(ctx context.Context, client kubernetes.Interface) error {
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := newPodIndex()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	dsInformer := factory.Apps().V1().DaemonSets()
	nodeInformer := factory.Core().V1().Nodes()
	podInformer := factory.Core().V1().Pods()
	if err := podInformer.Informer().SetTransform(func(obj any) (any, error) {
		if pod, ok := obj.(*v1.Pod); ok {
			return cachedPod(pod), nil
		}
		return trimForCache(obj)
	}); err != nil {
		return err
	}
	g := newNodeGate(true, gateDeps{
		client:   client,
		manager:  GateFieldManager,
		clock:    clock.RealClock{},
		recorder: broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: GateFieldManager}),
		ds:       dsInformer.Lister(),
		nodes:    nodeInformer.Lister(),
		pods:     pods,
	})
	daemonSets, nodes := g.handlers()
	podEvents := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				pods.put(pod)
				g.podChanged(pod)
			}
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				pods.put(pod)
				g.podChanged(pod)
			} else if m, ok := obj.(metav1.Object); ok {
				pods.remove(m.GetUID())
			}
		},
		DeleteFunc: func(obj any) {
			if m, ok := unwrap[metav1.Object](obj); ok {
				pods.remove(m.GetUID())
			}
			g.podChanged(obj)
		},
	}
	for _, reg := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{{dsInformer.Informer(), daemonSets}, {nodeInformer.Informer(), nodes}, {podInformer.Informer(), podEvents}} {
		if _, err := reg.informer.AddEventHandler(reg.handler); err != nil {
			return fmt.Errorf("adding event handler: %w", err)
		}
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the cache of %v did not sync", typ)
		}
	}
	if ctx.Err() != nil {
		return errors.New("stopped before the caches synced")
	}
	g.run(ctx)
	return nil
}
