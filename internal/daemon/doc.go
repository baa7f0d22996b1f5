// Package daemon is everynode's decision core.
//
// It owns every decision the DaemonSet controller makes and nothing else: given a
// read-only Snapshot of one DaemonSet (its nodes, pods, revisions, in-flight writes and
// failed-pod backoff, and the current time), Decide returns a Plan — the pods to adopt,
// release, create and delete, the revisions to write, the status to store, the events to
// record and when to look again.
//
// A decision has two stages, each its own function over the same view of the
// DaemonSet: placement (place: which pods must exist where, and the status counters)
// and update (update: which pods of older revisions go, when, and what each node
// waits for — the budget and the rollout policy). Decide runs both (full mode).
// DecideUpdate runs the update stage alone over the placement another controller
// keeps (companion mode, see CompanionManages).
//
// Promises:
//   - Everything here is a pure function of its inputs: no API calls, no clock, no
//     randomness, no logging. The same Snapshot always yields the same Plan.
//   - Inputs are never modified; objects in a Plan that are to be written are copies.
//   - Verdicts carry reasons. The Reason constants are the vocabulary shared by events,
//     status conditions and explanations.
//
// The controller package executes Plans; nothing in this package writes.
package daemon
