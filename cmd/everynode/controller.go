package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/controller"
)

// controllerConfig is the configuration of `everynode controller`.
type controllerConfig struct {
	Kubeconfig    string
	Namespace     string
	Workers       int
	QPS           float32
	Burst         int
	BurstReplicas int
	MetricsAddr   string
	Resync        time.Duration
	LeaderElect   bool
	Leader        leaderConfig
}

func defaultControllerConfig() controllerConfig {
	return controllerConfig{
		Workers:       2,
		QPS:           20,
		Burst:         30,
		BurstReplicas: controller.DefaultBurstReplicas,
		MetricsAddr:   ":8080",
		Leader:        defaultLeaderConfig(),
	}
}

// AddFlags binds the configuration to flags.
func (c *controllerConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "Path to a kubeconfig. Default: $KUBECONFIG, then the in-cluster config, then ~/.kube/config.")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "Manage the DaemonSets of this namespace only. Default: all namespaces.")
	fs.IntVar(&c.Workers, "workers", c.Workers, "DaemonSets synced concurrently.")
	fs.Float32Var(&c.QPS, "kube-api-qps", c.QPS, "Steady requests per second to the API server; 0 or negative means no client-side limit.")
	fs.IntVar(&c.Burst, "kube-api-burst", c.Burst, "Requests the client may send in a burst above --kube-api-qps.")
	fs.IntVar(&c.BurstReplicas, "burst-replicas", c.BurstReplicas, "Most pod creates, and separately deletes, one DaemonSet sync may issue.")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", c.MetricsAddr, `Address serving /metrics, /healthz and /readyz; "0" disables it.`)
	fs.DurationVar(&c.Resync, "resync", c.Resync, "Informer resync period; 0 disables periodic resync.")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "Run only while holding a coordination.k8s.io Lease, so replicas can stand by. Default: true in-cluster, false otherwise.")
	c.Leader.AddFlags(fs)
}

// Validate reports the first invalid setting, saying how to fix it. The leader
// election settings are checked when leader election is on, or may be turned on by
// default (explicit is false).
func (c *controllerConfig) Validate(explicit bool) error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", c.Workers)
	case c.Burst < 0:
		return fmt.Errorf("--kube-api-burst must not be negative, got %d", c.Burst)
	case c.QPS > 0 && c.Burst < 1:
		return fmt.Errorf("--kube-api-burst must be at least 1 when --kube-api-qps is set, got %d", c.Burst)
	case c.BurstReplicas < 1:
		return fmt.Errorf("--burst-replicas must be at least 1, got %d", c.BurstReplicas)
	case c.Resync < 0:
		return fmt.Errorf("--resync must not be negative, got %s", c.Resync)
	}
	if c.LeaderElect || !explicit {
		return c.Leader.Validate()
	}
	return nil
}

func newControllerCommand() *cobra.Command {
	cfg := defaultControllerConfig()
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the DaemonSet controller against a cluster",
		Long: `Run everynode's DaemonSet controller against the cluster of --kubeconfig,
$KUBECONFIG or the in-cluster service account. Stop kube-controller-manager's own
DaemonSet controller first (--controllers=*,-daemonset-controller): two controllers
would fight over the same pods.`,
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

func runController(ctx context.Context, cfg controllerConfig, restCfg *rest.Config) error {
	logger := klog.FromContext(ctx)
	restCfg = rest.CopyConfig(restCfg)
	restCfg.QPS, restCfg.Burst = cfg.QPS, cfg.Burst
	if cfg.QPS <= 0 {
		restCfg.QPS, restCfg.RateLimiter = -1, nil
	}
	restCfg.UserAgent = "everynode"
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("building API client: %w", err)
	}
	if err := checkReachable(ctx, client, restCfg.Host); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var opts []informers.SharedInformerOption
	if cfg.Namespace != "" {
		// Nodes are cluster-scoped and still watched cluster-wide.
		opts = append(opts, informers.WithNamespace(cfg.Namespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, cfg.Resync, opts...)
	ctrl, err := controller.New(ctx, client, factory, controller.Options{
		BurstReplicas: cfg.BurstReplicas,
		Metrics:       controller.NewMetrics(reg),
	})
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	if cfg.MetricsAddr != "0" && cfg.MetricsAddr != "" {
		srv, err := controller.Listen(cfg.MetricsAddr, reg, ctrl.Ready)
		if err != nil {
			return err
		}
		logger.Info("Serving metrics and health", "addr", srv.Addr())
		g.Go(func() error { return srv.Serve(ctx) })
	}
	run := func(ctx context.Context) error {
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		return ctrl.Run(ctx, cfg.Workers)
	}
	g.Go(func() error {
		if !cfg.LeaderElect {
			return run(ctx)
		}
		return runLeading(ctx, client, cfg.Leader, run)
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	logger.Info("Stopped")
	return err
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
