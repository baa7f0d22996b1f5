package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/component"
	"github.com/everynode/everynode/internal/controller"
	"github.com/everynode/everynode/internal/nodesim"
)

// Hooks are told how a sandbox's start goes; a nil hook is skipped.
type Hooks struct {
	// Serving is called once with the kubeconfig path when the API answers and the
	// sandbox's components have started.
	Serving func(kubeconfig string)
	// Ready is called once after Serving, when the simulated nodes and the real nodes
	// asked for are Ready and untainted, so that a DaemonSet created now lands on every
	// one of them. realNodes is how many real nodes run.
	Ready func(kubeconfig string, realNodes int)
	// Warn is told why the real nodes asked for cannot run here (the host lacks
	// something); the sandbox goes on with its simulated nodes.
	Warn func(err error)
}

// Run starts a sandbox and keeps it up until ctx ends, telling hooks how its start
// goes.
func Run(ctx context.Context, cfg Config, hooks Hooks) error {
	logger := klog.FromContext(ctx)
	// Every path handed to a component or written into a kubeconfig is absolute, so
	// it means the same thing whatever the reader's working directory.
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	p := paths{dir}
	lock, err := lockDir(p)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := checkPortFree(cfg.Port); err != nil {
		return err
	}
	if err := os.MkdirAll(p.join("logs"), 0o700); err != nil {
		return fmt.Errorf("data dir %s is not writable: %w", p.dir, err)
	}
	cr, err := ensureCredentials(p)
	if err != nil {
		return err
	}
	pt, err := loadPorts(p)
	if err != nil {
		return err
	}

	start := time.Now()
	etcd, etcdURL, err := startEtcd(ctx, p, pt)
	if err != nil {
		return err
	}
	defer etcd.Close()

	server := fmt.Sprintf("https://127.0.0.1:%d", cfg.Port)
	apiserver, err := startChild(ctx, p, "kube-apiserver", "kube-apiserver", apiserverArgs(cfg, p, cr, etcdURL))
	if err != nil {
		return err
	}
	children := []*component.Child{apiserver}
	defer func() { stopChildren(children) }()
	restCfg := restConfig(server, cr)
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("building API client: %w", err)
	}
	if err := waitServing(ctx, client, apiserver, p); err != nil {
		return err
	}
	kubeconfig := Kubeconfig(p.dir)
	if err := writeKubeconfig(kubeconfig, server, cr); err != nil {
		return err
	}
	scheduler, err := startChild(ctx, p, "kube-scheduler", "kube-scheduler", schedulerArgs(kubeconfig))
	if err != nil {
		return err
	}
	scheduler.Stateless = true
	children = append(children, scheduler)
	kcm, err := startChild(ctx, p, "kube-controller-manager", "kube-controller-manager", controllerManagerArgs(cr, kubeconfig))
	if err != nil {
		return err
	}
	kcm.Stateless = true
	children = append(children, kcm)
	if cfg.Controller == ControllerUpstream || cfg.Controller == ControllerCompanion || cfg.Controller == ControllerChartCompanion {
		ds, err := startChild(ctx, p, "daemonset-controller", "kube-controller-manager", upstreamDaemonSetArgs(kubeconfig))
		if err != nil {
			return err
		}
		ds.Stateless = true
		children = append(children, ds)
	}
	logger.V(1).Info("Control plane up", "elapsed", time.Since(start).Round(time.Millisecond))

	var nodes realNodes
	defer nodes.stop(context.WithoutCancel(ctx))
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range children {
		g.Go(func() error { return watchChild(gctx, c, p) })
	}
	g.Go(func() error { return nodesim.New(client, cfg.Sim).Run(gctx) })
	switch cfg.Controller {
	case ControllerEveryNode:
		g.Go(func() error { return runController(gctx, restCfg, controller.ModeFull, cfg.ControllerWorkers) })
	case ControllerCompanion:
		g.Go(func() error { return runController(gctx, restCfg, controller.ModeCompanion, cfg.ControllerWorkers) })
	}
	if hooks.Serving != nil {
		hooks.Serving(kubeconfig)
	}
	g.Go(func() error {
		warn := func(err error) {
			if hooks.Warn != nil {
				hooks.Warn(err)
			}
		}
		realUp, err := runRealNodes(gctx, cfg, p, cr, client, &nodes, warn)
		if err != nil {
			return err
		}
		// Nodes gated on a pod (--node-ready-requires) turn Ready only once that pod
		// runs: the sandbox is ready when they are registered.
		if err := waitNodes(gctx, client, cfg.Sim.Nodes, cfg.Sim.NodeReadyRequires == ""); err != nil {
			return err
		}
		logger.V(1).Info("Nodes Ready", "simulated", cfg.Sim.Nodes, "real", realUp, "elapsed", time.Since(start).Round(time.Millisecond))
		if mode := chartMode(cfg.Controller); mode != "" {
			if err := installChart(gctx, restCfg, client, mode); err != nil {
				return err
			}
			logger.V(1).Info("Chart installed", "namespace", ChartNamespace, "mode", mode, "elapsed", time.Since(start).Round(time.Millisecond))
		}
		if hooks.Ready != nil {
			hooks.Ready(kubeconfig, realUp)
		}
		return nodes.watch(gctx)
	})
	err = g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// runController runs everynode's DaemonSet controller in this process, in mode.
