package nodesim

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A running pod's CPU and memory can be resized: the simulated kubelet reports a
// running container's resources from its spec, so a resize shows at once, with no
// restart. A running pod's container image can be changed in place: the kubelet then
// stops the container, pulls the new image and starts it again, which the simulated
// kubelet plays for app containers and sidecars. The container stops at once (the pod
// is no longer Ready), waits in ContainerCreating for the pod's ready delay from
// when it stopped, then runs the new image, with its restart count one higher, and
// the pod is Ready again. On a node whose sim.everynode.dev/fail annotation names
// ErrImagePull or ImagePullBackOff, or whose sim.everynode.dev/unpullable annotation
// names the new image, the new image is never pulled: the container waits in
// ErrImagePull for the ready delay, then in ImagePullBackOff, until the annotation
// goes.

// minRestartRequeue is the shortest wait before a restarting container is looked at again.
const minRestartRequeue = 100 * time.Millisecond

// exitCodeStopped ends a run the kubelet stopped for a new image (Completed).
const exitCodeStopped = 0

// imageChanged reports whether a container that has run is given an image other
// than the one its status shows it ran.
func imageChanged(prev *v1.ContainerStatus, c *v1.Container) bool {
	if prev == nil {
		return false
	}
	ran := prev.State.Running != nil || prev.State.Terminated != nil || prev.LastTerminationState.Terminated != nil
	return ran && prev.ImageID != imageID(c.Image)
}

// restarting reports whether a running pod's container restarts for a new image.
func restarting(stage podStage, prev *v1.ContainerStatus, c *v1.Container) bool {
	return (stage == stageRunning || stage == stageCrashed) && imageChanged(prev, c)
}

// restartForImage is the status of a container whose image changed, now; pullFails:
// the node cannot pull images.
func (b containerBuilder) restartForImage(c *v1.Container, prev *v1.ContainerStatus, readyAfter time.Duration, pullFails bool) v1.ContainerStatus {
	stopped := prev.LastTerminationState.Terminated
	stopsNow := prev.State.Waiting == nil || stopped == nil
	if stopsNow {
		// Still running the old image (or ended): it is stopped now.
		start := b.now
		if r := prev.State.Running; r != nil {
			start = r.StartedAt
		}
		stopped = &v1.ContainerStateTerminated{ExitCode: exitCodeStopped, Reason: reasonCompleted, StartedAt: start, FinishedAt: b.now, ContainerID: prev.ContainerID}
	}
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: prev.RestartCount, Started: ptr.To(false),
		LastTerminationState: v1.ContainerState{Terminated: stopped.DeepCopy()}}
	// The stop is stored to the second: a stop written now always shows once.
	pulled := !stopsNow && !b.clock.Before(stopped.FinishedAt.Add(readyAfter))
	switch {
	case !pulled && pullFails:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: FailErrImagePull, Message: waitingMessage(FailErrImagePull, c)}
	case !pulled:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reasonContainerCreating}
	case pullFails:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: FailImagePullBackOff, Message: waitingMessage(FailImagePullBackOff, c)}
	default:
		cs.RestartCount++
		cs.Ready, cs.Started = true, ptr.To(true)
		cs.ImageID, cs.ContainerID = imageID(c.Image), containerID(b.uid, c.Name, cs.RestartCount)
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: b.now}
		cs.Resources = runningResources(c)
	}
	return cs
}

// runningResources is the CPU and memory a running container is given, as its
// status reports them: its spec's, which a resize changes at once (nil when it asks
// for none).
func runningResources(c *v1.Container) *v1.ResourceRequirements {
	var r v1.ResourceRequirements
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := c.Resources.Requests[name]; ok {
			if r.Requests == nil {
				r.Requests = v1.ResourceList{}
			}
			r.Requests[name] = q
		}
		if q, ok := c.Resources.Limits[name]; ok {
			if r.Limits == nil {
				r.Limits = v1.ResourceList{}
			}
			r.Limits[name] = q
		}
	}
	if r.Requests == nil && r.Limits == nil {
		return nil
	}
	return &r
}

// restartingUntil is how long until a container restarting for its new image runs
// it (or, on a node that cannot pull, gives up the first pull); 0 for none.
func restartingUntil(st *v1.PodStatus, readyAfter time.Duration, now time.Time) time.Duration {
	var next time.Duration
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			w, t := cs.State.Waiting, cs.LastTerminationState.Terminated
			if w == nil || t == nil || (w.Reason != reasonContainerCreating && w.Reason != FailErrImagePull) {
				continue
			}
			d := t.FinishedAt.Add(readyAfter).Sub(now)
			if d <= 0 {
				d = max(readyAfter, minRestartRequeue) // stopped just now, in a second already begun
			}
			if next == 0 || d < next {
				next = d
			}
		}
	}
	return next
}

// pullFailure reports whether a node's failures stop it from pulling images.
func pullFailure(fs []Failure) bool {
	for _, f := range fs {
		if f.Reason == FailErrImagePull || f.Reason == FailImagePullBackOff {
			return true
		}
	}
	return false
}

// unpullable reads a node's AnnotationUnpullable.
func unpullable(node *v1.Node) map[string]bool {
	s, ok := node.Annotations[AnnotationUnpullable]
	if !ok {
		return nil
	}
	out := map[string]bool{}
	for image := range strings.SplitSeq(s, ",") {
		if image = strings.TrimSpace(image); image != "" {
			out[image] = true
		}
	}
	return out
}

// unpullableFailures are the failures of a new pod's containers whose images the
// node cannot pull.
func unpullableFailures(pod *v1.Pod, images map[string]bool) []Failure {
	var out []Failure
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if images[c.Image] {
				out = append(out, Failure{Container: c.Name, Reason: FailErrImagePull})
			}
		}
	}
	return out
}

// previous finds a container's status by name.
func previous(olds []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range olds {
		if olds[i].Name == name {
			return &olds[i]
		}
	}
	return nil
}
