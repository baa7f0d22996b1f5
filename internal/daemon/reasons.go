package daemon

// Reason is a machine-readable cause. Every reason the core gives is defined here,
// once, with what people are told of it: the same words appear in pod writes,
// events, the Progressing condition, `everynode explain`, `rollout status` and
// `rollout plan`, the dashboard and the metrics.
type Reason string

// Reasons a node is, or is not, eligible for a DaemonSet's pod (eligibility.go).
const (
	ReasonEligible             Reason = "Eligible"
	ReasonNodeNameMismatch     Reason = "NodeNameMismatch"
	ReasonNodeSelectorMismatch Reason = "NodeSelectorMismatch"
	ReasonNodeAffinityMismatch Reason = "NodeAffinityMismatch"
	// ReasonUntoleratedTaint: an untolerated NoSchedule taint. No new pod is placed,
	// but a pod that already runs may stay.
	ReasonUntoleratedTaint Reason = "UntoleratedTaint"
	// ReasonUntoleratedNoExecute: an untolerated NoExecute taint. No pod may run.
	ReasonUntoleratedNoExecute Reason = "UntoleratedNoExecuteTaint"
)

// Reasons for pod creates, deletes and in-place updates.
const (
	ReasonMissingPod   Reason = "MissingPod"   // an eligible node without a pod
	ReasonFailedPod    Reason = "FailedPod"    // the pod failed
	ReasonSucceededPod Reason = "SucceededPod" // the pod exited
	ReasonExcessPod    Reason = "ExcessPod"    // more pods on the node than allowed
	ReasonNodeGone     Reason = "NodeGone"     // never scheduled, and its node no longer exists
	ReasonUpdate       Reason = "RollingUpdate"
	ReasonSurge        Reason = "RollingUpdateSurge"
	ReasonSurgeDone    Reason = "SurgeReplaced" // the new pod on the node is available
	// ReasonSurgeDeleteFirst: the old pod is deleted before its replacement runs,
	// under surge-fallback: delete-first (hostport.go).
	ReasonSurgeDeleteFirst Reason = "SurgeFallbackDeleteFirst"
	ReasonInPlaceUpdate    Reason = "InPlaceUpdate" // an old pod updated in place (inplace.go)
)

// Reasons a node waits: the update does not touch it yet, or its new pod is not
// done. They are also the Progressing condition's reasons for a rollout held so.
const (
	ReasonBudgetFull        Reason = "BudgetFull"          // maxUnavailable or maxSurge is used up
	ReasonNewPodUnavailable Reason = "NewPodNotAvailable"  // the node's new pod is not available yet
	ReasonInPlaceUpdating   Reason = "InPlaceUpdating"     // the node's pod, updated in place, has not restarted yet
	ReasonResizePending     Reason = "ResizePending"       // the kubelet holds back the resize of the node's pod (resize.go)
	ReasonNewPodBaking      Reason = "NewPodBaking"        // the node's new pod has not been healthy for min-healthy yet
	ReasonPaused            Reason = "Paused"              // rollout.everynode.dev/paused
	ReasonPartitionHeld     Reason = "PartitionHeld"       // rollout.everynode.dev/partition
	ReasonCanaryHeld        Reason = "WaitingForPromotion" // rollout.everynode.dev/canary
	ReasonLaterWave         Reason = "LaterWave"           // another wave is updating first
	ReasonWavePause         Reason = "WaitingForWave"      // bake time between waves
	ReasonInvalidAnnotation Reason = "InvalidAnnotation"   // a rollout annotation does not parse
	ReasonFailedPodBackoff  Reason = "FailedPodBackoff"    // the node's failed pod is backing off
	// ReasonSurgeHostPort: the node's surge pod cannot be scheduled, for a host port
	// the old pod holds (hostport.go).
	ReasonSurgeHostPort Reason = "SurgeHostPortConflict"
	// What makes a node sick (sicknodes.go); under sick-nodes: exempt the node waits
	// for it to pass.
	ReasonNodeNotReady     Reason = "NodeNotReady"     // Ready False or Unknown, or unreachable
	ReasonNodeShuttingDown Reason = "NodeShuttingDown" // a graceful shutdown, or out of service
	ReasonNodeMaintenance  Reason = "NodeMaintenance"  // DrainInProgress or MaintenanceInProgress
	// ReasonTooManySickNodes: more than half of the nodes are sick; the rollout holds.
	ReasonTooManySickNodes Reason = "TooManySickNodes"
	// ReasonSickNodesLeft: every node left on an older revision is sick.
	ReasonSickNodesLeft Reason = "WaitingForSickNodes"
)

// Reasons a rollout fails (failure.go).
const (
	ReasonProgressDeadlineExceeded Reason = "ProgressDeadlineExceeded"
	ReasonRestartLimitExceeded     Reason = "PodRestartLimitExceeded"
	// ReasonContainerFailing: a pod of the new revision has a container the kubelet
	// reports as failing (crash-looping, an image it cannot pull, a config it cannot
	// build, killed for memory).
	ReasonContainerFailing Reason = "PodContainerFailing"
	// ReasonRollbackFailed: the revision a rollback restored failed too. The rollout
	// holds there rather than roll back again.
	ReasonRollbackFailed Reason = "RollbackFailed"
)

