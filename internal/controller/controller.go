package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Modes of the controller.
const (
	// ModeFull places every DaemonSet's pods and rolls its updates out: the cluster's
	// own DaemonSet controller must be off.
	ModeFull = "full"
	// ModeCompanion runs beside the cluster's own DaemonSet controller, which keeps
	// placement: everynode only rolls out the updates of the OnDelete DaemonSets
	// that opt in (daemon.CompanionManages), deleting their old pods in turn.
	ModeCompanion = "companion"
)

// Options tune a Controller. The zero value of a field means its default.
type Options struct {
	// Mode is ModeFull (the default) or ModeCompanion.
	Mode string
	// BurstReplicas caps the pod creates, and separately the deletes, of one sync.
	BurstReplicas int
	// MinStatusInterval is the shortest time between two status writes of a
	// DaemonSet that change only its pod counters; zero writes every change at once.
	MinStatusInterval time.Duration
	// MaxStatusHold is how long after its last status write a DaemonSet's
	// counters-only status write may be held while its pod writes are queued or in
	// flight; it is written as soon as they drain. Zero holds none beyond
	// MinStatusInterval.
	MaxStatusHold time.Duration
	// SyncBatchPeriod is the shortest time between two syncs of a DaemonSet that pod
	// and node events ask for: an event after a quiet period syncs at once, the events
	// of a busy moment (a wave of pods turning ready, a burst of node changes) share
	// one sync at the end of the period; zero syncs on every event. Changes to a
	// DaemonSet or its revisions sync at once either way.
	SyncBatchPeriod time.Duration
	// ProbeTimeout, in full mode, is how long the controller waits at start for
	// another DaemonSet controller to answer its probe DaemonSet (see
	// probeOtherController) before it writes anything; zero skips the probe.
	ProbeTimeout time.Duration
	// ProbeNamespace is where the probe DaemonSet is created ("default" when empty).
	ProbeNamespace string
	// PodWriters is how many pod writes may be outstanding at once, across
	// DaemonSets (DefaultPodWriters when zero): the dispatchers that send them in
	// rank order (dispatch.go).
	PodWriters int
	// RateLimiter is the client's rate limiter, shared by every request of the
	// client, which must let the pod writes pass without a second token (see
	// PrepaidRateLimiter): the dispatchers take a token before they choose the next
	// write. nil: no client-side limit.
	RateLimiter flowcontrol.RateLimiter
	// NodeGate turns the node gate on (nodegate.go): the controller removes a node's
	// gate taint once the DaemonSets gating on it have an available pod there. Off,
	// a DaemonSet that gates nodes is only marked so (NodeGateFailure).
	NodeGate bool
	// Clock is the controller's time source (tests use a fake one).
	Clock clock.WithTicker
	// Metrics receives the controller's measurements; nil records nothing.
	Metrics *Metrics
}

// DefaultBurstReplicas is the default cap on creates and deletes per sync.
const DefaultBurstReplicas = 250

// DefaultSyncBatchPeriod is the default Options.SyncBatchPeriod: short beside the
// seconds a pod takes to start, long beside the milliseconds between the pod events
// of a rollout.
const DefaultSyncBatchPeriod = 100 * time.Millisecond

// EventSource names this controller on the events it records in full mode; it is
// the name kube-controller-manager's DaemonSet controller uses, so tools filtering on
// it work. In companion mode, beside that controller, events say CompanionEventSource.
const (
	EventSource          = "daemonset-controller"
	CompanionEventSource = "everynode"
)

// The field managers the API server records on everynode's writes, in each mode; a
// write by any other manager to a DaemonSet full mode manages shows another
// controller at work (see foreignWrites).
const (
	FieldManager          = "everynode"
	CompanionFieldManager = "everynode-companion"
)

