package bench

import (
	"fmt"
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
	defer r.reportProgress("converging", wants)()
	if r.ctrl.Name == Floor {
		return r.w.waitUntil(r.ctx, func() []string { return r.w.podsShort(wants) }, nil, podsEvery, r.ctrl, r.o.Timeout)
	}
	return r.w.waitConverged(r.ctx, wants, r.ctrl, r.o.Timeout)
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
