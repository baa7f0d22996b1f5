package nodesim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Reasons the simulated kubelet writes, as the kubelet does.
const (
	reasonContainerCreating  = "ContainerCreating"
	reasonCrashLoopBackOff   = "CrashLoopBackOff"
	reasonContainersNotReady = "ContainersNotReady"
	reasonPodCompleted       = "PodCompleted"
	reasonNodeNotReady       = "NodeNotReady"
	reasonReadinessGates     = "ReadinessGatesNotReady"
	reasonCompleted          = "Completed"
	reasonError              = "Error"
)

// buildStatus is the status of a pod at the given stage. Fields the simulator does
// not own (qosClass, nominatedNodeName, foreign conditions …) are kept; times of
// things that did not change are kept, those of changes are now.
func buildStatus(in podInput, stage podStage, restarts int32, start, now time.Time) v1.PodStatus {
	pod := in.Pod
	stamp := metav1.NewTime(now.Truncate(time.Second))
	st := *pod.Status.DeepCopy()
	st.ObservedGeneration = pod.Generation
	st.StartTime = &metav1.Time{Time: start}
	st.HostIP, st.HostIPs = in.HostIP, []v1.HostIP{{IP: in.HostIP}}
	podIP := in.PodIP
	if pod.Spec.HostNetwork {
		podIP = in.HostIP
	}
	if podIP != "" {
		st.PodIP, st.PodIPs = podIP, []v1.PodIP{{IP: podIP}}
	}
	beh := in.Behaviour
	switch {
	case stage == stagePending || beh.waitsForever(pod):
		st.Phase = v1.PodPending
	case stage == stageEnded:
		st.Phase = beh.EndPhase
	default:
		st.Phase = v1.PodRunning
	}
	c := containerBuilder{uid: pod.UID, old: &pod.Status, now: stamp, clock: now}
	stuck := beh.stuckInit(pod)
	blocked := false // an earlier init container never started
	st.InitContainerStatuses = st.InitContainerStatuses[:0]
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		var cs v1.ContainerStatus
		switch {
		case blocked:
			cs = c.status(ic, c.old.InitContainerStatuses, waitingFor(reasonPodInitializing, ""), 0)
		case ic.Name == stuck:
			f, _ := beh.failureOf(ic.Name, false)
			reason := waitingReason(f, stage)
			cs = c.status(ic, c.old.InitContainerStatuses, waitingFor(reason, waitingMessage(reason, ic)), 0)
			blocked = true
		case isSidecar(ic) && restarting(stage, previous(c.old.InitContainerStatuses, ic.Name), ic):
			cs = c.restartForImage(ic, previous(c.old.InitContainerStatuses, ic.Name), beh.ReadyAfter, in.cannotPull(ic.Image))
		case isSidecar(ic):
			cs = c.sidecar(ic, stage)
		default:
			cs = c.status(ic, c.old.InitContainerStatuses, exited(0), 0)
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	st.ContainerStatuses = st.ContainerStatuses[:0]
	for i := range pod.Spec.Containers {
		ac := &pod.Spec.Containers[i]
		var cs v1.ContainerStatus
		if blocked {
			cs = c.status(ac, c.old.ContainerStatuses, waitingFor(reasonPodInitializing, ""), 0)
		} else if f, ok := beh.failureOf(ac.Name, true); ok && f.waits() {
			reason := waitingReason(f, stage)
			cs = c.status(ac, c.old.ContainerStatuses, waitingFor(reason, waitingMessage(reason, ac)), 0)
		} else if prev := previous(c.old.ContainerStatuses, ac.Name); restarting(stage, prev, ac) {
			cs = c.restartForImage(ac, prev, beh.ReadyAfter, in.cannotPull(ac.Image))
		} else {
			cs = c.app(ac, stage, restarts, beh)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	for i := range st.ContainerStatuses {
		reportResources(&st.ContainerStatuses[i], &pod.Spec.Containers[i])
	}
	setPodConditions(&st, in, stage == stageEnded, stuck, stamp)
	applyResize(&st, &pod.Status, pod.Generation, now)
	return st
}

// reportResources sets what a container status says of the container's resources,
// as the kubelet does once the container exists (running, or ended and waiting to
// restart): the CPU and memory it runs with, and the requests allocated to it.
func reportResources(cs *v1.ContainerStatus, c *v1.Container) {
	cs.Resources, cs.AllocatedResources = nil, nil
	if cs.ContainerID == "" {
		return
	}
	cs.Resources = runningResources(c)
	if len(c.Resources.Requests) > 0 {
		cs.AllocatedResources = c.Resources.Requests.DeepCopy()
	}
}

// setPodConditions derives the pod's conditions from its phase and containers;
// stuck names the init container that never starts ("" for none).
func setPodConditions(st *v1.PodStatus, in podInput, ended bool, stuck string, now metav1.Time) {
	pod := in.Pod
	var unready []string
	for _, cs := range st.InitContainerStatuses {
		if !cs.Ready && cs.State.Terminated == nil {
			unready = append(unready, cs.Name)
		}
	}
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	containersReady := condition{status: v1.ConditionTrue}
	switch {
	case ended && st.Phase == v1.PodSucceeded:
		containersReady = condition{v1.ConditionFalse, reasonPodCompleted, ""}
	case ended:
		unready = containerNames(pod)
		fallthrough
	case len(unready) > 0:
		containersReady = condition{v1.ConditionFalse, reasonContainersNotReady, fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))}
	}
	ready := containersReady
	if ready.status == v1.ConditionTrue {
		if !in.NodeReady {
			ready = condition{v1.ConditionFalse, reasonNodeNotReady, "node is not ready"}
		} else if msg := unmetReadinessGate(pod); msg != "" {
			ready = condition{v1.ConditionFalse, reasonReadinessGates, msg}
		}
	}
	sandbox := condition{status: v1.ConditionTrue}
	if ended {
		sandbox = condition{status: v1.ConditionFalse}
	}
	conds := conditionSetter{conds: st.Conditions, gen: pod.Generation, now: now}
	conds.set(v1.PodReadyToStartContainers, sandbox)
	initialized := condition{status: v1.ConditionTrue}
	if stuck != "" {
		initialized = condition{v1.ConditionFalse, reasonContainersNotInitialized, fmt.Sprintf("containers with incomplete status: [%s]", stuck)}
	}
	conds.set(v1.PodInitialized, initialized)
	conds.set(v1.PodReady, ready)
	conds.set(v1.ContainersReady, containersReady)
	if !conds.has(v1.PodScheduled) {
		conds.set(v1.PodScheduled, condition{status: v1.ConditionTrue})
	}
	st.Conditions = kubeletFirst(conds.conds)
}

// kubeletConditions are the pod conditions the kubelet owns, in the order it
// reports them; the others (PodScheduled, DisruptionTarget, readiness gates) follow,
// in their order.
var kubeletConditions = []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady}

