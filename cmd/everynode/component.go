//go:build !nosandbox

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/everynode/everynode/internal/component"
)

// newComponentCommand runs one upstream control plane component. The sandbox starts
// each in a child process of this binary, where it may own the process's signal
// handling and global registries as it expects to.
func newComponentCommand() *cobra.Command {
	return &cobra.Command{
		Use:                component.Command + " kube-apiserver|kube-scheduler|kube-controller-manager [flags]",
		Short:              "Run an upstream control plane component (used by the sandbox)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("name a component: kube-apiserver, kube-scheduler or kube-controller-manager")
			}
			var c *cobra.Command
			switch args[0] {
			case "kube-apiserver":
				c = apiserver.NewAPIServerCommand()
			case "kube-scheduler":
				c = scheduler.NewSchedulerCommand()
			case "kube-controller-manager":
				c = controllermanager.NewControllerManagerCommand()
			default:
				return fmt.Errorf("unknown component %q: use kube-apiserver, kube-scheduler or kube-controller-manager", args[0])
			}
			c.SetArgs(args[1:])
			return c.Execute()
		},
	}
}