// Controller keeps every DaemonSet's pods on its eligible nodes.
type Controller struct {
	client kubernetes.Interface
	opts   Options
	// fieldManager names the controller on every write it makes.
	fieldManager string
	clock        clock.WithTicker
	metrics      *Metrics
	recorder     record.EventRecorder
	events       record.EventBroadcaster

	dsLister  appslisters.DaemonSetLister
	revLister appslisters.ControllerRevisionLister
	nodes     *nodeList
	pods      cache.Indexer
	// podIndex holds the DaemonSet and orphan pods of the pod cache by controller.
	podIndex *podIndex
	synced   []cache.InformerSynced

	// classes are the PriorityClasses that rank pod writes; nil in companion mode,
	// whose deletes rank by the system classes alone.
	classes schedulinglisters.PriorityClassLister

	queue workqueue.TypedRateLimitingInterface[string]
	// states is everything kept of each DaemonSet between syncs (state.go); the
	// keepers below each own a part of it.
	states   *states
	inflight *inflight
	writes   *writeQueue
	backoff  *failedBackoff
	elig     *eligibilityCache
	written  *ownWrites
	memos    *memos
	pace     *statusPace
	batch    *syncBatcher
	foreign  *foreignWrites
	gate     *nodeGate
	// standDownOnce logs, once, that another DaemonSet controller is active.
	standDownOnce sync.Once
	ready         atomic.Bool
}

// Ready reports whether the caches have synced and workers are running.
func (c *Controller) Ready() bool { return c.ready.Load() }

// New wires a Controller to the informers of factory, which the caller starts after
// New returns. Pod informers get the indexes the controller reads by.
func New(ctx context.Context, client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.BurstReplicas <= 0 {
		opts.BurstReplicas = DefaultBurstReplicas
	}
	if opts.PodWriters <= 0 {
		opts.PodWriters = DefaultPodWriters
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	source, manager := EventSource, FieldManager
	switch opts.Mode {
	case "":
		opts.Mode = ModeFull
	case ModeFull:
	case ModeCompanion:
		source, manager = CompanionEventSource, CompanionFieldManager
	default:
		return nil, fmt.Errorf("unknown mode %q: use %s or %s", opts.Mode, ModeFull, ModeCompanion)
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	st := newStates()
	c := &Controller{
		client:       client,
		opts:         opts,
		fieldManager: manager,
		clock:        opts.Clock,
		podIndex:     newPodIndex(),
		metrics:      opts.Metrics,
		events:       broadcaster,
		recorder:     broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: source}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "everynode", Clock: opts.Clock},
		),
		states:   st,
		inflight: newInflight(opts.Clock, st),
		writes:   newWriteQueue(),
		backoff:  newFailedBackoff(opts.Clock, st),
		elig:     newEligibilityCache(st),
		written:  newOwnWrites(st),
		memos:    newMemos(st),
		pace:     newStatusPace(opts.MinStatusInterval, opts.MaxStatusHold, st),
		batch:    newSyncBatcher(opts.SyncBatchPeriod, opts.Clock, st),
		foreign:  newForeignWrites(manager),
	}
	// A status held while the DaemonSet's pod writes were busy is written by the
	// sync that their drain asks for, spaced like the syncs pod events ask for.
	c.writes.idle = func(key string) {
		if !c.pace.drained(key) {
			return
		}
		if d := c.batch.delay(key); d > 0 {
			c.queue.AddAfter(key, d)
			return
		}
		c.queue.Add(key)
	}
	c.metrics.queueDepth = c.queue.Len
	c.metrics.podWrites = c.writes.len

	dsInformer := factory.Apps().V1().DaemonSets()
	revInformer := factory.Apps().V1().ControllerRevisions()
	podInformer := factory.Core().V1().Pods()
	nodeInformer := factory.Core().V1().Nodes()
	// The caches keep no managed fields (trimForCache), and of a pod only what the
	// decisions read (cachedPod): the pod cache holds every pod of the cluster.
	// Pods and DaemonSets are read first, to notice another controller writing to
	// our DaemonSets.
	for _, inf := range []cache.SharedIndexInformer{podInformer.Informer(), dsInformer.Informer()} {
		if err := inf.SetTransform(func(obj any) (any, error) {
			if opts.Mode == ModeFull {
				c.foreign.observe(obj)
			}
			if pod, ok := obj.(*v1.Pod); ok {
				return cachedPod(pod), nil
			}
			return trimForCache(obj)
		}); err != nil {
			return nil, fmt.Errorf("setting the cache transform: %w", err)
		}
	}
	c.dsLister = dsInformer.Lister()
	c.revLister = revInformer.Lister()
	c.nodes = newNodeList(nodeInformer.Lister())
	c.pods = podInformer.Informer().GetIndexer()
	if opts.Mode == ModeFull {
		// Not waited for at start: until it has synced, pod writes are ranked by
		// the system classes alone.
		c.classes = factory.Scheduling().V1().PriorityClasses().Lister()
	}

	c.gate = newNodeGate(opts.NodeGate, gateDeps{client: client, manager: manager, clock: opts.Clock, recorder: c.recorder,
		ds: c.dsLister, nodes: nodeInformer.Lister(), pods: c.podIndex,
		token: func() bool { return opts.RateLimiter != nil && c.writes.takeToken() }})
	gateDaemonSets, gateNodes := c.gate.handlers()
	logger := klog.FromContext(ctx)
	for _, reg := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{dsInformer.Informer(), c.daemonSetHandler(logger)},
		{revInformer.Informer(), c.revisionHandler(logger)},
		{podInformer.Informer(), c.podHandler(logger)},
		{nodeInformer.Informer(), c.nodeHandler(logger)},
		{dsInformer.Informer(), gateDaemonSets},
		{nodeInformer.Informer(), gateNodes},
	} {
		r, err := reg.informer.AddEventHandler(reg.handler)
		if err != nil {
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		c.synced = append(c.synced, r.HasSynced)
	}
	return c, nil
}

