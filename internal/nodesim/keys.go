package nodesim

import "time"

// The label and annotations users put on objects to steer the simulator.
const (
	// LabelSimulated marks a Node the simulator plays kubelet for; the value must be "true".
	LabelSimulated = "sim.everynode.dev/simulated"

	// AnnotationReady on a Node: "false" makes its Ready condition False
	// (reason KubeletNotReady); removing it makes the node Ready again.
	// On a Pod: "false" keeps the pod Running but never Ready.
	AnnotationReady = "sim.everynode.dev/ready"

	// AnnotationReadyAfter on a Pod: a duration (e.g. "5s") that replaces
	// Config.PodReadyDelay for that pod.
	AnnotationReadyAfter = "sim.everynode.dev/ready-after"

	// AnnotationPhase on a Pod: "Failed" or "Succeeded" ends the pod in that phase
	// once its ready delay has passed.
	AnnotationPhase = "sim.everynode.dev/phase"

	// AnnotationRestartEvery on a Pod: a duration (at least 1s); each run of the
	// pod's containers lasts that long, then they crash, restartCount grows by one
	// and the pod is not Ready until they restart: after a short recovery of
	// min(1s, interval/2) the first time, then after the node's crash-loop back-off
	// (Config.CrashLoopBackOff, doubling after each crash up to 5m), as the kubelet
	// restarts them.
	AnnotationRestartEvery = "sim.everynode.dev/restart-every"

	// AnnotationStopAfter on a Pod: a duration; how long its containers take to stop
	// once the pod is deleted (as a program that finishes its work after SIGTERM).
	// The pod goes after the shorter of this and its grace period, as a kubelet
	// kills what is still running when the grace ends. Without it the node's
	// --pod-stop-delay applies.
	AnnotationStopAfter = "sim.everynode.dev/stop-after"

	// AnnotationReadyRequires on a Node: a label selector; the node stays NotReady
	// (network not ready, as a kubelet whose CNI plugin has not started) until a pod
	// matching it is Running there. It replaces Config.NodeReadyRequires for that
	// node; "" requires nothing.
	AnnotationReadyRequires = "sim.everynode.dev/ready-requires"

	// AnnotationFail on a Pod: "[container=]Reason[,...]" plays a container failure
	// the kubelet reports by that reason: ErrImagePull (then ImagePullBackOff),
	// ImagePullBackOff, CreateContainerConfigError, InvalidImageName (the container
	// never starts; the pod stays Pending) or OOMKilled (the container is killed for
	// memory every restart-every, 2s by default). Without a container name the
	// failure is every app container's; a name may be an init container's.
	// On a Node, "Reason[,...]" (no container names) plays those failures in every
	// pod that has not started a container when it is set — a node that cannot
	// pull images, say.
	AnnotationFail = "sim.everynode.dev/fail"

	// AnnotationUnpullable on a Node: "image[,image...]", images the node cannot
	// pull. A container given one waits in ErrImagePull, then ImagePullBackOff: a
	// new pod's, or a running pod's whose image is changed to it in place.
	AnnotationUnpullable = "sim.everynode.dev/unpullable"

	// AnnotationKubelet on a Node: "stopped" plays a node whose kubelet is down (it
	// crashed, or the machine is off): its Lease is no longer renewed and nothing of
	// the node or its pods is written, so the node lifecycle controller marks it
	// Unknown and unreachable after its grace period, and pods deleted there stay
	// terminating. Removing it (or "running") starts the kubelet again, which
	// reports the node and finishes what its pods were doing.
	AnnotationKubelet = "sim.everynode.dev/kubelet"

	// AnnotationShutdown on a Node: "true" plays a graceful node shutdown as the
	// kubelet carries it out: the node reports NotReady ("node is shutting down"),
	// every running pod is stopped and ends Failed (reason Terminated) with a
	// DisruptionTarget condition (TerminationByKubelet), and a pod bound there
	// meanwhile is rejected (Failed, reason NodeShutdown). Removing it is the node
	// booting again: Ready, new pods started. The node maintenance conditions of
	// KEP-5683 (GracefulNodeShutdownInProgress, DrainInProgress,
	// MaintenanceInProgress) are set on the node's status by whoever runs the
	// maintenance; the simulator keeps them as they are.
	AnnotationShutdown = "sim.everynode.dev/shutdown"
)

// Names and values the simulator gives the objects it creates.
const (
	// NodeNamePrefix prefixes the names of the nodes the simulator registers.
	NodeNamePrefix = "sim-node-"
	// KubeletVersion is reported in every simulated node's nodeInfo.
	KubeletVersion = "v1.37.2"
	// LeaseNamespace holds the node heartbeat Leases.
	LeaseNamespace = "kube-node-lease"
	// LeaseDurationSeconds is the duration written into every node Lease, as the kubelet does.
	LeaseDurationSeconds = 40
	// KubeletPort is reported as the node's kubelet endpoint.
	KubeletPort = 10250
)

// leaseDuration is LeaseDurationSeconds as a duration.
const leaseDuration = LeaseDurationSeconds * time.Second
