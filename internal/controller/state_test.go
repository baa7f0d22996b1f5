package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/daemon"
)

// A deleted DaemonSet leaves nothing behind in the controller, in either mode: no
// state, no queued pod write, no pod in the pod index, no metric series. It is first
// rolled out, with a rollout annotation and a status written, so that every part of
// its state was in use.
func TestController_ForgetsADeletedDaemonSet(t *testing.T) {
	for _, mode := range []string{ModeFull, ModeCompanion} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, harnessOptions{mode: mode})
			nodes := h.createNodes("node", 3, nil)
			spec := newDaemonSet("agent")
			if mode == ModeCompanion {
				spec = companionDaemonSet("agent", "1")
			}
			spec.Annotations[daemon.AnnotationMinHealthy] = "0s"
			ds := h.createDaemonSet(spec)
			h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
			h.changeTemplate("agent", imageV2)
			h.waitFor("the rollout to finish", func() bool { return h.converged("agent", nodes) })
			h.waitFor("its metrics", func() bool { return metricSeries(h.ctrl.metrics) > 0 })
			if h.ctrl.states.keys() != 1 {
				t.Fatalf("the controller keeps state of %d DaemonSets while one lives; want 1", h.ctrl.states.keys())
			}

			// Deleted, with its pods, as the garbage collector would.
			if err := h.client.AppsV1().DaemonSets(ds.Namespace).Delete(h.ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, pod := range h.podsOf(ds) {
				if err := h.client.CoreV1().Pods(pod.Namespace).Delete(h.ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			key := ds.Namespace + "/" + ds.Name
			h.waitFor("nothing kept of the deleted DaemonSet", func() bool {
				return h.ctrl.states.keys() == 0 && !h.ctrl.writes.tracks(key) &&
					len(h.ctrl.podIndex.list(string(ds.UID))) == 0 && metricSeries(h.ctrl.metrics) == 0
			})
		})
	}
}

// metricSeries counts the per-DaemonSet series of m.
func metricSeries(m *Metrics) int {
	n := 0
	for _, c := range []prometheus.Collector{m.desired, m.updated, m.available, m.progressing.vec, m.waiting.vec} {
		n += testutil.CollectAndCount(c)
	}
	return n
}

// tracks reports whether the queue keeps anything of key's writes.
func (q *writeQueue) tracks(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, queued := q.byDS[key]
	_, syncing := q.syncing[key]
	return queued || syncing
}
