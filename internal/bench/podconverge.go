package bench

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/everynode/everynode/internal/daemon"
)

// podsEvery is how often convergence read from the pods is looked at.
const podsEvery = 100 * time.Millisecond

// waitConverged waits until every DaemonSet named in wants has converged: as its
// status shows it, or for the floor controller, which writes no status, as its pods
// show it (see podsShort).
func (r *runCtx) waitConverged(wants map[string]dsWant) (time.Time, error) {
	return r.waitConvergedWithin(wants, r.o.Timeout)
}

// waitConvergedWithin is waitConverged with its own timeout.
func (r *runCtx) waitConvergedWithin(wants map[string]dsWant, timeout time.Duration) (time.Time, error) {
	defer r.reportProgress("converging", wants)()
	if r.ctrl.Name == Floor {
		return r.w.waitUntil(r.ctx, func() []string { return r.w.podsShort(wants) }, nil, podsEvery, r.ctrl, timeout)
	}
	return r.w.waitConverged(r.ctx, wants, r.ctrl, timeout)
}

// errNotConverged is the error of a wait for convergence that timed out.
var errNotConverged = errors.New("not converged")

// rewantEvery is how long waitConvergedOn waits for convergence before it works out
// again what the DaemonSets should show.
const rewantEvery = 30 * time.Second

// waitConvergedOn is waitConverged for what the DaemonSets should show as want works
// it out from the nodes: while they have not converged, it works it out again every
// rewantEvery, so that the wait follows the nodes as they are. On a loaded sandbox a
// simulated node whose heartbeat was answered late is marked NotReady and tainted
// for a while, and every controller rightly stops counting it: wants worked out in
// that while would never be met once the node recovers.
// It returns when they converged and what they showed then.
func (r *runCtx) waitConvergedOn(want func() (map[string]dsWant, error)) (time.Time, map[string]dsWant, error) {
	deadline := time.Now().Add(r.o.Timeout)
	wants, err := want()
	for {
		if err != nil {
			return time.Time{}, nil, err
		}
		var at time.Time
		at, err = r.waitConvergedWithin(wants, min(rewantEvery, time.Until(deadline)))
		if !errors.Is(err, errNotConverged) || !time.Now().Before(deadline) {
			return at, wants, err
		}
		var next map[string]dsWant
		if next, err = want(); err == nil && !maps.Equal(next, wants) {
			r.logf("the nodes changed while waiting: the DaemonSets should now show %d pods (were %d)", wantedPods(next), wantedPods(wants))
		}
		wants = next // on an error, returned at the top of the loop
	}
}

// wantedPods is how many pods wants wants, summed over the DaemonSets.
func wantedPods(wants map[string]dsWant) int {
	n := 0
	for _, w := range wants {
		n += int(w.Desired)
	}
	return n
}

// podsShort describes the DaemonSets (at most three) whose pods do not show their
// dsWant: one pod not being deleted on each of Desired nodes, each a node the
// DaemonSet should run on, and Available of them Running and Ready.
func (w *watcher) podsShort(wants map[string]dsWant) []string {
	pods, err := w.podList.Pods(Namespace).List(labels.Everything())
	if err != nil {
		return []string{err.Error()}
	}
	live := map[string][]*v1.Pod{}
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if pod.DeletionTimestamp != nil || ref == nil || ref.Kind != "DaemonSet" {
			continue
		}
		live[ref.Name] = append(live[ref.Name], pod)
	}
	names := make([]string, 0, len(wants))
	for name := range wants {
		names = append(names, name)
	}
	sort.Strings(names)
	var short []string
	for _, name := range names {
		want := wants[name]
		ds, err := w.ds.DaemonSets(Namespace).Get(name)
		if err != nil {
			short = append(short, name+": not seen")
			continue
		}
		onNodes := map[string]bool{}
		misplaced, ready := 0, 0
		for _, pod := range live[name] {
			node := w.node(targetNode(pod))
			if node == nil || onNodes[node.Name] || !shouldRun(ds, node) {
				misplaced++
				continue
			}
			onNodes[node.Name] = true
			if pod.Status.Phase == v1.PodRunning && daemon.IsReady(pod) {
				ready++
			}
		}
		if len(onNodes) != int(want.Desired) || misplaced > 0 || ready != int(want.Available) {
			short = append(short, fmt.Sprintf("%s: pods on %d/%d nodes, %d ready (want %d), %d misplaced",
				name, len(onNodes), want.Desired, ready, want.Available, misplaced))
		}
	}
	if len(short) > 3 {
		short = append(short[:3], fmt.Sprintf("and %d more", len(short)-3))
	}
	return short
}
