package bench

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podMilestones records, for each node and DaemonSet, when the benchmark first saw a
// pod of that DaemonSet for that node, and when it first saw one Running there.
type podMilestones struct {
	mu      sync.Mutex
	created map[nodeDaemonSet]time.Time
	running map[nodeDaemonSet]time.Time
}

// nodeDaemonSet names a DaemonSet's pod on a node.
type nodeDaemonSet struct{ node, daemonSet string }

// daemonPodKey is the node and DaemonSet of a pod a DaemonSet controls; false for
// any other pod, and for one not yet tied to a node.
func daemonPodKey(pod *v1.Pod) (nodeDaemonSet, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return nodeDaemonSet{}, false
	}
	key := nodeDaemonSet{targetNode(pod), ref.Name}
	return key, key.node != ""
}

func newPodMilestones() *podMilestones {
	return &podMilestones{created: map[nodeDaemonSet]time.Time{}, running: map[nodeDaemonSet]time.Time{}}
}

// see records pod as seen at now. Pods no DaemonSet controls are ignored.
func (m *podMilestones) see(pod *v1.Pod, now time.Time) {
	key, ok := daemonPodKey(pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.created[key]; !ok {
		m.created[key] = now
	}
	if _, ok := m.running[key]; !ok && pod.Status.Phase == v1.PodRunning && pod.DeletionTimestamp == nil {
		m.running[key] = now
	}
}

// createdAt is when the first pod of the DaemonSet for node was seen.
func (m *podMilestones) createdAt(node, daemonSet string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.created[nodeDaemonSet{node, daemonSet}]
	return t, ok
}

// allRunningAt is when the last of the DaemonSets' pods on node was first seen
// Running; false while one has not been.
func (m *podMilestones) allRunningAt(node string, daemonSets []string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var last time.Time
	for _, ds := range daemonSets {
		t, ok := m.running[nodeDaemonSet{node, ds}]
		if !ok {
			return time.Time{}, false
		}
		if t.After(last) {
			last = t
		}
	}
	return last, true
}

// runningCount is how many (node, DaemonSet) pairs have been seen with a pod Running.
func (m *podMilestones) runningCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.running)
}
