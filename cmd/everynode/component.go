//go:build !nosandbox

package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/everynode/everynode/internal/component"
	"github.com/everynode/everynode/internal/realnode"
)

// newComponentCommand runs one upstream component: a control plane component, or a
// real node's kubelet. The sandbox starts each in a child process of this binary,
// where it may own the process's signal handling and global registries as it
// expects to.
func newComponentCommand() *cobra.Command {
	return &cobra.Command{
		Use:                component.Command + " kube-apiserver|kube-scheduler|kube-controller-manager|kubelet [flags]",
		Short:              "Run an upstream Kubernetes component (used by the sandbox)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("name a component: kube-apiserver, kube-scheduler, kube-controller-manager or kubelet")
			}
			var c *cobra.Command
			switch args[0] {
			case "kube-apiserver":
				c = apiserver.NewAPIServerCommand()
			case "kube-scheduler":
				c = scheduler.NewSchedulerCommand()
			case "kube-controller-manager":
				c = controllermanager.NewControllerManagerCommand()
			case "kubelet":
				c = kubelet.NewKubeletCommand(context.Background())
			case realnode.InitCommand:
				return realnode.Init(args[1:])
			default:
				return fmt.Errorf("unknown component %q: use kube-apiserver, kube-scheduler, kube-controller-manager or kubelet", args[0])
			}
			c.SetArgs(args[1:])
			return c.Execute()
		},
	}
}
