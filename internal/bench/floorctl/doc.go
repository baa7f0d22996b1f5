// Package floorctl is the benchmark's floor for node changes: a minimal DaemonSet
// controller that does only the work no DaemonSet controller can avoid. It watches
// what everynode watches (DaemonSets, ControllerRevisions, pods, nodes), decides per
// node with the core's eligibility rules (internal/daemon), and creates and deletes
// pods; it writes no status, no revisions and no events, and knows no rollout.
//
// It is not a controller for clusters: `everynode bench` runs it, in a process of its
// own, as the third column of the churn scenario, so that everynode's latency and CPU
// per node change can be set against what the unavoidable work costs.
package floorctl
