package daemon

import (
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
)

// AnnotationFailedBefore on a pod the controller creates: how many of the
// DaemonSet's pods had failed on that node, at that template generation, before it
// — the step the node's failed-pod back-off had reached. It lets anyone reading the
// cluster (everynode explain) see the back-off, and a restarted controller take it
// up where it was. Pods created while nothing failed do not carry it.
const AnnotationFailedBefore = "everynode.dev/failed-pods-before"

// Failed-pod back-off bounds: the n-th failed pod on a node holds the next one for
// 1s, 2s, 4s, ... up to 15 minutes.
const (
	FailedPodBackoffInitial = time.Second
	FailedPodBackoffMax     = 15 * time.Minute
)

// FailedPodDelay is how long, after the n-th failed pod on a node is deleted
// (n ≥ 1), the next failed pod there is left alone.
func FailedPodDelay(n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := FailedPodBackoffInitial
	for i := 1; i < n && d < FailedPodBackoffMax; i++ {
		d *= 2
	}
	return min(d, FailedPodBackoffMax)
}

// FailedBefore reads a pod's AnnotationFailedBefore: 0 when absent or invalid.
func FailedBefore(pod *v1.Pod) int {
	n, err := strconv.Atoi(pod.Annotations[AnnotationFailedBefore])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// SetFailedBefore records on a new pod how many pods failed on its node before it.
func SetFailedBefore(pod *v1.Pod, n int) {
	if n <= 0 {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationFailedBefore] = strconv.Itoa(n)
}

// failedPodBackoff is what a failed pod's own record says of its node's back-off:
// the failures there so far, this one included, and until when this pod is left
// alone (zero when it is not). A pod of another template generation started over.
func (v *view) failedPodBackoff(pod *v1.Pod) (int, time.Time) {
	if v.hasGen && pod.Labels[TemplateGenerationLabel] != strconv.FormatInt(v.gen, 10) {
		return 1, time.Time{}
	}
	before := FailedBefore(pod)
	if before == 0 {
		return 1, time.Time{}
	}
	return before + 1, pod.CreationTimestamp.Add(FailedPodDelay(before))
}
