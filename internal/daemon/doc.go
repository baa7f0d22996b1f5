// Package daemon is everynode's decision core.
//
// It owns every decision the DaemonSet controller makes and nothing else: given a
// read-only Snapshot of one DaemonSet (its nodes, pods, revisions, in-flight writes and
// failed-pod backoff, and the current time), Decide returns a Plan — the pods to adopt,
// release, create and delete, the revisions to write, the status to store, the events to
// record and when to look again.
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