func kubeletFirst(conds []v1.PodCondition) []v1.PodCondition {
	out := make([]v1.PodCondition, 0, len(conds))
	for _, t := range kubeletConditions {
		for _, c := range conds {
			if c.Type == t {
				out = append(out, c)
			}
		}
	}
	for _, c := range conds {
		if !slices.Contains(kubeletConditions, c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// condition is the wanted state of one pod condition.
type condition struct {
	status          v1.ConditionStatus
	reason, message string
}

// conditionSetter updates pod conditions, keeping a condition's transition time
// while its status holds.
type conditionSetter struct {
	conds []v1.PodCondition
	gen   int64
	now   metav1.Time
}

func (s *conditionSetter) has(t v1.PodConditionType) bool {
	for _, c := range s.conds {
		if c.Type == t {
			return true
		}
	}
	return false
}

func (s *conditionSetter) set(t v1.PodConditionType, want condition) {
	next := v1.PodCondition{Type: t, ObservedGeneration: s.gen, Status: want.status, Reason: want.reason, Message: want.message, LastTransitionTime: s.now}
	for i := range s.conds {
		if s.conds[i].Type != t {
			continue
		}
		if s.conds[i].Status == want.status {
			next.LastTransitionTime = s.conds[i].LastTransitionTime
			next.LastProbeTime = s.conds[i].LastProbeTime
		}
		s.conds[i] = next
		return
	}
	s.conds = append(s.conds, next)
}

// containerRun is the wanted state of one container.
type containerRun struct {
	kind     string // "creating", "waiting", "running", "crashed" or "exited"
	ready    bool
	exitCode int32
	// reason and message of a "waiting" container; reason of a "crashed" one's
	// last termination ("" for Error).
	reason, message string
}

func exited(code int32) containerRun { return containerRun{kind: "exited", exitCode: code} }

func waitingFor(reason, message string) containerRun {
	return containerRun{kind: "waiting", reason: reason, message: message}
}

// containerBuilder writes container statuses, keeping the times of states that held.
type containerBuilder struct {
	uid types.UID
	old *v1.PodStatus
	now metav1.Time // the time written, to the second
	// clock is the decision's time itself, for waits shorter than a second.
	clock time.Time
}

// app is the status of an application container.
func (b containerBuilder) app(c *v1.Container, stage podStage, restarts int32, beh Behaviour) v1.ContainerStatus {
	switch stage {
	case stagePending:
		return b.status(c, b.old.ContainerStatuses, containerRun{kind: "creating"}, 0)
	case stageCrashed, stageRunning:
		if !beh.crashes(c.Name) {
			stage, restarts = stageRunning, 0
		}
		if prev := previous(b.old.ContainerStatuses, c.Name); prev != nil {
			restarts = max(restarts, prev.RestartCount) // restarts for a new image stay counted
		}
		run := containerRun{kind: "running", ready: !beh.NeverReady, reason: beh.crashReason()}
		if stage == stageCrashed {
			run = containerRun{kind: "crashed", reason: beh.crashReason()}
		}
		return b.status(c, b.old.ContainerStatuses, run, restarts)
	case stageEnded:
		code := int32(0)
		if beh.EndPhase == v1.PodFailed {
			code = 1
		}
		return b.status(c, b.old.ContainerStatuses, exited(code), 0)
	}
	return v1.ContainerStatus{}
}

// sidecar is the status of an init container that keeps running beside the app.
func (b containerBuilder) sidecar(c *v1.Container, stage podStage) v1.ContainerStatus {
	switch stage {
	case stagePending:
		return b.status(c, b.old.InitContainerStatuses, containerRun{kind: "creating"}, 0)
	case stageEnded:
		return b.status(c, b.old.InitContainerStatuses, exited(0), 0)
	default:
		var restarts int32
		if prev := previous(b.old.InitContainerStatuses, c.Name); prev != nil {
			restarts = prev.RestartCount // restarts for a new image stay counted
		}
		return b.status(c, b.old.InitContainerStatuses, containerRun{kind: "running", ready: true}, restarts)
	}
}

func (b containerBuilder) status(c *v1.Container, olds []v1.ContainerStatus, run containerRun, restarts int32) v1.ContainerStatus {
	prev := previous(olds, c.Name)
	// startedAt is when the current run started: kept while it runs on.
	startedAt := b.now
	if prev != nil && prev.State.Running != nil && prev.RestartCount == restarts {
		startedAt = prev.State.Running.StartedAt
	}
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: restarts, Ready: run.ready, Started: ptr.To(false)}
	if run.kind != "creating" {
		cs.ImageID = imageID(c.Image)
		cs.ContainerID = containerID(b.uid, c.Name, restarts)
	}
	switch run.kind {
	case "creating":
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reasonContainerCreating}
	case "waiting":
		cs.ImageID, cs.ContainerID = "", ""
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: run.reason, Message: run.message}
	case "running":
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: startedAt}
		cs.Started = ptr.To(true)
		cs.Resources = runningResources(c)
	case "crashed":
		cs.ContainerID = containerID(b.uid, c.Name, restarts-1)
		if restarts == 1 {
			// The first crash: the kubelet restarts the container at once, with no
			// back-off, so the crashed run shows until it does.
			if prev != nil && prev.State.Terminated != nil {
				return *prev.DeepCopy()
			}
			cs.RestartCount, cs.Ready = 0, false
			cs.State.Terminated = crashTermination(run, lastRunStart(prev, b.now), b.now, cs.ContainerID)
			return cs
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{
			Reason:  reasonCrashLoopBackOff,
			Message: fmt.Sprintf("back-off restarting failed container %s in pod %s", c.Name, b.uid),
		}
	case "exited":
		if prev != nil && prev.State.Terminated != nil {
			return *prev.DeepCopy()
		}
		reason := reasonCompleted
		if run.exitCode != 0 {
			reason = reasonError
		}
		cs.State.Terminated = &v1.ContainerStateTerminated{ExitCode: run.exitCode, Reason: reason, StartedAt: startedAt, FinishedAt: b.now, ContainerID: cs.ContainerID}
	}
	if restarts > 0 {
		switch {
		case prev != nil && prev.RestartCount == restarts && prev.LastTerminationState.Terminated != nil:
			cs.LastTerminationState = *prev.LastTerminationState.DeepCopy()
		case prev != nil && prev.RestartCount == restarts-1 && prev.State.Terminated != nil:
			// Restarted after the crashed run that showed.
			cs.LastTerminationState.Terminated = prev.State.Terminated.DeepCopy()
		default:
			// The run that just crashed.
			cs.LastTerminationState.Terminated = crashTermination(run, lastRunStart(prev, b.now), b.now, containerID(b.uid, c.Name, restarts-1))
		}
	}
	return cs
}

