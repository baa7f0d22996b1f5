package scalemodel

import (
	"context"
	"fmt"
	"sync"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/fakeapi"
)

const (
	namespace = "model"
	poolLabel = "model.everynode.dev/pool"
	// image1 is the DaemonSets' image at creation, image2 after the rollout.
	image1 = "registry.example/agent:1"
	image2 = "registry.example/agent:2"
)

// watchBuffer is how many events a fake watch holds before its reader takes them.
// The fake clientset's watches panic when full (watch.DefaultChanSize, 100), and a
// cold create at tens of thousands of nodes sends events faster than an informer
// drains them now and then.
const watchBuffer = 1 << 18

// cluster is the in-process API: client-go's fake clientset with the API server's
// behaviour (internal/fakeapi), the nodes, and a kubelet that reports every new pod
// Running and Ready.
type cluster struct {
	client *fake.Clientset
	api    *fakeapi.API
	nodes  int
	pools  int
}

// newCluster stores n nodes in pools pools (node i in pool i mod pools), straight into
// the store: they exist before any informer lists them.
func newCluster(n, pools int) (*cluster, error) {
	watch.DefaultChanSize = watchBuffer
	// The simple tracker: the field-managed one (fake.NewClientset) computes managed
	// fields on every write, which made it the model's bottleneck (at 10,000 nodes its
	// kubelet reported about 190 pods a second Running on one saturated core).
	client := fake.NewSimpleClientset()
	c := &cluster{client: client, api: fakeapi.Install(client, fakeapi.Options{}), nodes: n, pools: pools}
	for i := range n {
		node := newNode(i, i%pools)
		if err := c.api.Tracker.Add(node); err != nil {
			return nil, fmt.Errorf("storing node %s: %w", node.Name, err)
		}
	}
	return c, nil
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

func poolName(p int) string { return fmt.Sprintf("pool-%d", p) }

// newNode is a Ready node with room for pods, as a kubelet registers it.
func newNode(i, pool int) *v1.Node {
	name := nodeName(i)
	room := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("8"),
		v1.ResourceMemory: resource.MustParse("32Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{
			v1.LabelHostname: name, v1.LabelOSStable: "linux", poolLabel: poolName(pool),
		}},
		Status: v1.NodeStatus{
			Capacity: room, Allocatable: room,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
}

// daemonSet is DaemonSet i of the model: on the nodes of pool i mod pools, rolling
// 10% of them at a time.
func daemonSet(i, pools int) *apps.DaemonSet {
	name := fmt.Sprintf("agent-%02d", i)
	labels := map[string]string{"app": name}
	tenth := intstr.FromString("10%")
	return &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 1}, // as the API server sets it
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &tenth}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector: map[string]string{poolLabel: poolName(i % pools)},
					Containers:   []v1.Container{{Name: "agent", Image: image1}},
				},
			},
		},
	}
}

// kubelet reports every pod Running and Ready once it exists, as the scheduler and
// the node's kubelet would between them, with one status write per pod.
type kubelet struct {
	c       *cluster
	queue   workqueue.TypedInterface[cache.ObjectName]
	factory informers.SharedInformerFactory
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// pods and nodes are the kubelet's caches, which placed reads.
	pods  corelisters.PodLister
	nodes corelisters.NodeLister
}

func startKubelet(ctx context.Context, c *cluster, workers int) (*kubelet, error) {
	ctx, cancel := context.WithCancel(ctx)
	k := &kubelet{c: c, queue: workqueue.NewTyped[cache.ObjectName](), cancel: cancel,
		factory: informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(namespace))}
	pods := k.factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if pod, ok := obj.(*v1.Pod); ok && pod.Status.Phase == v1.PodPending {
			k.queue.Add(cache.MetaObjectToName(pod))
		}
	}}); err != nil {
		cancel()
		return nil, err
	}
	lister := k.factory.Core().V1().Pods().Lister()
	k.pods, k.nodes = lister, k.factory.Core().V1().Nodes().Lister()
	k.factory.Core().V1().Nodes().Informer()
	k.factory.Start(ctx.Done())
	k.factory.WaitForCacheSync(ctx.Done())
	for range workers {
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			for {
				name, done := k.queue.Get()
				if done {
					return
				}
				retry := false
				if pod, err := lister.Pods(name.Namespace).Get(name.Name); err == nil {
					retry = apierrors.IsConflict(k.start(ctx, pod))
				}
				k.queue.Done(name)
				if retry { // the cache was behind the store: again, from the newer pod
					k.queue.Add(name)
				}
			}
		}()
	}
	return k, nil
}

// start binds pod to its node and reports it Running and Ready.
func (k *kubelet) start(ctx context.Context, pod *v1.Pod) error {
	node, ok := daemon.TargetNode(pod)
	if !ok || pod.DeletionTimestamp != nil || pod.Status.Phase != v1.PodPending {
		return nil
	}
	next := pod.DeepCopy()
	next.Spec.NodeName = node
	now := metav1.Now()
	next.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: &now, Conditions: []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
	}}
	// The fake API writes the spec on an update and the status on a status update;
	// a pod binding is one write, so the two go in turn. A pod deleted meanwhile is
	// left alone.
	pods := k.c.client.CoreV1().Pods(pod.Namespace)
	bound, err := pods.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	bound.Status = next.Status
	_, err = pods.UpdateStatus(ctx, bound, metav1.UpdateOptions{})
	return err
}

// placed reports whether every node runs exactly one pod of each DaemonSet that
// selects its pool, with image, and no other pod, as far as the kubelet's caches
// show; if not, it says where not.
func (k *kubelet) placed(s Size, image string) (bool, string) {
	nodes, err := k.nodes.List(labels.Everything())
	if err != nil {
		return false, err.Error()
	}
	pods, err := k.pods.List(labels.Everything())
	if err != nil {
		return false, err.Error()
	}
	pool := make(map[string]string, len(nodes))
	for _, node := range nodes {
		pool[node.Name] = node.Labels[poolLabel]
	}
	selects := make(map[string]string, s.DaemonSets) // DaemonSet → pool
	for i := range s.DaemonSets {
		ds := daemonSet(i, s.Pools)
		selects[ds.Name] = ds.Spec.Template.Spec.NodeSelector[poolLabel]
	}
	live, slots := 0, make(map[string]bool, len(pods))
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		live++
		node, _ := daemon.TargetNode(pod)
		app := pod.Labels["app"]
		if selects[app] != pool[node] || pod.Spec.Containers[0].Image != image {
			return false, fmt.Sprintf("pod %s of %s on node %s of %s runs %s", pod.Name, app, node, pool[node], pod.Spec.Containers[0].Image)
		}
		if slots[node+"/"+app] {
			return false, fmt.Sprintf("node %s has two pods of %s", node, app)
		}
		slots[node+"/"+app] = true
	}
	want := 0
	for _, p := range pool {
		for _, sel := range selects {
			if sel == p {
				want++
			}
		}
	}
	if live != want { // none misplaced, none doubled: some node lacks a pod
		return false, fmt.Sprintf("%d pods, want %d", live, want)
	}
	return true, ""
}

func (k *kubelet) stop() {
	k.cancel()
	k.queue.ShutDown()
	k.wg.Wait()
	k.factory.Shutdown()
}
