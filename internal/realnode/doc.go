// Package realnode runs the sandbox's real nodes: each a kubelet (this binary's
// kubelet component, k8s.io/kubernetes at the version go.mod names) and a containerd
// from the host, in a network namespace of its own joined to the host by a veth pair,
// with its processes in cgroups of its own and its mounts in a private mount
// namespace, so that stopping a node leaves no process, mount or namespace behind.
//
// A real node's layout, for node i of the sandbox on port P:
//
//	network namespace  everynode-P-real-node-i, veth enPhi (host) <-> enPni (node),
//	                   a /30 from 100.64.0.0/10 picked from P and i
//	cgroups            /everynode/P/real-node-i/{runtime,kubelet,kubepods} in every
//	                   cgroup v1 hierarchy
//	mounts             a private mount namespace shared by containerd and kubelet, with
//	                   its own tmpfs on /run (containerd's state, the pods' network
//	                   namespaces, kubelet's root directory, pod IP allocations)
//	files              <data dir>/real-nodes/real-node-i/ (containerd's images and
//	                   content, pod logs, configuration) and the node's log files
//
// The API server, which listens on 127.0.0.1 only, is reachable from a node through a
// forwarder on the host's end of its veth. Images come from an archive built offline
// from the everynode-agent binary (images.go) and imported into each containerd.
package realnode
