package bench

import (
	"context"
	"path/filepath"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/everynode/everynode/internal/controller"
)

// The node gate in the burst: the DaemonSet burstGating gates new nodes on
// burstGateKey (everynode.dev/node-gate), and every burst node joins with that
// taint, as a provisioner's startup taint puts it there. everynode's controller
// removes it itself; beside kube-controller-manager, which knows nothing of it, the
// same gate runs as a controller of its own (controller.RunNodeGate) in the
// benchmark's process: its own informers and its own client, with the controllers'
// rate limit, through the counting proxy (its requests count, its CPU does not).
const (
	burstGating  = "storage"
	burstGateKey = "bench.everynode.dev/agents-not-ready"
)

// startSeparateGate runs the gate alone against the proxy's kubeconfig in dir until
// the returned stop is called.
func (r *runCtx) startSeparateGate(dir string) (stop func(), err error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "proxy.kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = controller.GateFieldManager
	if r.o.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(r.o.QPS, r.o.Burst)
	} else {
		cfg.QPS = -1
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := controller.RunNodeGate(ctx, client); err != nil && ctx.Err() == nil {
			r.logf("the separate node gate stopped: %v", err)
		}
	})
	r.logf("node gate running as a separate controller (%s)", limitText(r.o.QPS, r.o.Burst))
	return func() { cancel(); wg.Wait() }, nil
}
