// Package sandbox runs a real Kubernetes control plane on loopback with simulated
// nodes, so everynode can be watched and tested without a cluster.
//
// It owns the sandbox's data directory and its processes: embedded etcd (in this
// process), kube-apiserver, kube-scheduler and kube-controller-manager (each a child
// process of this binary, re-executed through its hidden "component" command, so that
// each keeps its own flags, signal handling and global registries), the node
// simulator and the DaemonSet controller chosen by Config.Controller.
//
// Promises:
//   - Everything listens on 127.0.0.1 only; the API server takes a bearer token and
//     refuses anonymous requests.
//   - One sandbox per data directory at a time (a lock file), and restarting on the
//     same directory keeps the cluster's state.
//   - The admin kubeconfig is written once the API answers, and Run returns only after
//     every child process has exited.
package sandbox
