//go:build !nosandbox

package main

import "github.com/spf13/cobra"

// sandboxCommands are the verbs that embed the upstream control plane, kubectl and
// the benchmark: left out of the controller's image, which is built with the
// nosandbox tag.
func sandboxCommands() []*cobra.Command {
	return []*cobra.Command{newSandboxCommand(), newKubectlCommand(), newComponentCommand(), newBenchCommand(), newFloorCommand()}
}
