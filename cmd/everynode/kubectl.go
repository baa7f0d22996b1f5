//go:build !nosandbox

package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectl "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/plugin"

	"github.com/everynode/everynode/internal/sandboxpath"
)

// newKubectlCommand runs kubectl, built in, against the sandbox's kubeconfig unless
// $KUBECONFIG or --kubeconfig says otherwise.
func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "kubectl [kubectl arguments]",
		Short:              "Run kubectl (against the sandbox by default)",
		Long:               "Run kubectl, built into everynode. Without $KUBECONFIG it uses the kubeconfig of the sandbox in .everynode/sandbox, or $EVERYNODE_DATA_DIR.",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if os.Getenv("KUBECONFIG") == "" {
				if path := sandboxpath.FallbackKubeconfig(); path != "" {
					if _, err := os.Stat(path); err == nil {
						os.Setenv("KUBECONFIG", path)
					}
				}
			}
			streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
			k := kubectl.NewDefaultKubectlCommandWithArgs(kubectl.KubectlOptions{
				// kubectl-<name> executables on PATH are plugins, as with kubectl
				// itself (kubectl-everynode among them).
				PluginHandler: kubectl.NewDefaultPluginHandler(plugin.ValidPluginFilenamePrefixes),
				Arguments:     append([]string{"kubectl"}, args...),
				IOStreams:     streams,
			})
			k.SetArgs(args)
			return k.Execute()
		},
	}
}