// lastRunStart is when the container's run that prev shows started (now if none).
func lastRunStart(prev *v1.ContainerStatus, now metav1.Time) metav1.Time {
	if prev != nil && prev.State.Running != nil {
		return prev.State.Running.StartedAt
	}
	return now
}

// crashTermination is how a crashed run of the container ended: exit code 1
// (Error), or 137 (OOMKilled) when run says it was killed for memory.
func crashTermination(run containerRun, start, end metav1.Time, id string) *v1.ContainerStateTerminated {
	code, reason := int32(1), reasonError
	if run.reason == reasonOOMKilled {
		code, reason = exitCodeOOMKilled, reasonOOMKilled
	}
	return &v1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: start, FinishedAt: end, ContainerID: id}
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func containerNames(pod *v1.Pod) []string {
	names := make([]string, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

// unmetReadinessGate explains the first readiness gate whose condition is not True.
func unmetReadinessGate(pod *v1.Pod) string {
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, c := range pod.Status.Conditions {
			if c.Type != g.ConditionType {
				continue
			}
			found = true
			if c.Status != v1.ConditionTrue {
				return fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %s", g.ConditionType, c.Status)
			}
		}
		if !found {
			return fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType)
		}
	}
	return ""
}

// imageID makes up a stable digest reference for an image.
func imageID(image string) string {
	repo := image
	if i := strings.LastIndex(repo, "@"); i >= 0 {
		repo = repo[:i]
	} else if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	sum := sha256.Sum256([]byte(image))
	return repo + "@sha256:" + hex.EncodeToString(sum[:])
}

// containerID makes up a stable ID for one run of a container.
func containerID(uid types.UID, name string, run int32) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", uid, name, run))
	return runtimeScheme + hex.EncodeToString(sum[:])
}
