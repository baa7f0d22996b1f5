//go:build !nosandbox

package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/everynode/everynode/internal/bench/floorctl"
	"github.com/everynode/everynode/internal/controller"
)

// newFloorCommand runs the benchmark's floor controller (internal/bench/floorctl), which
// `everynode bench` starts in a child process of its own.
func newFloorCommand() *cobra.Command {
	var kubeconfig, profilingAddr string
	var qps float32
	var burst, workers int
	cmd := &cobra.Command{
		Use:    "floor-controller",
		Short:  "Run the benchmark's floor controller: per-node pod creates and deletes only (used by everynode bench)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = qps, burst
			if qps <= 0 {
				cfg.QPS, cfg.RateLimiter = -1, nil
			}
			cfg.ContentType = "application/vnd.kubernetes.protobuf"
			cfg.AcceptContentTypes = cfg.ContentType + ",application/json"
			cfg.UserAgent = "everynode-floor"
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			c, err := floorctl.New(client, workers)
			if err != nil {
				return err
			}
			if profilingAddr != "" {
				srv, err := controller.Listen(profilingAddr, prometheus.NewRegistry(), func() bool { return true }, true, nil)
				if err != nil {
					return err
				}
				go func() { _ = srv.Serve(cmd.Context()) }()
			}
			return c.Run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster.")
	fs.Float32Var(&qps, "kube-api-qps", 20, "Client requests a second; 0 or negative lifts the limit.")
	fs.IntVar(&burst, "kube-api-burst", 30, "Client burst above --kube-api-qps.")
	fs.IntVar(&workers, "workers", 16, "Nodes synced at a time.")
	fs.StringVar(&profilingAddr, "profiling-addr", "", "Serve Go's profiles under /debug/pprof/ on this address, such as 127.0.0.1:6060 (empty: none).")
	return cmd
}
