//go:build nosandbox

package main

import "github.com/spf13/cobra"

// sandboxCommands: none in the controller's image (built with the nosandbox tag),
// which carries neither the upstream control plane nor kubectl nor the benchmark.
func sandboxCommands() []*cobra.Command { return nil }
