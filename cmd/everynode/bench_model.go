//go:build !nosandbox

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/everynode/everynode/internal/bench"
	"github.com/everynode/everynode/internal/scalemodel"
)

// newBenchModelCommand is `everynode bench model`: the controller at cluster sizes no
// sandbox on one machine holds, against an in-process API.
func newBenchModelCommand() *cobra.Command {
	nodes := []int{10000, 30000, 65000}
	shape := scalemodel.DefaultSize(0)
	var one int
	var jsonPath, svgPath string
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Run everynode's controller against an in-process API at 10,000 to 65,000 nodes",
		Long: `The scale model: everynode's controller — its real informers, decision core and writer,
with the settings of everynode controller and no client rate limit — against an
in-process API instead of a sandbox: client-go's fake clientset with the API server's
behaviour the controller relies on (resource versions, conflicts, the status
subresource, generate names), and a kubelet that binds every new pod and reports it
Running and Ready at once. No kube-apiserver, no etcd, no scheduler.

Each size runs in a child process of its own, one after another: --nodes nodes in
--pools pools (a node label), --daemonsets DaemonSets each selecting a pool (maxUnavailable
10%). Three phases:
  cold create   the DaemonSets created at once: time until every one converged
  rollout       every template's image changed at once: time until converged
  churn         --churn-rate pool moves a second for --churn-duration (each moves a
                node to the next pool: its pods of the old pool's DaemonSets go, the
                new pool's come), until every DaemonSet converged again

Measures: wall time of each phase; CPU per pod (create, rollout) and per node event
(churn) — the whole process's CPU (getrusage), so it includes the in-process API, its
watches and the kubelet; the controller's live heap after the churn (the heap after
a garbage collection with the controller running, less the heap once it and its
informers are stopped), per node; the process's peak RSS. Prints a markdown table
with the largest size ÷ the smallest for the per-pod, per-event and per-node
measures; --svg writes them as a plot, --json as JSON.`,
		Example: `  everynode bench model
  everynode bench model --nodes 1000,2000 --churn-duration 10s --svg model.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if one > 0 {
				// The controller's own log would drown the progress lines: it
				// reports dropped events by the thousand at these sizes.
				quiet := flag.NewFlagSet("klog", flag.ContinueOnError)
				klog.InitFlags(quiet)
				_ = quiet.Set("logtostderr", "false")
				_ = quiet.Set("stderrthreshold", "FATAL")
				klog.SetOutput(io.Discard)
				s := shape
				s.Nodes = one
				return scalemodel.RunChild(ctx, s, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			var sizes []scalemodel.Size
			for _, n := range nodes {
				if n < shape.Pools {
					return fmt.Errorf("--nodes %d: every size needs at least one node per pool (--pools %d)", n, shape.Pools)
				}
				s := shape
				s.Nodes = n
				sizes = append(sizes, s)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			start := time.Now()
			results, err := scalemodel.RunSizes(ctx, scalemodel.Options{Sizes: sizes, Exe: exe, Args: []string{"bench", "model"}}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "everynode bench model, %s; %s\n\n    %s\n\n", start.UTC().Format("2006-01-02 15:04 UTC"), bench.Machine(), "everynode "+strings.Join(os.Args[1:], " "))
			scalemodel.Table(out, results)
			fmt.Fprintf(out, "\nAll sizes: %s.\n", time.Since(start).Round(time.Second))
			if jsonPath != "" {
				if err := scalemodel.WriteJSON(jsonPath, results); err != nil {
					return err
				}
			}
			if svgPath != "" {
				f, err := os.Create(svgPath)
				if err != nil {
					return err
				}
				if err := scalemodel.Plot(f, results); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntSliceVar(&nodes, "nodes", nodes, "Cluster sizes to run, in nodes, comma-separated; each in a process of its own.")
	fs.IntVar(&shape.DaemonSets, "daemonsets", shape.DaemonSets, "DaemonSets, each selecting one pool.")
	fs.IntVar(&shape.Pools, "pools", shape.Pools, "Node pools the DaemonSets select, in turn.")
	fs.IntVar(&shape.ChurnRate, "churn-rate", shape.ChurnRate, "Pool moves a second in the churn phase.")
	fs.DurationVar(&shape.ChurnDuration, "churn-duration", shape.ChurnDuration, "How long the churn phase moves nodes.")
	fs.DurationVar(&shape.Timeout, "timeout", shape.Timeout, "Longest wait for any one convergence before the run fails.")
	fs.StringVar(&shape.ProfileDir, "profile-dir", "", "Write a CPU profile of each size's churn phase to DIR/churn-<nodes>.pprof (read it with go tool pprof bin/everynode FILE).")
	fs.StringVar(&jsonPath, "json", "", "Also write the results to this file as JSON.")
	fs.StringVar(&svgPath, "svg", "", "Also plot the results against the node count to this SVG file.")
	fs.IntVar(&one, "one", 0, "Run one size in this process and print its result as JSON (how the model runs each size).")
	_ = fs.MarkHidden("one")
	return cmd
}
