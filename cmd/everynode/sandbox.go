//go:build !nosandbox

package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/everynode/everynode/internal/sandbox"
)

func newSandboxCommand() *cobra.Command {
	cfg := sandbox.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run a local Kubernetes control plane with simulated nodes and everynode",
		Long: `Run, on 127.0.0.1 and in the foreground, a real Kubernetes control plane — embedded
etcd, kube-apiserver, kube-scheduler and kube-controller-manager — with simulated
nodes and a DaemonSet controller (everynode by default). Use it with
"everynode kubectl ...". Stop it with Ctrl-C; restarting on the same --data-dir keeps
the cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			return sandbox.Run(cmd.Context(), cfg, sandbox.Hooks{
				Serving: func(kubeconfig string) {
					wait := "turn Ready"
					if cfg.Sim.NodeReadyRequires != "" {
						wait = "register"
					}
					fmt.Fprintf(os.Stdout, "sandbox serving: API server on https://127.0.0.1:%d; waiting for %d simulated nodes to %s\n",
						cfg.Port, cfg.Sim.Nodes, wait)
				},
				Ready: func(kubeconfig string) {
					gated := ""
					if cfg.Sim.NodeReadyRequires != "" {
						gated = fmt.Sprintf(" (NotReady until a pod matching %q runs on each)", cfg.Sim.NodeReadyRequires)
					}
					fmt.Fprintf(os.Stdout, "sandbox ready: %d simulated nodes%s, %s controller; kubeconfig at %s (try: everynode kubectl get nodes)\n",
						cfg.Sim.Nodes, gated, cfg.Controller, kubeconfig)
				},
			})
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}
