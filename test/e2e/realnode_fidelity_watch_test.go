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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// podRecorder keeps every version of the pods of a namespace that the API server
// sends from when it starts, with the time each arrived: what a node showed on the
// way, not only where it settled.
type podRecorder struct {
	mu       sync.Mutex
	versions map[types.UID][]v1.Pod
	gone     map[types.UID]time.Time
	stop     func()
}

func recordPods(t *testing.T, client kubernetes.Interface, ns string) *podRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &podRecorder{versions: map[types.UID][]v1.Pod{}, gone: map[types.UID]time.Time{}}
	done := make(chan struct{})
	r.stop = func() { cancel(); w.Stop(); <-done }
	t.Cleanup(r.stop)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			r.mu.Lock()
			if ev.Type == watch.Deleted {
				r.gone[pod.UID] = time.Now()
			} else {
				r.versions[pod.UID] = append(r.versions[pod.UID], *pod.DeepCopy())
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// seenConditions are the pod conditions, other than the five every running pod has,
// that any version of the pod showed: a resize's PodResizeInProgress or
// PodResizePending, a DisruptionTarget.
func (r *podRecorder) seenConditions(uid types.UID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	usual := map[v1.PodConditionType]bool{v1.PodReadyToStartContainers: true, v1.PodInitialized: true, v1.PodReady: true, v1.ContainersReady: true, v1.PodScheduled: true}
	seen := map[string]bool{}
	for _, p := range r.versions[uid] {
		for _, c := range p.Status.Conditions {
			if !usual[c.Type] {
				seen[fmt.Sprintf("%s=%s", c.Type, c.Status)+reasonSuffix(c.Reason)] = true
			}
		}
	}
	if len(seen) == 0 {
		return "none"
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// waitGone waits until the pod's deletion reached the recorder, and returns when it
// did and the last version of the pod before it.
func (r *podRecorder) waitGone(t *testing.T, uid types.UID) (time.Time, v1.Pod) {
	t.Helper()
	realWait(t, fmt.Sprintf("pod %s to be gone", uid), func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.gone[uid]
		return ok, nil
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	versions := r.versions[uid]
	return r.gone[uid], versions[len(versions)-1]
}

// removalFacts are what a node showed of a pod deleted at deleted: how long until it
// was gone, and its last status before (phase, readiness, the container's state).
func removalFacts(r *podRecorder, t *testing.T, pod v1.Pod, deleted time.Time) map[string]string {
	t.Helper()
	goneAt, last := r.waitGone(t, pod.UID)
	f := map[string]string{"deletion to gone": durationBucket(goneAt.Sub(deleted))}
	f["last status: phase"] = string(last.Status.Phase)
	f["last status: Ready"] = string(podCondition(last, v1.PodReady).Status)
	if len(last.Status.ContainerStatuses) == 1 {
		f["last status: state"] = stateText(last.Status.ContainerStatuses[0].State)
	}
	f["conditions seen"] = r.seenConditions(pod.UID)
	return f
}

// durationBucket renders a time coarsely, as the two kinds of node can match it.
func durationBucket(d time.Duration) string {
	switch {
	case d < 2*time.Second:
		return "under 2s"
	case d < 10*time.Second:
		return "2s to 10s"
	}
	return "10s or more"
}
