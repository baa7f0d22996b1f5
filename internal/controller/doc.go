// Package controller runs everynode's DaemonSet controller against a Kubernetes API.
//
// It owns the wiring and every write, and decides nothing: informers feed event
// handlers, handlers enqueue DaemonSet keys, a worker turns a key into a
// daemon.Snapshot read from the caches, daemon.Decide turns that into a daemon.Plan,
// and apply executes the Plan. apply is the only code that writes to the API: it
// queues a Plan's pod creates and deletes in one queue shared by every DaemonSet
// (writeQueue), which a fixed set of dispatchers sends in rank order
// (WriteRank: priority, then pods that unblock not-ready nodes, DaemonSets in
// turn), each taking a client rate limiter token before it picks the next write.
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
//   - Node events wake only the DaemonSets whose verdict for that node changes.
package controller