// Reasons of the Progressing condition, besides the waits and failures.
const (
	ReasonRollingOut           Reason = "RollingOut"
	ReasonNewRevisionAvailable Reason = "NewRevisionAvailable"
	ReasonRolledBack           Reason = "RolledBack"
)

// WaitKind groups what nodes wait for by what ends the wait.
type WaitKind int

const (
	WaitNone     WaitKind = iota
	WaitUpdating          // the node's new pod is on its way: time ends it
	WaitHeld              // a hold of the policy or the budget: its turn, or a fix, ends it
	WaitFailed            // a pod or the rollout failed: the back-off, or a fix, ends it
)

// ReasonInfo is what people are told of a reason a node waits for.
type ReasonInfo struct {
	Reason Reason
	// Short is a word or two, for the dashboard's grid.
	Short string
	// Waiting completes "the node waits for ...".
	Waiting string
	Kind    WaitKind
	// Rank orders waits by how much each says of why a rollout does not move, the
	// most first: a hold only a fix ends, then new pods coming up and baking, then
	// the other holds, then the budget.
	Rank int
}

// waitRow is one row of the table of waits.
type waitRow struct {
	reason  Reason
	short   string
	waiting string
	kind    WaitKind
}

// waitReasons is the table of what nodes wait for, in Rank order.
var waitReasons = [...]waitRow{
	{ReasonInvalidAnnotation, "invalid annotation", "a rollout annotation to be fixed", WaitHeld},
	{ReasonProgressDeadlineExceeded, "deadline", failedRolloutWait(ReasonProgressDeadlineExceeded), WaitFailed},
	{ReasonRestartLimitExceeded, "restarts", failedRolloutWait(ReasonRestartLimitExceeded), WaitFailed},
	{ReasonContainerFailing, "failing", failedRolloutWait(ReasonContainerFailing), WaitFailed},
	{ReasonResizePending, "resize pending", "the kubelet to resize its pod, updated in place, which it holds back (PodResizePending: Deferred until the node has room, Infeasible if it never will)", WaitUpdating},
	{ReasonNewPodUnavailable, "starting", "its new pod to become available", WaitUpdating},
	{ReasonNewPodBaking, "bake", "its new pod to stay Ready, with no restart, for " + AnnotationMinHealthy, WaitUpdating},
	{ReasonPaused, "paused", "the rollout is paused (" + AnnotationPaused + ")", WaitHeld},
	{ReasonTooManySickNodes, "sick nodes", "fewer sick nodes: more than half of the nodes are sick, and the rollout holds (" + AnnotationSickNodes + ": " + SickNodesExempt + ")", WaitHeld},
	{ReasonWavePause, "wave pause", "the pause between waves to end (" + AnnotationWavePause + ")", WaitHeld},
	{ReasonCanaryHeld, "canary", "promotion: it is not a canary node (" + AnnotationCanary + ")", WaitHeld},
	{ReasonPartitionHeld, "partition", "the partition to be lowered (" + AnnotationPartition + ")", WaitHeld},
	{ReasonSurgeHostPort, "host port", "a host port its old pod holds: the surge pod cannot be scheduled (" + AnnotationSurgeFallback + ": " + SurgeDeleteFirst + " replaces the old pod first)", WaitHeld},
	{ReasonFailedPodBackoff, "back-off", "the back-off after its pod failed", WaitFailed},
	{ReasonNodeShuttingDown, "shutting down", "the node to come back: it is shutting down, and its pod is left alone until then", WaitHeld},
	{ReasonNodeMaintenance, "maintenance", "the node's maintenance to end (DrainInProgress or MaintenanceInProgress): its pod is left alone (" + AnnotationSickNodes + ": " + SickNodesExempt + ")", WaitHeld},
	{ReasonNodeNotReady, "node not ready", "the node to be Ready again: its pod is left alone (" + AnnotationSickNodes + ": " + SickNodesExempt + ")", WaitHeld},
	{ReasonBudgetFull, "budget", "its turn: maxUnavailable/maxSurge is used up by other nodes", WaitHeld},
	{ReasonLaterWave, "wave", "an earlier wave to finish (" + AnnotationWaves + ")", WaitHeld},
	{ReasonInPlaceUpdating, "in place", "its pod, updated in place, to restart with the new images (or report its new CPU and memory) and become available", WaitUpdating},
}

func failedRolloutWait(r Reason) string {
	return "the failed rollout to be resumed or the template changed (" + string(r) + ")"
}

// DescribeWait is what people are told of a reason a node waits for; a reason not
// in the table is told as its name, ranked last.
func DescribeWait(r Reason) ReasonInfo {
	for i, row := range waitReasons {
		if row.reason == r {
			return ReasonInfo{Reason: r, Short: row.short, Waiting: row.waiting, Kind: row.kind, Rank: i}
		}
	}
	return ReasonInfo{Reason: r, Waiting: string(r), Rank: len(waitReasons)}
}

// WaitReasons lists every reason a node may wait for, in Rank order.
func WaitReasons() []Reason {
	out := make([]Reason, len(waitReasons))
	for i, row := range waitReasons {
		out[i] = row.reason
	}
	return out
}
