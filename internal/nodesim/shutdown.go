package nodesim

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a kubelet reports during a graceful node shutdown (AnnotationShutdown).
const (
	// messageShuttingDown is the message of the node's Ready condition.
	messageShuttingDown = "node is shutting down"
	// A pod the shutdown stopped.
	reasonShutdownTerminated  = "Terminated"
	messageShutdownTerminated = "Pod was terminated in response to imminent node shutdown."
	// A pod bound to the node while it shuts down, refused by the kubelet.
	reasonShutdownRejected  = "NodeShutdown"
	messageShutdownRejected = "Pod was rejected as the node is shutting down."
)

// decideShutdown plays the kubelet of a node shutting down gracefully: a pod it
// never started is rejected (Failed, NodeShutdown); a running one is stopped and ends
// Failed (Terminated), its containers terminated, with the DisruptionTarget
// condition that says the kubelet ended it. The pod is not removed: it stays
// Failed, as on a real node, for its controller to see.
func decideShutdown(pod *v1.Pod, now time.Time) podDecision {
	stamp := metav1.NewTime(now.Truncate(time.Second))
	if pod.Status.StartTime == nil {
		st := *pod.Status.DeepCopy()
		st.Phase, st.Reason, st.Message = v1.PodFailed, reasonShutdownRejected, messageShutdownRejected
		return podDecision{Status: &st}
	}
	st := endedStatus(pod, exitStopped, stamp)
	st.Phase, st.Reason, st.Message = v1.PodFailed, reasonShutdownTerminated, messageShutdownTerminated
	conds := conditionSetter{conds: st.Conditions, gen: pod.Generation, now: stamp}
	conds.set(v1.DisruptionTarget, condition{v1.ConditionTrue, v1.PodReasonTerminationByKubelet, messageShutdownTerminated})
	st.Conditions = kubeletFirst(conds.conds)
	return podDecision{Status: &st}
}