// Run processes DaemonSets with the given number of workers until ctx ends, then
// waits for the workers to finish their current sync.
func (c *Controller) Run(ctx context.Context, workers int) error {
	logger := klog.FromContext(ctx)
	if logger.V(3).Enabled() { // the verbosity is fixed at start: a watcher that logs nothing costs a wakeup per event
		c.events.StartStructuredLogging(3)
	}
	// Timed as client-go's recorder times its correlation: by the wall clock.
	startEventSink(ctx, c.events, &typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")}, clock.RealClock{})
	defer c.events.Shutdown()
	defer c.queue.ShutDown()

	logger.Info("Waiting for informer caches to sync")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return errors.New("informer caches did not sync before shutdown")
	}
	if c.opts.Mode == ModeFull {
		c.foreign.arm()
		c.probe(ctx)
	}
	logger.Info("Starting DaemonSet workers", "workers", workers)
	c.ready.Store(true)
	defer c.ready.Store(false)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	for range c.opts.PodWriters {
		wg.Go(func() { c.dispatch(ctx) })
	}
	wg.Go(func() { <-ctx.Done(); c.writes.close() })
	wg.Go(func() { wait.Until(c.backoff.gc, time.Minute, ctx.Done()) })
	wg.Go(func() { c.gate.run(ctx) })
	<-ctx.Done()
	logger.Info("Shutting down DaemonSet workers")
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// probe runs the probe for another DaemonSet controller, if asked to; when one
// answers, every DaemonSet is left to it. A probe that cannot run is logged and
// skipped: the writes of another controller are still noticed as they happen.
func (c *Controller) probe(ctx context.Context) {
	if c.opts.ProbeTimeout <= 0 {
		return
	}
	logger := klog.FromContext(ctx)
	ns := c.opts.ProbeNamespace
	if ns == "" {
		ns = v1.NamespaceDefault
	}
	manager, err := c.probeOtherController(ctx, ns, c.opts.ProbeTimeout)
	switch {
	case err != nil:
		logger.Error(err, "Could not probe for another DaemonSet controller; going on, watching for its writes")
	case manager != "":
		c.foreign.contestAll(manager, "answered everynode's probe DaemonSet")
	default:
		logger.V(1).Info("No other DaemonSet controller answered the probe", "waited", c.opts.ProbeTimeout)
	}
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	c.batch.started(key)
	start := c.clock.Now()
	requeue, err := c.sync(ctx, key)
	result := "success"
	if err != nil {
		result = "error"
	}
	c.metrics.syncDuration.WithLabelValues(result).Observe(c.clock.Since(start).Seconds())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Sync failed, will retry", "daemonset", key)
		c.queue.AddRateLimited(key)
		return true
	}
	// A sync succeeds as soon as its writes are queued; while they keep failing,
	// the back-off their failures started goes on.
	if !c.writes.retrying(key) {
		c.queue.Forget(key)
	}
	if requeue > 0 {
		c.queue.AddAfter(key, requeue)
	}
	return true
}
