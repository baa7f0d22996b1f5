package nodesim

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Exit codes of a container stopped for its pod's deletion: it ends by itself on
// SIGTERM within the grace period, or is killed (SIGKILL) when the grace ends.
const (
	exitStopped int32 = 0
	exitKilled  int32 = 137
)

// maxRemovalLag bounds how long the simulated kubelet takes, once a deleted pod's
// containers stopped, to report the pod's end and remove it.
const maxRemovalLag = time.Second

// decideRemoval plays the kubelet stopping a deleted pod. Its containers stop after
// the shorter of its grace period and stop (how long they take to stop by
// themselves); the kubelet then reports the pod's end — its containers terminated,
// not Ready, phase Succeeded when every container stopped by itself, Failed when one
// was killed — and removes it a moment later (half the stopping time, at most a
// second). A pod that had already finished is removed once its grace has passed.
func decideRemoval(in podInput, stop time.Duration, now time.Time) podDecision {
	pod := in.Pod
	var grace time.Duration
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	requested := pod.DeletionTimestamp.Add(-grace)
	stopping := min(grace, stop)
	stopped := requested.Add(stopping)
	if now.Before(stopped) {
		return podDecision{RequeueAfter: stopped.Sub(now)}
	}
	if isTerminal(pod.Status.Phase) {
		gone := stopped.Add(min(maxRemovalLag, stopping/2))
		if now.Before(gone) {
			return podDecision{RequeueAfter: gone.Sub(now)}
		}
		return podDecision{Delete: true}
	}
	exit := exitStopped
	if stop > grace {
		exit = exitKilled
	}
	st := endedStatus(pod, exit, metav1.NewTime(now.Truncate(time.Second)))
	return podDecision{Status: &st, RequeueAfter: min(maxRemovalLag, stopping/2)}
}

// endedStatus is the status the kubelet reports of a deleted pod once its
// containers stopped with exit: running containers terminated, the pod not Ready,
// and a terminal phase.
func endedStatus(pod *v1.Pod, exit int32, now metav1.Time) v1.PodStatus {
	st := *pod.Status.DeepCopy()
	reason, phase := reasonCompleted, v1.PodSucceeded
	if exit != exitStopped {
		reason, phase = reasonError, v1.PodFailed
	}
	for _, statuses := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range statuses {
			cs := &statuses[i]
			if cs.State.Running != nil {
				cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					ExitCode: exit, Reason: reason, StartedAt: cs.State.Running.StartedAt, FinishedAt: now, ContainerID: cs.ContainerID,
				}}
			}
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != exitStopped {
				phase = v1.PodFailed
			}
			cs.Ready, cs.Started = false, new(bool)
		}
	}
	st.Phase = phase
	notReady := condition{v1.ConditionFalse, reasonPodCompleted, ""}
	if phase == v1.PodFailed {
		notReady = condition{v1.ConditionFalse, reasonContainersNotReady, "containers with unready status: [" + strings.Join(containerNames(pod), " ") + "]"}
	}
	conds := conditionSetter{conds: st.Conditions, gen: pod.Generation, now: now}
	conds.set(v1.PodReadyToStartContainers, condition{status: v1.ConditionFalse})
	conds.set(v1.PodReady, notReady)
	conds.set(v1.ContainersReady, notReady)
	st.Conditions = kubeletFirst(conds.conds)
	return st
}
