package daemon

import (
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Snapshot is everything Decide may look at for one DaemonSet. The controller builds it
// from its informer caches; nothing in it is modified.
type Snapshot struct {
	DaemonSet *apps.DaemonSet
	// Nodes are all the cluster's nodes, in any order.
	Nodes []*v1.Node
	// Pods are the pods that may belong to the DaemonSet: those it controls and the
	// orphans in its namespace. Others are ignored.
	Pods []*v1.Pod
	// Revisions are the ControllerRevisions of the DaemonSet's namespace.
	Revisions []*apps.ControllerRevision
	// Policy is the DaemonSet's rollout annotations, parsed once for the decision
	// (internal/gather does); nil means Decide parses them.
	Policy *Policy
	// InFlight are the controller's writes that the caches have not shown yet.
	InFlight InFlight
	// Backoff maps a node to the time until which a failed pod there is left alone.
	Backoff map[string]time.Time
	// Failures maps a node to how many of the DaemonSet's pods failed there, at this
	// generation, as far as the controller knows: a pod created there records it
	// (AnnotationFailedBefore).
	Failures map[string]int
	// Now is the time the decision is made at.
	Now time.Time
	// InPlaceRefused are pods whose in-place update the API server rejected: they are
	// replaced instead.
	InPlaceRefused map[types.UID]bool
	// MaxCreates and MaxDeletes cap the pod creates and deletes of one Plan; zero
	// means no cap.
	MaxCreates, MaxDeletes int
	// Eligibility is the DaemonSet template's parsed placement rules, when the
	// caller caches them; nil means Decide parses them.
	Eligibility *Eligibility
	// At is where the caller's caches stood when Nodes and Pods were read, in its
	// own count of their changes; zero when it keeps no count. A Memo remembers it.
	At Position
	// Changes, when set, are the nodes and pods that may differ from those of the
	// caller's earlier snapshot at Changes.From: a Memo made or last used at From
	// looks at these alone instead of comparing every node and pod. The Plan is the
	// same either way.
	Changes *Changes
}

// Position is a point in a caller's count of the changes to its caches: of the
// nodes, and of the pods a DaemonSet's snapshot holds.
type Position struct{ Nodes, Pods uint64 }

// Changes are the nodes and pods that changed between two snapshots.
type Changes struct {
	// From is the earlier snapshot's At.
	From Position
	// Nodes holds every node added, changed or deleted since From, by name, as it is
	// now (nil: deleted).
	Nodes map[string]*v1.Node
	// Pods holds every pod of the snapshot's Pods added, changed or gone since From,
	// by UID, as it is now (nil: gone).
	Pods map[types.UID]*v1.Pod
}

// InFlight are pod writes the controller made that its cache has not observed yet.
type InFlight struct {
	// Creates holds the nodes for which a pod was created but not yet seen.
	Creates map[string]bool
	// Deletes holds the UIDs of pods deleted but still seen.
	Deletes map[types.UID]bool
	// Updates holds the UIDs of pods updated in place but still seen as before.
	Updates map[types.UID]bool

	// At numbers these writes for a caller that keeps track of how they change
	// (0: not numbered), and Changes, when set, names what may differ from the
	// writes numbered Changes.Since: a Memo that decided with those looks at the
	// named nodes and pods alone instead of comparing every write in flight.
	At      uint64
	Changes *InFlightChanges
}

// InFlightChanges names the nodes whose create and the pods whose delete may have
// started or ended since an earlier InFlight. It may name more than changed, never
// fewer.
type InFlightChanges struct {
	Since   uint64 // the earlier InFlight's At
	Creates []string
	Deletes []types.UID
}

// Empty reports whether no write is outstanding.
func (f InFlight) Empty() bool {
	return len(f.Creates) == 0 && len(f.Deletes) == 0 && len(f.Updates) == 0
}

// Plan is what the controller must do for one DaemonSet, in the order the fields are
// listed. A zero Plan does nothing.
type Plan struct {
	// Adopt and Release change the ControllerRef of pods and revisions. Adoption is
	// done only after a fresh read confirms the DaemonSet is not being deleted.
	Adopt            []*v1.Pod
	Release          []*v1.Pod
	AdoptRevisions   []*apps.ControllerRevision
	ReleaseRevisions []*apps.ControllerRevision

	// LabelRevisions are revisions given their missing hash label (updated copies).
	LabelRevisions []*apps.ControllerRevision
	// CreateRevision records the current template, when no revision does yet.
	CreateRevision *apps.ControllerRevision
	// RenumberRevision is the current revision raised to the newest number.
	RenumberRevision *apps.ControllerRevision
	// Relabel are pods of duplicate revisions, to be labelled with Hash; then
	// DedupRevisions, the duplicates, are deleted.
	Relabel        []*v1.Pod
	DedupRevisions []*apps.ControllerRevision

	// Hash labels the current revision and every pod created from it.
	Hash string
	// Template is what new pods are made from (see PodForNode); set with Creates.
	Template *v1.PodTemplateSpec
	// Deletes and Creates are the pod changes, in a deterministic order.
	Deletes []PodDelete
	Creates []PodCreate
	// Updates are old pods to change in place into pods of the current revision
	// (rollout.everynode.dev/in-place), in a deterministic order.
	Updates []PodUpdate
	// FailedPodNodes are the nodes whose failed pods are deleted in this Plan: their
	// backoff grows.
	FailedPodNodes []string

	// MarkRevisions are annotations to set on revisions, or remove (MarkAvailable,
	// MarkFailed, MarkRestored).
	MarkRevisions []RevisionMark
	// Rollback, when set, is the revision whose template is to be restored on the
	// DaemonSet, as `kubectl rollout undo` does: its Data is the patch to apply.
	Rollback *apps.ControllerRevision

	// PruneRevisions are old revisions beyond the history limit.
	PruneRevisions []*apps.ControllerRevision
	// Status is the status to store, or nil when it is unchanged.
	Status *apps.DaemonSetStatus
	// Conditions, set only by DecideUpdate (companion mode), are the rollout's
	// conditions (Progressing, Reconciling, Stalled; see conditions.go) to store on
	// their own — the other controller keeps the rest of the status — or nil when
	// they are unchanged.
	Conditions []apps.DaemonSetCondition
	// Events are to be recorded on the DaemonSet.
	Events []Event
	// RequeueAfter, when positive, asks for another look after that long even if
	// nothing changes.
	RequeueAfter time.Duration
	// Waiting counts the nodes that wait for something, by what they wait for (the
	// NodeReport's Waiting); nil when none does.
	Waiting map[Reason]int
	// Unavailable counts the nodes that should run the pod and have no available
	// one, by cause (causes.go), most first; nil when there are none. Not computed
	// when the DaemonSet is being deleted or its spec cannot be used.
	Unavailable []CauseCount
}

// PodCreate asks for a daemon pod on Node.
type PodCreate struct {
	Node   string
	Reason Reason
	// Template, when set, is an older revision's template to use instead of the
	// Plan's (a node that joins mid-rollout, under new-nodes: stable).
	Template *v1.PodTemplateSpec
	// FailedBefore is how many pods failed on the node before this one (see
	// AnnotationFailedBefore).
	FailedBefore int
}

// RevisionMark is one annotation to set on a revision, or to remove from it.
type RevisionMark struct {
	Revision   *apps.ControllerRevision
	Key, Value string
	Remove     bool
}

// PodDelete asks for Pod to be deleted (with its UID as precondition).
type PodDelete struct {
	Pod    *v1.Pod
	Reason Reason
}

// Event is an event to record on the DaemonSet.
type Event struct {
	Type    string // v1.EventTypeNormal or v1.EventTypeWarning
	Reason  string
	Message string
}

// Event reasons, as kube-controller-manager records them.
const (
	EventSelectingAll       = "SelectingAll"
	EventFailedDaemonPod    = "FailedDaemonPod"
	EventSucceededDaemonPod = "SucceededDaemonPod"
	EventSuccessfulCreate   = "SuccessfulCreate"
	EventFailedCreate       = "FailedCreate"
	EventSuccessfulDelete   = "SuccessfulDelete"
	EventFailedDelete       = "FailedDelete"
	// EventInPlaceUpdate and EventFailedInPlaceUpdate are everynode's: a pod updated
	// in place (inplace.go), or not.
	EventInPlaceUpdate       = "SuccessfulInPlaceUpdate"
	EventFailedInPlaceUpdate = "FailedInPlaceUpdate"
	// EventInvalidSpec is everynode's: a spec value the controller cannot act on.
	EventInvalidSpec = "InvalidSpec"
)

// Writes counts the API writes the Plan asks for.
func (p *Plan) Writes() int {
	n := len(p.Adopt) + len(p.Release) + len(p.AdoptRevisions) + len(p.ReleaseRevisions) +
		len(p.LabelRevisions) + len(p.Relabel) + len(p.DedupRevisions) +
		len(p.Deletes) + len(p.Creates) + len(p.Updates) + len(p.PruneRevisions) + len(p.MarkRevisions)
	for _, w := range []bool{p.CreateRevision != nil, p.RenumberRevision != nil, p.Status != nil, len(p.Conditions) > 0, p.Rollback != nil} {
		if w {
			n++
		}
	}
	return n
}