func runController(ctx context.Context, restCfg *rest.Config, mode string, workers int) error {
	ctrlCfg := controller.DefaultConfig()
	ctrlCfg.QPS = 0 // the sandbox's API server is there for it: no client-side limit
	client, err := kubernetes.NewForConfig(ctrlCfg.RESTConfig(restCfg))
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, ctrlCfg.InformerOptions()...)
	ctrl, err := controller.New(ctx, client, factory, controller.Options{
		Mode:              mode,
		MinStatusInterval: ctrlCfg.MinStatusInterval,
		MaxStatusHold:     ctrlCfg.MaxStatusHold,
		SyncBatchPeriod:   ctrlCfg.SyncBatchPeriod,
		NodeGate:          ctrlCfg.NodeGate,
		Metrics:           controller.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	return ctrl.Run(ctx, workers)
}

// watchChild turns a component's unexpected exit into the sandbox's error.
func watchChild(ctx context.Context, c *component.Child, p paths) error {
	select {
	case <-c.Exited():
		return exitError(c.Name, c.Err(), p.logs(c.Name))
	case <-ctx.Done():
		return nil
	}
}

// waitServing waits until the API server answers /readyz.
func waitServing(ctx context.Context, client kubernetes.Interface, apiserver *component.Child, p paths) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-apiserver.Exited():
			return false, exitError("kube-apiserver", apiserver.Err(), p.logs("kube-apiserver"))
		default:
		}
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		return err == nil && string(body) == "ok", nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("the API server did not become ready: %w", err)
	}
	return err
}

// nodesReadyTimeout bounds the wait for the simulated nodes to turn Ready: about a
// minute for 5,000 of them on a 2-core machine.
const nodesReadyTimeout = 10 * time.Minute

// waitNodes waits until at least n simulated nodes are registered and, when usable
// is set, Ready and free of the not-ready taint, which the node lifecycle
// controller lifts.
func waitNodes(ctx context.Context, client kubernetes.Interface, n int, usable bool) error {
	ok := func(*v1.Node) bool { return true }
	if usable {
		ok = nodesim.Usable
	}
	err := waitLabelledNodes(ctx, client, nodesim.LabelSimulated+"=true", n, ok)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("the %d simulated nodes did not all turn Ready within %s; see the logs of kube-controller-manager and the sandbox", n, nodesReadyTimeout)
	}
	return err
}

// waitLabelledNodes waits until at least n nodes match selector and ok.
func waitLabelledNodes(ctx context.Context, client kubernetes.Interface, selector string, n int, ok func(*v1.Node) bool) error {
	if n == 0 {
		return nil
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, nodesReadyTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		count := 0
		for i := range list.Items {
			if ok(&list.Items[i]) {
				count++
			}
		}
		return count >= n, nil
	})
}

func checkPortFree(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("port %d is in use; pass a free --port", port)
	}
	return l.Close()
}
