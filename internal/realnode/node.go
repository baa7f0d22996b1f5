package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/component"
)

// Options configure a real node.
type Options struct {
	// Index numbers the node from 1; it is named real-node-<Index>.
	Index int
	// APIPort is the API server's port on 127.0.0.1.
	APIPort int
	// CA is the API server's CA certificate (PEM); Token the credential the kubelet
	// uses.
	CA    []byte
	Token string
	// Dir holds the node's files; LogDir its logs (<name>-containerd.log, ...).
	Dir    string
	LogDir string
	// Images are the image archives to import (see WriteArchive).
	Images []string
	// ServiceIP is the kubernetes Service's cluster IP, where pods reach the API
	// server (their KUBERNETES_SERVICE_HOST); "" for none.
	ServiceIP string
}

// Node is a running real node: a containerd and a kubelet.
type Node struct {
	Name string

	opts       Options
	index      int
	link       link
	fwd        *forwarder
	serviceFwd *forwarder
	containerd *component.Child
	kubelet    *component.Child
	exited     chan struct{}
}

// NodeName is the name of the index-th real node.
func NodeName(index int) string { return "real-node-" + strconv.Itoa(index) }

// Start starts a real node: its network, containerd with the node images, and a
// kubelet that registers the node with the API server. What a node of the same name
// left behind (a sandbox that was killed) is removed first. On failure, everything
// started is stopped.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if opts.Index < 1 || opts.Index > MaxNodes {
		return nil, fmt.Errorf("a sandbox has at most %d real nodes", MaxNodes)
	}
	n = &Node{Name: NodeName(opts.Index), opts: opts, index: opts.Index, link: nodeLink(opts.APIPort, opts.Index), exited: make(chan struct{})}
	n.cleanUp(ctx)
	defer func() {
		if err != nil {
			n.Stop(ctx)
		}
	}()
	for _, dir := range []string{n.path(), opts.LogDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := n.link.up(); err != nil {
		return nil, fmt.Errorf("%s's network: %w", n.Name, err)
	}
	n.fwd, err = forward(net.JoinHostPort(n.link.HostIP.String(), strconv.Itoa(opts.APIPort)), net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.APIPort)))
	if err != nil {
		return nil, fmt.Errorf("%s: forwarding the API server: %w", n.Name, err)
	}
	if opts.ServiceIP != "" {
		if err := n.serveService(); err != nil {
			return nil, fmt.Errorf("%s: serving the kubernetes Service: %w", n.Name, err)
		}
	}
	for _, sub := range []string{"runtime", "kubelet"} {
		if err := createCgroup(n.cgroup(sub)); err != nil {
			return nil, err
		}
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	for _, archive := range opts.Images {
		if err := n.importImages(ctx, archive); err != nil {
			return nil, err
		}
	}
	if err := n.startKubelet(ctx); err != nil {
		return nil, err
	}
	go func() {
		select {
		case <-n.containerd.Exited():
		case <-n.kubelet.Exited():
		}
		close(n.exited)
	}()
	klog.FromContext(ctx).V(1).Info("Real node started", "node", n.Name, "ip", n.link.NodeIP, "containerdPid", n.containerd.Pid(), "kubeletPid", n.kubelet.Pid())
	return n, nil
}

// serveService makes the kubernetes Service's cluster IP an address of the node, on
// its loopback, where a forwarder passes port 443 to the API server: there is no
// kube-proxy, and pods reach it through their default route to the node.
func (n *Node) serveService() error {
	if err := ip("-n", n.link.Namespace, "addr", "add", n.opts.ServiceIP+"/32", "dev", "lo"); err != nil {
		return err
	}
	ln, err := listenIn(n.link.NamespacePath(), net.JoinHostPort(n.opts.ServiceIP, "443"))
	if err != nil {
		return err
	}
	n.serviceFwd = forwardFrom(ln, net.JoinHostPort("127.0.0.1", strconv.Itoa(n.opts.APIPort)))
	return nil
}

// Exited is closed when the node's containerd or kubelet has exited.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// ExitError says which of the node's processes exited, and how; call it once Exited
// is closed.
func (n *Node) ExitError() error {
	for _, c := range []*component.Child{n.containerd, n.kubelet} {
		select {
		case <-c.Exited():
			return fmt.Errorf("%s exited (%v); see %s", c.Name, c.Err(), n.opts.LogDir)
		default:
		}
	}
	return nil
}

// Stop stops the node: the kubelet first, then every container, shim and containerd
// (each killed, as a power cut would), then its cgroups and network. The Node object
// stays in the API, NotReady until the node starts again.
func (n *Node) Stop(ctx context.Context) {
	if n.kubelet != nil {
		component.StopAll([]*component.Child{n.kubelet}, 5*time.Second)
	}
	for _, f := range []*forwarder{n.fwd, n.serviceFwd} {
		if f != nil {
			_ = f.Close()
		}
	}
	n.cleanUp(ctx)
	if n.containerd != nil {
		<-n.containerd.Exited()
	}
}

// cleanUp kills whatever runs in the node's cgroups and removes them and its network.
func (n *Node) cleanUp(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if err := removeCgroup(ctx, n.cgroup("")); err != nil {
		logger.Error(err, "Stopping a real node", "node", n.Name)
	}
	n.link.down()
}

// cgroup is the path of the node's cgroup sub (or the node's own, for "") from each
// hierarchy's root.
func (n *Node) cgroup(sub string) string {
	return filepath.Join("/everynode", strconv.Itoa(n.opts.APIPort), n.Name, sub)
}

// path is a file of the node under its directory.
func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.opts.Dir}, elem...)...)
}

// log is the log file of one of the node's processes.
func (n *Node) log(process string) string {
	return filepath.Join(n.opts.LogDir, n.Name+"-"+process+".log")
}
