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
the cluster.

With --real-nodes N (as root, after installing containerd, runc and the CNI plugins),
N real nodes run beside the simulated ones: each a kubelet and a containerd in a
network namespace of its own, running real containers from images the sandbox builds
offline (everynode.local/agent:1 and :2). With --controller chart (full mode) or
chart-companion, everynode itself runs there, installed from its own Helm chart and
image (everynode.local/everynode), 2 replicas electing a leader.`,
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
					fmt.Fprintf(os.Stdout, "sandbox serving: API server on https://127.0.0.1:%d; waiting for %d simulated nodes to %s%s\n",
						cfg.Port, cfg.Sim.Nodes, wait, realWait(cfg.RealNodes))
				},
				Ready: func(kubeconfig string, realNodes int) {
					gated := ""
					if cfg.Sim.NodeReadyRequires != "" {
						gated = fmt.Sprintf(" (NotReady until a pod matching %q runs on each)", cfg.Sim.NodeReadyRequires)
					}
					reals := ""
					if cfg.RealNodes > 0 {
						reals = fmt.Sprintf(", %d real nodes", realNodes)
					}
					fmt.Fprintf(os.Stdout, "sandbox ready: %d simulated nodes%s%s, %s controller; kubeconfig at %s (try: everynode kubectl get nodes)\n",
						cfg.Sim.Nodes, gated, reals, cfg.Controller, kubeconfig)
				},
				Warn: func(err error) {
					fmt.Fprintf(os.Stdout, "sandbox: no real nodes: %v\n", err)
				},
			})
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}

// realWait says which real nodes the sandbox waits for, if any.
func realWait(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d real nodes to start", n)
}
