// Package daemon is everynode's decision core.
//
// It owns every decision the DaemonSet controller makes and nothing else: given a
// read-only Snapshot of one DaemonSet (its nodes, pods, revisions, in-flight writes and
// failed-pod backoff, and the current time), Decide returns a Plan — the pods to adopt,
// release, create, delete and update in place, the revisions to write, the status to
// store, the events to record and when to look again.
//
// A decision runs in stages, each in its own file, each reading what the one before
// it left:
//
//	decide.go     the entry points (Decide, DecideWith, DecideUpdate) and ownership:
//	              which pods and revisions are the DaemonSet's
//	history.go    its revisions: the current template's, and which old ones go
//	placement.go  placement: which pods must exist where, and the status counters.
//	              Its answer, a Placement, is read-only; it never reads the rollout
//	              policy (eligibility.go decides each node, pods.go says what a pod is)
//	update.go     update: which pods of older revisions go, when, and what each node
//	              waits for — an ordered chain: joining nodes and surge pairs, then the
//	              budget, the holds (holds.go, failure.go), the replacement of old pods
//	              (replace.go, inplace.go, hostport.go) and the conclusion (conclude.go:
//	              revision marks, rollback, the status and its Progressing condition,
//	              stored as conditions.go says)
//
// Full mode (Decide) runs every stage. Companion mode (DecideUpdate) runs the update
// stage alone over the placement another controller keeps (see CompanionManages).
// DecideWith repeats placement from a Memo (memo.go) when only nodes and pods
// changed. Explain (explain.go) runs the same stages and reports them per node.
// Every reason a decision gives is defined once, in reasons.go, with what people are
// told of it; policy.go parses the rollout annotations.
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
