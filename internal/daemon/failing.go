package daemon

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ReasonContainerFailing: a pod of the new revision has a container the kubelet
// reports as failing (crash-looping, an image it cannot pull, a config it cannot
// build, killed for memory).
const ReasonContainerFailing Reason = "PodContainerFailing"

// failingWaits are the reasons a container waits with that mean it will not run
// without a change: the kubelet retries them with a growing back-off.
var failingWaits = map[string]bool{
	"CrashLoopBackOff":           true,
	"ImagePullBackOff":           true,
	"ErrImagePull":               true,
	"CreateContainerConfigError": true,
	"InvalidImageName":           true,
}

// oomKilled is the reason the kubelet gives a container killed for memory.
const oomKilled = "OOMKilled"

// maxWaitMessage bounds how much of the kubelet's own message a condition quotes.
const maxWaitMessage = 200

// containerFailure finds the first container of the pod, init containers first,
// that is failing, and says how: "" when none is.
// The status of a container that an in-place update restarts is the old image's
// until the kubelet acts on the change: it is left out until then.
func (v *view) containerFailure(pod *v1.Pod) (container, how string) {
	rec, inPlace := v.inPlaceOf(pod)
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if inPlace && rec.stale(&cs) {
				continue
			}
			if how := failingState(cs); how != "" {
				return cs.Name, how
			}
		}
	}
	return "", ""
}

func failingState(cs v1.ContainerStatus) string {
	if w := cs.State.Waiting; w != nil && failingWaits[w.Reason] {
		if w.Message == "" {
			return "is waiting in " + w.Reason
		}
		msg := w.Message
		if len(msg) > maxWaitMessage {
			msg = msg[:maxWaitMessage] + "…"
		}
		return fmt.Sprintf("is waiting in %s (%s)", w.Reason, msg)
	}
	if t := cs.State.Terminated; t != nil && t.Reason == oomKilled {
		return "was killed for memory (" + oomKilled + ")"
	}
	if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == oomKilled {
		return "was last terminated " + oomKilled
	}
	return ""
}
