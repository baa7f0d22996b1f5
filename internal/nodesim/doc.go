// Package nodesim is the simulated kubelet of everynode's sandbox.
//
// It owns every Node labelled sim.everynode.dev/simulated=true and the pods bound to
// them, and nothing else: other nodes and their pods are never read for decisions or
// written.
//
// Promises:
//   - At start it registers sim-node-0 … sim-node-<Nodes-1> unless they exist. Nodes
//     users create with the label are adopted: missing status fields get the same
//     defaults, and a node without a pod range gets one. A node deleted later is not
//     re-registered.
//   - Every simulated node holds a Lease in kube-node-lease, renewed about every
//     LeaseInterval. Renewals are spread over the interval by a stable per-node phase
//     and done by a bounded worker pool, so thousands of nodes cost a steady trickle
//     of writes rather than bursts.
//   - A node's Ready condition follows its sim.everynode.dev/ready annotation; node
//     status is written only when it changes.
//   - Pod behaviour is data: the annotations on a pod (see the Annotation* constants)
//     are parsed once into a Behaviour, and decidePod, a pure function of the pod,
//     its Behaviour, the node and the time, returns the status to write, whether to
//     delete, and when to look again. An invalid annotation is logged once and
//     treated as absent.
//   - A pod in phase Failed or Succeeded is never written again, whoever set it.
//   - A pod being deleted is removed (grace period 0, UID precondition) after the
//     shorter of its grace period and PodStopDelay.
//   - Pod IPs are unique among the live pods of a node and come from the node's
//     spec.podCIDR; hostNetwork pods get the node's InternalIP.
//
// Timing starts at a pod's status.startTime, which the simulator sets (rounded up to
// a whole second, the API's resolution) when it first sees the pod, so a restart of
// the simulator resumes each pod where its stored status says it is.
//
// Load: each node costs one Lease update per LeaseInterval, and each pod two or
// three status writes over its life (one fewer with no ready delay, which it
// starts Running; plus two per crash under restart-every), so
// the client given to New needs a rate limit to match (5,000 nodes renew 500
// leases a second at the default interval); client-go's default of 5 QPS is far
// too low.
//
// Logging: node status writes at V(2), pod status writes and deletes at V(4) (one
// line per write, with the phase, readiness and restart count), lease renewals at
// V(5). Invalid annotations are logged once at V(0).
package nodesim
