package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/everynode/everynode/internal/controller"
)

func newControllerCommand() *cobra.Command {
	cfg := controller.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the DaemonSet controller against a cluster",
		Long: `Run everynode's DaemonSet controller against the cluster of --kubeconfig,
$KUBECONFIG or the in-cluster service account.

In full mode (the default) it is the cluster's DaemonSet controller: stop
kube-controller-manager's own first (--controllers=*,-daemonset-controller), or the
two would fight over the same pods.

In companion mode (--mode companion), for clusters whose own DaemonSet controller
cannot be turned off (EKS, GKE, AKS), that controller keeps creating pods and
writing the status counters, and everynode rolls out the updates of the OnDelete
DaemonSets annotated rollout.everynode.dev/max-unavailable: it deletes their old
pods within that budget, in the order the rollout annotations say, and keeps their
Progressing condition. Every other DaemonSet is left alone. See docs/rollouts.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			explicit := cmd.Flags().Changed("leader-elect")
			if err := cfg.Validate(explicit); err != nil {
				return err
			}
			restCfg, inCluster, err := loadRESTConfig(cfg.Kubeconfig)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("metrics-auth") && inCluster {
				cfg.MetricsAuth = true
			}
			if !explicit && inCluster {
				cfg.LeaderElect = true
				if err := cfg.Leader.Validate(); err != nil {
					return err
				}
			}
			return runController(cmd.Context(), cfg, restCfg)
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}

// loadRESTConfig finds the cluster: --kubeconfig, $KUBECONFIG, in-cluster, then
// ~/.kube/config. It reports whether the in-cluster config was used.
func loadRESTConfig(path string) (*rest.Config, bool, error) {
	if path == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, true, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, false, fmt.Errorf("no usable cluster configuration (%v); pass --kubeconfig or set $KUBECONFIG", err)
	}
	return cfg, false, nil
}

func runController(ctx context.Context, cfg controller.Config, restCfg *rest.Config) error {
	logger := klog.FromContext(ctx)
	restCfg = cfg.RESTConfig(restCfg)
	// With leader election, every write but the Lease's own goes through the fence:
	// out only while this replica has renewed the Lease within the renew deadline.
	fence := controller.OpenFence()
	if cfg.LeaderElect {
		fence = controller.NewFence(clock.RealClock{}, cfg.Leader.RenewDeadline)
	}
	leaseClient, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("building API client: %w", err)
	}
	// The controller's client has a rate limiter of its own, which its pod write
	// dispatchers take their tokens from before they choose the next write.
	clientCfg, limiter := controller.PrepaidRateLimiter(fence.Wrap(restCfg))
	client, err := kubernetes.NewForConfig(clientCfg)
	if err != nil {
		return fmt.Errorf("building API client: %w", err)
	}
	if err := checkReachable(ctx, client, restCfg.Host); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	factory := informers.NewSharedInformerFactoryWithOptions(client, cfg.Resync, cfg.InformerOptions()...)
	metrics := controller.NewMetrics(reg).WithFence(fence)
	opts := cfg.Options(limiter, metrics)
	opts.ProbeNamespace = probeNamespace(cfg.ProbeNamespace)
	ctrl, err := controller.New(ctx, client, factory, opts)
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	// Ready (/readyz): leading with synced caches, or standing by for the Lease — a
	// standby is what a second replica is for, and a Deployment must be able to
	// roll it.
	var standingBy atomic.Bool
	standingBy.Store(cfg.LeaderElect)
	ready := func() bool { return standingBy.Load() || ctrl.Ready() }
	if cfg.MetricsAddr != "0" && cfg.MetricsAddr != "" {
		var guard controller.Guard
		if cfg.MetricsAuth {
			// The reviews are writes (creates) that a standby must make too: not fenced.
			if guard, err = controller.DelegatedAuth(leaseClient); err != nil {
				return err
			}
		}
		srv, err := controller.Listen(cfg.MetricsAddr, reg, ready, cfg.Profiling, guard)
		if err != nil {
			return err
		}
		logger.Info("Serving metrics and health", "addr", srv.Addr(), "metricsAuth", cfg.MetricsAuth)
		g.Go(func() error { return srv.Serve(ctx) })
	}
	run := func(ctx context.Context) error {
		standingBy.Store(false)
		metrics.SetLeading(true)
		defer metrics.SetLeading(false)
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		return ctrl.Run(ctx, cfg.Workers)
	}
	g.Go(func() error {
		if !cfg.LeaderElect {
			return run(ctx)
		}
		return controller.RunLeading(ctx, leaseClient, cfg.Leader, fence, run)
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	logger.Info("Stopped")
	return err
}

// probeNamespace is --probe-namespace, else the namespace everynode runs in
// ($POD_NAMESPACE, which the install chart sets), else "default".
func probeNamespace(flag string) string {
	if flag != "" {
		return flag
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}

// checkReachable fails fast, in one line, when the API server does not answer.
func checkReachable(ctx context.Context, client kubernetes.Interface, host string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %v", host, err)
	}
	return nil
}
