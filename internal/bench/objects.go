package bench

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/nodesim"
)

// Namespace holds the benchmark's DaemonSets.
const Namespace = "bench"

// Labels and taints the benchmark puts on nodes.
const (
	labelPool       = "bench.everynode.dev/pool"
	labelRev        = "bench.everynode.dev/rev"
	taintMaintain   = "bench.everynode.dev/maintenance"
	imageFirst      = "registry.k8s.io/pause:3.10"
	imageSecond     = "registry.k8s.io/pause:3.9"
	benchFieldOwner = "everynode-bench"
)

// daemonSet is a DaemonSet of one pause container that asks for a little CPU and
// memory, tolerates the benchmark's maintenance taint, and rolls out one node at a
// time unless changed.
func daemonSet(name string) *apps.DaemonSet {
	labels := map[string]string{"app": name}
	one := intstr.FromInt32(1)
	return &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{
						Name:  "agent",
						Image: imageFirst,
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
							v1.ResourceCPU:    resource.MustParse("10m"),
							v1.ResourceMemory: resource.MustParse("16Mi"),
						}},
					}},
					Tolerations: []v1.Toleration{{Key: taintMaintain, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
				},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{
				Type:          apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &one},
			},
		},
	}
}

// ensureNamespace creates the benchmark's namespace and waits for its default
// service account, without which pods are refused.
func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// dsWant is the status a DaemonSet must show to count as converged.
type dsWant struct {
	// MinGeneration is the generation of the benchmark's last write to the spec; an
	// older object in the cache does not count.
	MinGeneration int64
	// Desired is the number of nodes that should run the pod.
	Desired int32
	// Available is the number of pods that should be Ready and available: Desired
	// unless the benchmark made some unready.
	Available int32
}

// dsConverged reports whether ds shows w: the controller has observed the current
// generation, and every desired node runs an updated pod, with exactly the wanted
// number ready and available and none misscheduled.
func dsConverged(ds *apps.DaemonSet, w dsWant) bool {
	s := ds.Status
	return ds.Generation >= w.MinGeneration &&
		s.ObservedGeneration == ds.Generation &&
		s.DesiredNumberScheduled == w.Desired &&
		s.CurrentNumberScheduled == w.Desired &&
		s.UpdatedNumberScheduled == w.Desired &&
		s.NumberAvailable == w.Available &&
		s.NumberReady == w.Available &&
		s.NumberMisscheduled == 0
}

// watcher follows the benchmark namespace's DaemonSets and pods, and the nodes,
// through informers of the benchmark's own client.
type watcher struct {
	factory informers.SharedInformerFactory
	nodes   informers.SharedInformerFactory
	cancel  context.CancelFunc
	ds      appslisters.DaemonSetLister
	changed chan struct{}

	mu sync.Mutex
	// podSeen is when each pod was first seen, by the node it is pinned to.
	podSeen map[string][]time.Time
	// usableAt is when each node was first seen Ready and untainted.
	usableAt map[string]time.Time
	// gated holds the nodes first seen with the burst's gate taint; gateOpenAt is
	// when each was first seen without it.
	gated      map[string]bool
	gateOpenAt map[string]time.Time
	nodeIdx    cache.Indexer
	// pods records when each DaemonSet's pod for each node was created and Running.
	pods *podMilestones
	// lives records when each DaemonSet pod appeared and went.
	lives   *podLives
	podList corelisters.PodLister
}

func startWatcher(ctx context.Context, client kubernetes.Interface) (*watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{
		cancel:     cancel,
		factory:    informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(Namespace)),
		nodes:      informers.NewSharedInformerFactory(client, 0),
		changed:    make(chan struct{}, 1),
		podSeen:    map[string][]time.Time{},
		usableAt:   map[string]time.Time{},
		gated:      map[string]bool{},
		gateOpenAt: map[string]time.Time{},
		pods:       newPodMilestones(),
		lives:      newPodLives(),
	}
	dsInf := w.factory.Apps().V1().DaemonSets()
	w.ds = dsInf.Lister()
	notify := func(any) {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	if _, err := dsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, o any) { notify(o) },
		DeleteFunc: notify,
	}); err != nil {
		return nil, err
	}
	if _, err := w.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				now := time.Now()
				w.mu.Lock()
				node := targetNode(pod)
				w.podSeen[node] = append(w.podSeen[node], now)
				w.mu.Unlock()
				w.pods.see(pod, now)
				w.lives.see(pod, now, false)
			}
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				now := time.Now()
				w.pods.see(pod, now)
				w.lives.see(pod, now, false)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				w.lives.see(pod, time.Now(), true)
			}
		},
	}); err != nil {
		return nil, err
	}
	w.podList = w.factory.Core().V1().Pods().Lister()
	nodeInf := w.nodes.Core().V1().Nodes().Informer()
	w.nodeIdx = nodeInf.GetIndexer()
	seeNode := func(obj any) {
		node, ok := obj.(*v1.Node)
		if !ok {
			return
		}
		now := time.Now()
		gated := len(daemon.GateTaints(node, burstGateKey)) > 0
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, seen := w.gated[node.Name]; !seen {
			w.gated[node.Name] = gated
		}
		if _, ok := w.gateOpenAt[node.Name]; !ok && !gated && w.gated[node.Name] {
			w.gateOpenAt[node.Name] = now
		}
		if _, ok := w.usableAt[node.Name]; !ok && nodesim.Usable(node) {
			w.usableAt[node.Name] = now
		}
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seeNode,
		UpdateFunc: func(_, o any) { seeNode(o) },
	}); err != nil {
		return nil, err
	}
	w.factory.Start(ctx.Done())
	w.nodes.Start(ctx.Done())
	for _, synced := range []map[any]bool{toAny(w.factory.WaitForCacheSync(ctx.Done())), toAny(w.nodes.WaitForCacheSync(ctx.Done()))} {
		for inf, ok := range synced {
			if !ok {
				w.stop()
				return nil, fmt.Errorf("cache of %v did not sync", inf)
			}
		}
	}
	return w, nil
}

