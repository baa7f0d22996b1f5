package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/everynode/everynode/internal/inspect"
)

func newExplainCommand() *cobra.Command {
	var cluster clusterFlags
	var output string
	cmd := &cobra.Command{
		Use:   "explain DAEMONSET [NODE] | explain node/NODE",
		Short: "Say, node by node, why a DaemonSet's pod runs there or not; or why a node's gate taint stays",
		Long: `Explain what everynode's controller decides for a DaemonSet, node by node, by
running its own rules on the cluster as it is now.

For each node: whether the DaemonSet should run a pod there and, if not, which rule
says so (node name, nodeSelector, affinity, taints); the pods there, the revision
each runs (number and hash), whether it runs the current template, is ready and is
available; what the rollout waits for on the node (its turn in the update budget, a
pause, partition, canary, wave, failure...) and until when; and what the next sync
would do there. Then the current revision, the node counts and the Progressing
condition.

With NODE, that node only, in more detail. -o json prints the same for machines.

With node/NODE, the node gate on that node (the everynode.dev/node-gate annotation):
for each NoSchedule taint of the node that a DaemonSet gates on, whether the taint
goes or stays and why — which gating DaemonSets should run there, and whether each
has an available pod there (or none, or one not Ready, and why).

A node whose pods keep failing shows its failed-pod back-off: how many pods failed
there and until when the failed one is left alone, read from the count each
replacement pod records (everynode.dev/failed-pods-before). The controller's pending
writes are not visible from outside it; the report is as if it had none.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("unknown output format %q: use -o json, or no -o for a table", output)
			}
			if node, ok := nodeArg(args[0]); ok {
				if len(args) > 1 {
					return fmt.Errorf("explain %s takes no second argument", args[0])
				}
				return explainNodeGates(cmd, cluster, node, output)
			}
			name, err := daemonSetArg(args[0])
			if err != nil {
				return err
			}
			client, ns, err := cluster.connect()
			if err != nil {
				return err
			}
			e, err := inspect.Explain(cmd.Context(), client, ns, name, time.Now())
			if err != nil {
				return err
			}
			node := ""
			if len(args) == 2 {
				node = args[1]
			}
			out := cmd.OutOrStdout()
			switch {
			case output == "json":
				return e.WriteJSON(out, node)
			case node != "":
				return e.WriteNode(out, node)
			}
			return e.WriteTable(out)
		},
	}
	cluster.add(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (default: a table, or a node's details)")
	return cmd
}

// explainNodeGates prints the node gate's verdicts on node.
func explainNodeGates(cmd *cobra.Command, cluster clusterFlags, node, output string) error {
	client, _, err := cluster.connect()
	if err != nil {
		return err
	}
	g, err := inspect.ExplainNodeGates(cmd.Context(), client, node, time.Now())
	if err != nil {
		return err
	}
	if output == "json" {
		return g.WriteJSON(cmd.OutOrStdout())
	}
	return g.WriteText(cmd.OutOrStdout())
}
