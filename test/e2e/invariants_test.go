package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// An invariant bounds a measure of a DaemonSet's pods, grouped by the node they
// are pinned to, in every state the API server goes through. measure returns the
// value and, for the report, the nodes that make it up.
type invariant struct {
	name    string
	limit   int
	measure func(byNode map[string][]*v1.Pod) (int, []string)
}

// maxNodesWithoutReadyPod: at most limit of the nodes lack a live, Ready pod.
func maxNodesWithoutReadyPod(nodes []string, limit int) invariant {
	return invariant{
		name:  "nodes without a Ready pod",
		limit: limit,
		measure: func(byNode map[string][]*v1.Pod) (int, []string) {
			var missing []string
			for _, node := range nodes {
				if !hasReadyPod(byNode[node]) {
					missing = append(missing, node)
				}
			}
			return len(missing), missing
		},
	}
}

// maxNodesWithTwoPods: at most limit nodes hold more than one live pod.
func maxNodesWithTwoPods(limit int) invariant {
	return invariant{
		name:  "nodes with more than one live pod",
		limit: limit,
		measure: func(byNode map[string][]*v1.Pod) (int, []string) {
			var crowded []string
			for node, pods := range byNode {
				if len(livePods(pods)) > 1 {
					crowded = append(crowded, node)
				}
			}
			sort.Strings(crowded)
			return len(crowded), crowded
		},
	}
}

// maxLivePodsPerNode: no node holds more than limit live pods.
func maxLivePodsPerNode(limit int) invariant {
	return invariant{
		name:  "live pods on one node",
		limit: limit,
		measure: func(byNode map[string][]*v1.Pod) (int, []string) {
			most, where := 0, []string(nil)
			for node, pods := range byNode {
				if n := len(livePods(pods)); n > most {
					most, where = n, []string{node}
				}
			}
			return most, where
		},
	}
}

// live: not being deleted and not finished.
func isLive(pod *v1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded
}

func livePods(pods []*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range pods {
		if isLive(p) {
			out = append(out, p)
		}
	}
	return out
}

func hasReadyPod(pods []*v1.Pod) bool {
	for _, p := range pods {
		if isLive(p) && isPodReady(p) {
			return true
		}
	}
	return false
}

func isPodReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// invariantWatcher follows a namespace's pods through a watch, from a list taken
// when it starts, and checks its invariants after every event: every state the API
// server stored is seen, in order.
type invariantWatcher struct {
	client       kubernetes.Interface
	ns, selector string
	invariants   []invariant
	// relist: an expired watch is followed on from a fresh list (relisted counts
	// them) instead of failing the watcher.
	relist bool
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	pods       map[types.UID]*v1.Pod
	events     int
	peaks      []int
	violations []string
	watchErr   error
	relisted   int
}

// maxViolations bounds what a watcher records, so a broken rollout reports its
// first breaches rather than thousands.
const maxViolations = 10

// watchInvariants starts checking the pods of namespace ns matching selector in the
// package's sandbox. The invariants must hold when it starts, too. Call stop to end
// it and report breaches.
func watchInvariants(t *testing.T, ns, selector string, invariants ...invariant) *invariantWatcher {
	t.Helper()
	return watchInvariantsOf(t, env.client, ns, selector, invariants...)
}

// watchInvariantsOf is watchInvariants in the cluster of client.
func watchInvariantsOf(t *testing.T, client kubernetes.Interface, ns, selector string, invariants ...invariant) *invariantWatcher {
	t.Helper()
	return startInvariantWatcher(t, client, ns, selector, false, invariants)
}

func startInvariantWatcher(t *testing.T, client kubernetes.Interface, ns, selector string, relist bool, invariants []invariant) *invariantWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &invariantWatcher{client: client, ns: ns, selector: selector, invariants: invariants, cancel: cancel, done: make(chan struct{}),
		pods: map[types.UID]*v1.Pod{}, peaks: make([]int, len(invariants)), relist: relist}
	pods := client.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatalf("listing pods to watch: %v", err)
	}
	for i := range list.Items {
		w.pods[list.Items[i].UID] = &list.Items[i]
	}
	w.mu.Lock()
	w.checkLocked("in the initial list")
	w.mu.Unlock()
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = selector
		return pods.Watch(ctx, o)
	}}
	go func() {
		defer close(w.done)
		for rv := list.ResourceVersion; rv != ""; {
			rv = w.follow(ctx, lw, rv)
		}
	}()
	t.Cleanup(func() { w.cancel(); <-w.done })
	return w
}

// watchInvariantsRelisting is watchInvariantsOf for a watch that must outlive the
// API server: when its resourceVersion has expired (a restarted API server's watch
// cache starts afresh), it lists the pods again and follows on from there. The
// states between the last event and the list are not seen; the list is checked.
func watchInvariantsRelisting(t *testing.T, client kubernetes.Interface, ns, selector string, invariants ...invariant) *invariantWatcher {
	t.Helper()
	return startInvariantWatcher(t, client, ns, selector, true, invariants)
}

