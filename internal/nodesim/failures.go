package nodesim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The container failures the simulated kubelet can play, named by the reason the
// kubelet reports for each.
const (
	// FailErrImagePull: the image cannot be pulled. The container waits in
	// ErrImagePull for the first pull (the pod's ready delay), then in ImagePullBackOff.
	FailErrImagePull = "ErrImagePull"
	// FailImagePullBackOff is FailErrImagePull by the name of its back-off.
	FailImagePullBackOff = "ImagePullBackOff"
	// FailCreateContainerConfigError: the container's config (a missing ConfigMap or
	// Secret key) cannot be built; it waits in CreateContainerConfigError.
	FailCreateContainerConfigError = "CreateContainerConfigError"
	// FailInvalidImageName: the image reference cannot be parsed; the container
	// waits in InvalidImageName.
	FailInvalidImageName = "InvalidImageName"
	// FailOOMKilled: the container is killed for memory every restart-every
	// (defaultOOMEvery when that is not set): its last termination is OOMKilled with
	// exit code 137, and it waits in CrashLoopBackOff for the recovery.
	FailOOMKilled = "OOMKilled"
)

// defaultOOMEvery is how often an OOMKilled container is killed without restart-every.
const defaultOOMEvery = 2 * time.Second

const (
	reasonOOMKilled                = "OOMKilled"
	reasonPodInitializing          = "PodInitializing"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	exitCodeOOMKilled              = 137
)

var failReasons = []string{FailErrImagePull, FailImagePullBackOff, FailCreateContainerConfigError, FailInvalidImageName, FailOOMKilled}

// Failure is one container failure a pod's sim.everynode.dev/fail annotation asks for.
type Failure struct {
	// Container names the container (an init container or an app container);
	// "" is every app container.
	Container string
	// Reason is one of the Fail constants.
	Reason string
}

// waits: the container never starts.
func (f Failure) waits() bool { return f.Reason != FailOOMKilled }

// parseFailures reads "[container=]Reason[,...]".
func parseFailures(s string) ([]Failure, error) {
	var out []Failure
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		name, reason, named := strings.Cut(item, "=")
		if !named {
			name, reason = "", item
		}
		name, reason = strings.TrimSpace(name), strings.TrimSpace(reason)
		if named && name == "" {
			return nil, fmt.Errorf("%s=%q: %q names no container", AnnotationFail, s, item)
		}
		if !slices.Contains(failReasons, reason) {
			return nil, fmt.Errorf("%s=%q: want [container=]reason, reason one of %s", AnnotationFail, s, strings.Join(failReasons, ", "))
		}
		out = append(out, Failure{Container: name, Reason: reason})
	}
	return out, nil
}

// checkFailures drops the failures that do not fit the pod: a container it does
// not have, or OOMKilled asked of an init container that runs to completion.
func checkFailures(fs []Failure, pod *v1.Pod) ([]Failure, []error) {
	var kept []Failure
	var errs []error
	for _, f := range fs {
		if f.Container == "" {
			kept = append(kept, f)
			continue
		}
		init, found := containerKind(pod, f.Container)
		switch {
		case !found:
			errs = append(errs, fmt.Errorf("%s: the pod has no container %q", AnnotationFail, f.Container))
		case init && f.Reason == FailOOMKilled:
			errs = append(errs, fmt.Errorf("%s: %s=%s: OOMKilled is played by app containers only", AnnotationFail, f.Container, f.Reason))
		default:
			kept = append(kept, f)
		}
	}
	return kept, errs
}

// containerKind says whether the pod has a container name, and whether it is an
// init container (sidecars included).
func containerKind(pod *v1.Pod, name string) (init, found bool) {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true, true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return false, true
		}
	}
	return false, false
}

// failureOf is the failure asked of one container, if any; app says whether it
// is an app container (those a failure without a name applies to).
func (b Behaviour) failureOf(name string, app bool) (Failure, bool) {
	for _, f := range b.Failures {
		if f.Container == name || (f.Container == "" && app) {
			return f, true
		}
	}
	return Failure{}, false
}

// oomKills says whether the pod's crashes are OOM kills of chosen containers
// rather than crashes of every app container.
func (b Behaviour) oomKills() bool {
	return slices.ContainsFunc(b.Failures, func(f Failure) bool { return f.Reason == FailOOMKilled })
}

// crashReason is the reason of a crashed container's last termination.
func (b Behaviour) crashReason() string {
	if b.oomKills() {
		return reasonOOMKilled
	}
	return ""
}

// crashes says whether the app container name crashes with the pod's restarts.
func (b Behaviour) crashes(name string) bool {
	if !b.oomKills() {
		return true
	}
	f, ok := b.failureOf(name, true)
	return ok && f.Reason == FailOOMKilled
}

// stuckInit is the first init container (sidecars included) that never starts, so
// that the init containers after it and the app containers never run; "" for none.
func (b Behaviour) stuckInit(pod *v1.Pod) string {
	for _, c := range pod.Spec.InitContainers {
		if f, ok := b.failureOf(c.Name, false); ok && f.waits() {
			return c.Name
		}
	}
	return ""
}

// waitsForever says whether some container of the pod never starts: the pod
// stays Pending.
func (b Behaviour) waitsForever(pod *v1.Pod) bool {
	if b.stuckInit(pod) != "" {
		return true
	}
	for _, c := range pod.Spec.Containers {
		if f, ok := b.failureOf(c.Name, true); ok && f.waits() {
			return true
		}
	}
	return false
}

// waitingReason is the reason a failing container waits with, at the given stage.
func waitingReason(f Failure, stage podStage) string {
	if f.Reason == FailImagePullBackOff || (f.Reason == FailErrImagePull && stage != stagePending) {
		return FailImagePullBackOff
	}
	return f.Reason
}

// waitingMessage is what the kubelet says beside the reason.
func waitingMessage(reason string, c *v1.Container) string {
	switch reason {
	case FailErrImagePull:
		return fmt.Sprintf("failed to pull and unpack image %q: not found", c.Image)
	case FailImagePullBackOff:
		return fmt.Sprintf("Back-off pulling image %q", c.Image)
	case FailCreateContainerConfigError:
		return "configmap or secret key referenced by the container not found"
	case FailInvalidImageName:
		return fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name", c.Image)
	}
	return ""
}

// nodeFailures reads a Node's sim.everynode.dev/fail: failures, without container
// names, of every pod that starts on the node while it is set.
func nodeFailures(node *v1.Node) ([]Failure, error) {
	s, ok := node.Annotations[AnnotationFail]
	if !ok {
		return nil, nil
	}
	fs, err := parseFailures(s)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.Container != "" {
			return nil, fmt.Errorf("%s=%q: on a Node, give reasons only: they apply to every app container", AnnotationFail, s)
		}
	}
	return fs, nil
}

// started reports whether any container of the pod has started, as its stored
// status shows: a node's failures apply only to pods that have not.
func started(pod *v1.Pod) bool {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
				return true
			}
		}
	}
	return false
}
