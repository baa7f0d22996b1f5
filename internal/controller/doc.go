// Package controller runs everynode's DaemonSet controller against a Kubernetes API.
//
// It owns the wiring and every write, and decides nothing. One DaemonSet's sync is:
//
//	handlers.go     informer events → DaemonSet keys on the workqueue (node events
//	                wake only the DaemonSets whose verdict for the node changes)
//	sync.go         key → gather.Snapshot from the caches (podindex.go, podcache.go,
//	                nodelist.go: slim pods, another controller's as metadata) →
//	                daemon.DecideWith (full mode, with the DaemonSet's Memo) or
//	                daemon.DecideUpdate (companion mode) → apply
//	apply*.go       the writer: the only code that writes to the API. Ownership,
//	                revisions, pod creates and deletes, in-place updates, rollout
//	                marks, status and events, in the Plan's order
//	writequeue.go   pod creates and deletes wait in one queue shared by every
//	dispatch.go     DaemonSet, sent by a fixed set of dispatchers in rank order
//	writeorder.go   (priority, then pods that unblock not-ready nodes, DaemonSets in
//	                turn), each taking a client rate-limiter token first
//
// What the controller keeps of a DaemonSet between its syncs is one dsState
// (state.go): its writes in flight (inflight.go), failed-pod back-off (backoff.go),
// parsed placement rules (eligibility_cache.go), Memo (memos.go), last sync
// (batch.go), status pace (status_pace.go) and last own write (written.go). It is
// made with its first entry and forgotten in one place, Controller.forget, with the
// DaemonSet's queued writes and metrics.
//
// Events go out as kube-controller-manager's do, through client-go's broadcaster
// and its correlation rules, sent by event_sink.go and correlated by
// event_correlate.go, which works out a repeated event's patch only when the spam
// filter lets it through.
//
// Around the sync: leadership and the write fence (leader.go, fence.go: no write
// unless this replica surely leads), another DaemonSet controller noticed and stood
// down from (probe.go, foreign.go, standdown.go), metrics and the health server
// (metrics.go, server.go, metricsauth.go), and the typed configuration of `everynode
// controller` (config.go, client.go, timeout.go).
//
// Promises:
//   - One DaemonSet is synced by at most one worker at a time (the workqueue's
//     guarantee), so its in-flight writes are tracked without races.
//   - A pod is never created for a node while an earlier create for that node has not
//     been observed, and never deleted twice; every delete carries the pod's UID as a
//     precondition.
//   - Transient API errors are returned to the queue, which retries with backoff;
//     NotFound on a delete means done. A pod write's error requeues its DaemonSet
//     with backoff and is returned by its next sync; it holds up no other DaemonSet.
//   - A queued write is in flight from the moment it is queued; a create for a node
//     without a pod that a newer Plan no longer asks for is dropped unsent.
//   - Nothing of a deleted DaemonSet is kept.
package controller
