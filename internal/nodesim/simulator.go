package nodesim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Retry backoff of failed syncs. Lease retries stop at the lease interval.
const (
	retryBase = 5 * time.Millisecond
	retryMax  = 30 * time.Second
)

// Simulator plays kubelet for every simulated node. Run it once.
type Simulator struct {
	client kubernetes.Interface
	cfg    Config
	clock  clock.WithTicker

	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	podIndex cache.Indexer

	podQueue   workqueue.TypedRateLimitingInterface[string]
	nodeQueue  workqueue.TypedRateLimitingInterface[string]
	leaseQueue workqueue.TypedRateLimitingInterface[string]

	indexes      *nodeIndexes
	ips          *podIPs
	behaviours   *behaviours
	leases       *leaseCache
	registering  *nameSet
	nodeWarnings *nameSet
}

// New returns a Simulator that will act through client. Zero Clock, Workers and
// LeaseInterval in cfg mean their defaults; Run validates cfg.
func New(client kubernetes.Interface, cfg Config) *Simulator {
	cfg = cfg.withDefaults()
	return &Simulator{
		client:       client,
		cfg:          cfg,
		clock:        cfg.Clock,
		indexes:      newNodeIndexes(cfg.Nodes),
		ips:          newPodIPs(),
		behaviours:   newBehaviours(cfg.PodReadyDelay),
		leases:       newLeaseCache(),
		registering:  newNameSet(),
		nodeWarnings: newNameSet(),
	}
}

// Run registers the configured nodes and plays kubelet until ctx ends, then
// waits for its workers to finish their current item.
func (s *Simulator) Run(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return fmt.Errorf("invalid node simulator configuration: %w", err)
	}
	logger := klog.FromContext(ctx).WithName("nodesim")
	ctx = klog.NewContext(ctx, logger)

	s.podQueue = s.newQueue("nodesim_pods", workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax))
	s.nodeQueue = s.newQueue("nodesim_nodes", workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax))
	s.leaseQueue = s.newQueue("nodesim_leases", workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, s.cfg.LeaseInterval))
	queues := []workqueue.TypedRateLimitingInterface[string]{s.podQueue, s.nodeQueue, s.leaseQueue}
	defer func() {
		for _, q := range queues {
			q.ShutDown()
		}
	}()

	nodeFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelSimulated + "=" + simulatedLabelValue }),
		informers.WithTransform(stripManagedFields))
	podFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithTransform(stripManagedFields))
	defer nodeFactory.Shutdown()
	defer podFactory.Shutdown()
	nodeInformer := nodeFactory.Core().V1().Nodes()
	podInformer := podFactory.Core().V1().Pods()
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podsByNodeIndex: podsByNode}); err != nil {
		return fmt.Errorf("adding pod index: %w", err)
	}
	s.nodes = nodeInformer.Lister()
	s.pods = podInformer.Lister()
	s.podIndex = podInformer.Informer().GetIndexer()
	if _, err := nodeInformer.Informer().AddEventHandler(s.nodeHandler()); err != nil {
		return fmt.Errorf("adding node handler: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandler(s.podHandler()); err != nil {
		return fmt.Errorf("adding pod handler: %w", err)
	}
	nodeFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	logger.Info("Waiting for node and pod caches to sync")
	for _, synced := range []map[reflect.Type]bool{nodeFactory.WaitForCacheSync(ctx.Done()), podFactory.WaitForCacheSync(ctx.Done())} {
		for informer, ok := range synced {
			if !ok {
				if ctx.Err() != nil {
					return nil // stopped while starting
				}
				return fmt.Errorf("cache of %v did not sync", informer)
			}
		}
	}
	s.recordExisting()
	s.startRegistration()

	workers := workersFor(s.cfg)
	logger.Info("Starting node simulator", "nodes", s.cfg.Nodes, "workers", workers,
		"podReadyDelay", s.cfg.PodReadyDelay, "podStopDelay", s.cfg.PodStopDelay, "leaseInterval", s.cfg.LeaseInterval)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { s.work(ctx, s.podQueue, "pod", s.syncPod) })
		wg.Go(func() { s.work(ctx, s.nodeQueue, "node", s.syncNode) })
		wg.Go(func() { s.work(ctx, s.leaseQueue, "lease", s.syncLease) })
	}
	<-ctx.Done()
	logger.Info("Stopping node simulator")
	for _, q := range queues {
		q.ShutDown()
	}
	wg.Wait()
	return nil
}

func (s *Simulator) newQueue(name string, limiter workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: s.clock})
}

// recordExisting reserves, before any worker runs, the node indexes and pod IPs the
// stored objects already hold, so nothing new is handed out twice.
func (s *Simulator) recordExisting() {
	nodes, _ := s.nodes.List(labels.Everything())
	for _, node := range nodes {
		if _, ok := indexFromPodCIDR(node.Spec.PodCIDR); ok && isSimulated(node) {
			_, _ = s.indexes.assign(node.Name, node.Spec.PodCIDR)
		}
	}
	for _, node := range nodes {
		if !isSimulated(node) {
			continue
		}
		objs, _ := s.podIndex.ByIndex(podsByNodeIndex, node.Name)
		for _, obj := range objs {
			pod := obj.(*v1.Pod)
			if pod.Status.PodIP != "" && !pod.Spec.HostNetwork && !isTerminal(pod.Status.Phase) {
				_, _ = s.ips.assign(podKey(pod), pod.UID, node.Name, node.Spec.PodCIDR, pod.Status.PodIP)
			}
		}
	}
}

// startRegistration queues the configured nodes that do not exist yet.
func (s *Simulator) startRegistration() {
	for i := range s.cfg.Nodes {
		name := fmt.Sprintf("%s%d", NodeNamePrefix, i)
		if _, err := s.nodes.Get(name); apierrors.IsNotFound(err) {
			s.registering.add(name, "")
			s.nodeQueue.Add(name)
		}
	}
}

// syncFunc handles one key and says when to look at it again (0: not unless told).
type syncFunc func(ctx context.Context, key string) (time.Duration, error)

// work runs sync over the keys of q until q shuts down.
func (s *Simulator) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], kind string, sync syncFunc) {
	logger := klog.FromContext(ctx)
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		after, err := sync(ctx, key)
		switch {
		case err == nil:
			q.Forget(key)
			if after > 0 {
				q.AddAfter(key, after)
			}
		case apierrors.IsConflict(err):
			logger.V(4).Info("Write conflict, will retry", "kind", kind, "key", key, "err", err)
			q.AddRateLimited(key)
		case errors.Is(err, context.Canceled):
		default:
			logger.Error(err, "Sync failed, will retry", "kind", kind, "key", key)
			q.AddRateLimited(key)
		}
		q.Done(key)
	}
}

// simulatedNode returns the named node from the cache if it is simulated, else nil.
func (s *Simulator) simulatedNode(name string) *v1.Node {
	if name == "" {
		return nil
	}
	node, err := s.nodes.Get(name)
	if err != nil || !isSimulated(node) {
		return nil
	}
	return node
}

// nameSet is a set of names with a remembered value each.
type nameSet struct {
	mu    sync.Mutex
	items map[string]string
}

func newNameSet() *nameSet { return &nameSet{items: map[string]string{}} }

func (n *nameSet) add(name, value string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.items[name] = value
}

// value returns the value remembered for name, and whether name is in the set.
func (n *nameSet) value(name string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.items[name]
	return v, ok
}

func (n *nameSet) remove(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.items, name)
}