func toAny[K comparable](m map[K]bool) map[any]bool {
	out := map[any]bool{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (w *watcher) stop() {
	w.cancel()
	w.factory.Shutdown()
	w.nodes.Shutdown()
}

// node returns the cached node, or nil.
func (w *watcher) node(name string) *v1.Node {
	obj, ok, _ := w.nodeIdx.GetByKey(name)
	if !ok {
		return nil
	}
	return obj.(*v1.Node)
}

// podTimes returns when the pods pinned to node were first seen, in order.
func (w *watcher) podTimes(node string) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]time.Time(nil), w.podSeen[node]...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

func (w *watcher) usableTime(node string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.usableAt[node]
	return t, ok
}

// gateOpenTime is when the node, first seen with the burst's gate taint, was first
// seen without it.
func (w *watcher) gateOpenTime(node string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.gateOpenAt[node]
	return t, ok
}

// waitConverged waits until every DaemonSet named in wants shows its dsWant, and
// returns when the benchmark saw that. It fails when the controller exits or after
// timeout, naming the DaemonSets still short.
func (w *watcher) waitConverged(ctx context.Context, wants map[string]dsWant, ctrl *ControllerProcess, timeout time.Duration) (time.Time, error) {
	// Looked at on every DaemonSet event, and each second in case one was coalesced away.
	return w.waitUntil(ctx, func() []string { return w.notConverged(wants) }, w.changed, time.Second, ctrl, timeout)
}

// waitUntil waits until short names nothing, looking when wake fires and every
// interval. It fails when the controller exits or after timeout, with what short
// names then.
func (w *watcher) waitUntil(ctx context.Context, short func() []string, wake <-chan struct{}, interval time.Duration, ctrl *ControllerProcess, timeout time.Duration) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		missing := short()
		if len(missing) == 0 {
			return time.Now(), nil
		}
		select {
		case <-wake:
		case <-tick.C:
		case <-ctrl.Exited():
			return time.Time{}, fmt.Errorf("the %s controller exited; see %s", ctrl.Name, ctrl.Log())
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("%w after %v: %s", errNotConverged, timeout, strings.Join(missing, "; "))
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// notConverged describes the DaemonSets that do not yet show their dsWant (at most
// three).
func (w *watcher) notConverged(wants map[string]dsWant) []string {
	var short []string
	names := make([]string, 0, len(wants))
	for name := range wants {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want := wants[name]
		ds, err := w.ds.DaemonSets(Namespace).Get(name)
		if err != nil {
			short = append(short, name+": not seen")
			continue
		}
		if !dsConverged(ds, want) {
			s := ds.Status
			short = append(short, fmt.Sprintf("%s: generation %d observed %d, desired %d/%d current %d updated %d ready %d available %d/%d misscheduled %d",
				name, ds.Generation, s.ObservedGeneration, s.DesiredNumberScheduled, want.Desired, s.CurrentNumberScheduled,
				s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable, want.Available, s.NumberMisscheduled))
		}
	}
	if len(short) > 3 {
		short = append(short[:3], fmt.Sprintf("and %d more", len(short)-3))
	}
	return short
}

// expectedDesired counts the nodes that should run ds's pod: those its node
// selector and required node affinity match, with no NoSchedule or NoExecute taint
// its pod does not tolerate. (The benchmark's nodes are all Ready when it asks.)
func expectedDesired(ds *apps.DaemonSet, nodes []*v1.Node) int32 {
	var n int32
	for _, node := range nodes {
		if shouldRun(ds, node) {
			n++
		}
	}
	return n
}

func shouldRun(ds *apps.DaemonSet, node *v1.Node) bool {
	pod := &v1.Pod{Spec: ds.Spec.Template.Spec}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return false
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect == v1.TaintEffectPreferNoSchedule {
			continue
		}
		if !corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, t, false) {
			return false
		}
	}
	return true
}

// targetNode is the node a DaemonSet pod is for: its node, or before scheduling the
// node its node affinity pins it to.
func targetNode(pod *v1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}

// parallel runs do(i) for i in [0, n) on workers goroutines and returns the first
// error.
func parallel(ctx context.Context, n, workers int, do func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(ctx, i); err != nil {
					select {
					case errs <- err:
					default:
					}
					cancel()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of values.
func percentile(values []time.Duration, p float64) time.Duration {
	if len(values) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), values...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}