// follow applies the events of a watch from resourceVersion rv until ctx ends or the
// watch fails, and returns the resourceVersion to follow on from after a relist, or
// "" to stop.
func (w *invariantWatcher) follow(ctx context.Context, lw cache.WatcherWithContext, rv string) string {
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
	if err != nil {
		w.fail(fmt.Errorf("watching pods: %w", err))
		return ""
	}
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			return ""
		case ev, ok := <-rw.ResultChan():
			if !ok {
				w.fail(fmt.Errorf("the pod watch ended early"))
				return ""
			}
			if ev.Type == watch.Error && w.relist {
				if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return w.relistPods(ctx)
				}
			}
			w.apply(ev)
		}
	}
}

// relistPods replaces what the watcher knows with a fresh list, retried until the
// API server answers, checks it, and returns its resourceVersion ("" if ctx ended).
func (w *invariantWatcher) relistPods(ctx context.Context) string {
	var list *v1.PodList
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		list, err = w.client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: w.selector})
		return err == nil, nil
	})
	if err != nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pods = map[types.UID]*v1.Pod{}
	for i := range list.Items {
		w.pods[list.Items[i].UID] = &list.Items[i]
	}
	w.relisted++
	w.checkLocked(fmt.Sprintf("in a relist (rv %s)", list.ResourceVersion))
	return list.ResourceVersion
}

func (w *invariantWatcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watchErr == nil {
		w.watchErr = err
	}
}

func (w *invariantWatcher) apply(ev watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pod, ok := ev.Object.(*v1.Pod)
	switch {
	case ev.Type == watch.Bookmark:
		return
	case ev.Type == watch.Error || !ok:
		if w.watchErr == nil {
			w.watchErr = fmt.Errorf("pod watch error: %v", ev.Object)
		}
		return
	case ev.Type == watch.Deleted:
		delete(w.pods, pod.UID)
	default:
		w.pods[pod.UID] = pod
	}
	w.events++
	w.checkLocked(fmt.Sprintf("after %s %s (rv %s)", ev.Type, pod.Name, pod.ResourceVersion))
}

// checkLocked measures the current state against every invariant; w.mu is held.
func (w *invariantWatcher) checkLocked(when string) {
	byNode := map[string][]*v1.Pod{}
	for _, p := range w.pods {
		byNode[targetNode(p)] = append(byNode[targetNode(p)], p)
	}
	for i, inv := range w.invariants {
		n, where := inv.measure(byNode)
		w.peaks[i] = max(w.peaks[i], n)
		if n > inv.limit && len(w.violations) < maxViolations {
			w.violations = append(w.violations, fmt.Sprintf("%s: %d > %d %s (%v); pods: %s", inv.name, n, inv.limit, when, where, describe(byNode)))
		}
	}
}

// describe prints each node's pods with their hash, phase and readiness.
func describe(byNode map[string][]*v1.Pod) string {
	var nodes []string
	for node := range byNode {
		nodes = append(nodes, node)
	}
	sort.Strings(nodes)
	var sb strings.Builder
	for _, node := range nodes {
		fmt.Fprintf(&sb, "[%s:", node)
		for _, p := range byNode[node] {
			fmt.Fprintf(&sb, " %s(hash=%s %s ready=%t deleting=%t)", p.Name, p.Labels["controller-revision-hash"], p.Status.Phase, isPodReady(p), p.DeletionTimestamp != nil)
		}
		sb.WriteString("] ")
	}
	return sb.String()
}

// stop waits until the watcher has caught up with the pods the API server holds
// now, stops it and reports every breach as a test error. It returns the highest
// value each invariant's measure reached, in the order they were given, so a test
// can show that the states it guards against were approached.
func (w *invariantWatcher) stop(t *testing.T) []int {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := w.client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: w.selector})
		if err != nil {
			return false, nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.watchErr != nil || len(list.Items) != len(w.pods) {
			return w.watchErr != nil, nil
		}
		for _, p := range list.Items {
			if seen, ok := w.pods[p.UID]; !ok || seen.ResourceVersion != p.ResourceVersion {
				return false, nil
			}
		}
		return true, nil
	})
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		t.Errorf("the invariant watcher did not catch up with the API server: %v", err)
	}
	if w.watchErr != nil {
		t.Errorf("the invariant watcher lost track of the pods: %v", w.watchErr)
	}
	for _, v := range w.violations {
		t.Error(v)
	}
	t.Logf("invariant watcher checked %d pod events and %d relists; peaks %v", w.events, w.relisted, w.peaks)
	return w.peaks
}
