package main

import (
	"flag"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "everynode",
		Short: "A Kubernetes DaemonSet controller",
		Long: `everynode keeps one pod of every apps/v1 DaemonSet on every eligible node and
rolls template changes out safely, behaving like kube-controller-manager's DaemonSet
controller wherever users, kubectl and the scheduler can see it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// klog's flags (-v, --vmodule, ...) on a flag set of our own, not the process's.
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	logFlags.VisitAll(func(f *flag.Flag) {
		if f.Name == "v" || f.Name == "vmodule" {
			root.PersistentFlags().AddGoFlag(f)
		}
	})
	root.AddCommand(newControllerCommand(), newRolloutCommand(), newExplainCommand(), newDashboardCommand())
	root.AddCommand(sandboxCommands()...)
	// The embedded control plane registers a process-wide --version flag (its own
	// version, not ours), which cobra would list on every command.
	if f := pflag.CommandLine.Lookup("version"); f != nil {
		f.Hidden = true
	}
	return root
}
