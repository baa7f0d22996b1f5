package sandbox

import (
	"context"
	"fmt"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/nodesim"
	"github.com/everynode/everynode/internal/realnode"
)

// realNodes are the sandbox's running real nodes.
type realNodes struct {
	mu    sync.Mutex
	nodes []*realnode.Node
}

// start starts n real nodes, one after the other (each imports the images and starts
// a kubelet, which a 2-core machine does best in turn), and waits until they are
// Ready. It returns when a node fails to start; nodes that started keep running
// until stop.
func (r *realNodes) start(ctx context.Context, cfg Config, p paths, cr credentials) error {
	ca, err := os.ReadFile(cr.caFile)
	if err != nil {
		return err
	}
	archives, err := writeNodeImages(p, chartMode(cfg.Controller) != "")
	if err != nil {
		return err
	}
	for i := 1; i <= cfg.RealNodes; i++ {
		node, err := realnode.Start(ctx, realnode.Options{
			Index:     i,
			APIPort:   cfg.Port,
			CA:        ca,
			Token:     cr.token,
			Dir:       p.join("real-nodes", realnode.NodeName(i)),
			LogDir:    p.join("logs"),
			Images:    archives,
			ServiceIP: serviceIP,
		})
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.nodes = append(r.nodes, node)
		r.mu.Unlock()
	}
	return nil
}

// writeNodeImages builds the node images from the agent binary into the data dir
// and, with controller set, everynode's own image from the controller binary, tagged
// with the chart's appVersion, and returns the archives.
func writeNodeImages(p paths, controller bool) ([]string, error) {
	if err := os.MkdirAll(p.join("real-nodes"), 0o700); err != nil {
		return nil, err
	}
	agent, err := realnode.AgentBinary()
	if err != nil {
		return nil, err
	}
	archives := []string{p.join("real-nodes", "images.tar")}
	if err := writeArchive(archives[0], agent, realnode.AgentPath, realnode.Images()); err != nil {
		return nil, err
	}
	if !controller {
		return archives, nil
	}
	binary, err := realnode.ControllerBinary()
	if err != nil {
		return nil, err
	}
	c, err := loadChart()
	if err != nil {
		return nil, err
	}
	archives = append(archives, p.join("real-nodes", "everynode-image.tar"))
	image := realnode.ControllerImage(c.Metadata.AppVersion)
	if err := writeArchive(archives[1], binary, realnode.ControllerPath, []realnode.Image{image}); err != nil {
		return nil, err
	}
	return archives, nil
}

// writeArchive writes images over binary, at path in them, to the archive file.
func writeArchive(file, binary, path string, images []realnode.Image) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := realnode.WriteArchive(f, binary, path, images); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// watch turns a real node's unexpected exit into the sandbox's error.
func (r *realNodes) watch(ctx context.Context) error {
	r.mu.Lock()
	nodes := append([]*realnode.Node(nil), r.nodes...)
	r.mu.Unlock()
	cases := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			select {
			case <-n.Exited():
				// Stopping the sandbox with a signal to its process group reaches the
				// node's processes too: their exit then is no failure.
				if ctx.Err() != nil {
					cases <- nil
					return
				}
				cases <- n.ExitError()
			case <-ctx.Done():
				cases <- nil
			}
		}()
	}
	for range nodes {
		if err := <-cases; err != nil {
			return err
		}
	}
	return nil
}

// stop stops every real node and removes what it used on the host.
func (r *realNodes) stop(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes {
		n.Stop(ctx)
	}
	r.nodes = nil
}

// agentBuilt reports whether the agent binary the node images need was built.
func agentBuilt() error {
	_, err := realnode.AgentBinary()
	return err
}

// runRealNodes starts the real nodes asked for, waits until they are Ready, and then
// watches them. Without the host's prerequisites, it says what is missing through
// warn and leaves the sandbox to its simulated nodes.
func runRealNodes(ctx context.Context, cfg Config, p paths, cr credentials, client kubernetes.Interface, r *realNodes, warn func(error)) (int, error) {
	if cfg.RealNodes == 0 {
		return 0, nil
	}
	// Without the host's prerequisites the simulated nodes still run, unless the
	// controller itself is to run on a real node.
	for _, check := range []func() error{realnode.CheckHost, agentBuilt} {
		if err := check(); err != nil {
			if chartMode(cfg.Controller) != "" {
				return 0, fmt.Errorf("--controller %s: %w", cfg.Controller, err)
			}
			warn(err)
			return 0, nil
		}
	}
	// A node restarted on the same data dir is registered, and may still show Ready,
	// from before: it counts once its kubelet has reported since.
	started := metav1.Now().Rfc3339Copy()
	if err := r.start(ctx, cfg, p, cr); err != nil {
		return 0, fmt.Errorf("starting real nodes: %w", err)
	}
	fresh := func(node *v1.Node) bool {
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady && c.LastHeartbeatTime.Before(&started) {
				return false
			}
		}
		return nodesim.Usable(node)
	}
	// A node whose kubelet or containerd exits meanwhile ends the wait.
	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		if err := r.watch(waitCtx); err != nil {
			cancel(err)
		}
	}()
	if err := waitLabelledNodes(waitCtx, client, realnode.LabelReal+"=true", cfg.RealNodes, fresh); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if cause := context.Cause(waitCtx); cause != nil && cause != context.Canceled {
			return 0, cause
		}
		return 0, fmt.Errorf("the %d real nodes did not all turn Ready within %s; see their logs in %s", cfg.RealNodes, nodesReadyTimeout, p.join("logs"))
	}
	klog.FromContext(ctx).V(1).Info("Real nodes Ready", "nodes", cfg.RealNodes)
	return cfg.RealNodes, nil
}
