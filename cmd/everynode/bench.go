//go:build !nosandbox

package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/everynode/everynode/internal/bench"
)

func newBenchCommand() *cobra.Command {
	o := bench.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Compare everynode with kube-controller-manager's DaemonSet controller on sandboxes",
		Long: `Run DaemonSet scenarios twice each, on a fresh sandbox every time (everynode sandbox
--controller=none, a child process): once with kube-controller-manager's DaemonSet
controller, once with everynode's. Each controller runs in a process of its own, with
the same client rate limit, and talks to the API server only through a counting
reverse proxy on loopback, so its requests are attributed exactly. Prints one
markdown table: per scenario and measure, upstream, everynode and everynode/upstream.

Scenarios (--scenarios, in this order):
  create     one DaemonSet onto --nodes nodes: time until it converged
  create-5   five DaemonSets at once onto --nodes nodes
  rolling    a DaemonSet on --nodes nodes with maxUnavailable=10%: change its image,
             time the update until it converged
  surge      the same with maxSurge=10% (maxUnavailable=0)
  churn      --churn-nodes nodes in 10 pools, --churn-daemonsets DaemonSets selecting
             a pool each plus one with a 6-expression NotIn node affinity; then
             --churn-rate node changes a second for --churn-duration (every 10th moves
             a node to the next pool, every other toggles a taint all tolerate, the
             rest bump a label the NotIn affinity reads); then --churn-add-nodes new
             nodes at once: p50/p99 from a node created (and from it Ready) to all its
             pods created, and controller CPU per node change
  steady     --steady-nodes nodes × --steady-daemonsets DaemonSets; make
             --steady-flip-percent of the pods unready, then ready again (through the
             node simulator's sim.everynode.dev/ready pod annotation), counting
             DaemonSet status writes
  big-cluster --big-nodes nodes running --big-pods pods of no DaemonSet (created
             bound by a plain client before the controller starts), then
             --big-daemonsets DaemonSets: the controller's peak memory with every pod
             of the cluster in its cache

A DaemonSet has converged when its status shows observedGeneration == generation and
desired == current == updated == ready == available == the nodes it should run on,
none misscheduled. Each sandbox first measures its API server's pod-create rate with
a plain client (--floor-pods pods, --floor-parallelism at a time, no rate limit; the
better of two rounds), and convergence times are set against it: the API floor is
pods ÷ that rate.

Measures: wall time to converge; controller CPU (utime+stime of its process, from
/proc/<pid>/stat, over the measured phase plus 3 s); kube-apiserver CPU over the same
phase; peak RSS of the controller process (VmHWM from /proc/<pid>/status at the end of
the run: the largest resident set over its whole life, startup included); API
requests by verb, errors and response bytes, counted by the proxy over the phase.

Progress goes to stderr, the table to stdout. Expect minutes per run at the default
sizes; the first build of everynode takes much longer.`,
		Example: `  everynode bench --scenarios create,rolling --nodes 100
  everynode bench --kube-api-qps 0 --scenarios create,create-5,rolling,surge --nodes 1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Command = "everynode " + strings.Join(os.Args[1:], " ")
			return bench.Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&o.Scenarios, "scenarios", o.Scenarios, "Scenarios to run, comma-separated: "+strings.Join(bench.ScenarioNames(), ", ")+".")
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers, `Controllers to run each scenario with, in column order: "upstream" (kube-controller-manager's DaemonSet controller) and/or "everynode". The ratio column needs both.`)
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Client requests a second for both controllers (20 is kube-controller-manager's default); 0 or negative lifts the limit.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Client burst above --kube-api-qps for both controllers (30 is kube-controller-manager's default).")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "Nodes of the create, create-5, rolling and surge scenarios.")
	fs.IntVar(&o.ChurnNodes, "churn-nodes", o.ChurnNodes, "Nodes of the churn scenario before nodes are added.")
	fs.IntVar(&o.ChurnDaemonSets, "churn-daemonsets", o.ChurnDaemonSets, "DaemonSets with a node selector in the churn scenario (one more has the NotIn affinity).")
	fs.IntVar(&o.ChurnRate, "churn-rate", o.ChurnRate, "Node label and taint changes a second in the churn scenario.")
	fs.DurationVar(&o.ChurnDuration, "churn-duration", o.ChurnDuration, "How long the churn scenario changes nodes.")
	fs.IntVar(&o.ChurnAddNodes, "churn-add-nodes", o.ChurnAddNodes, "Nodes the churn scenario adds at once after the churn (0: none).")
	fs.IntVar(&o.SteadyNodes, "steady-nodes", o.SteadyNodes, "Nodes of the steady scenario.")
	fs.IntVar(&o.SteadyDaemonSets, "steady-daemonsets", o.SteadyDaemonSets, "DaemonSets (on every node) of the steady scenario.")
	fs.IntVar(&o.SteadyPercent, "steady-flip-percent", o.SteadyPercent, "Percent of the steady scenario's pods made unready, then ready.")
	fs.IntVar(&o.BigNodes, "big-nodes", o.BigNodes, "Nodes of the big-cluster scenario.")
	fs.IntVar(&o.BigPods, "big-pods", o.BigPods, "Pods of no DaemonSet the big-cluster scenario runs before the controller starts.")
	fs.IntVar(&o.BigDaemonSets, "big-daemonsets", o.BigDaemonSets, "DaemonSets (on every node) of the big-cluster scenario.")
	fs.IntVar(&o.FloorPods, "floor-pods", o.FloorPods, "Pods created to measure the API server's pod-create rate on each sandbox.")
	fs.IntVar(&o.FloorParallel, "floor-parallelism", o.FloorParallel, "Creates in flight at once when measuring the pod-create rate.")
	fs.DurationVar(&o.PodReadyDelay, "pod-ready-delay", o.PodReadyDelay, "How long a simulated pod stays Pending before it is Ready (the sandbox's --pod-ready-delay).")
	fs.DurationVar(&o.PodStopDelay, "pod-stop-delay", o.PodStopDelay, "How long a deleted simulated pod lingers (the sandbox's --pod-stop-delay).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "Longest wait for any one convergence before the run fails.")
	fs.StringVar(&o.WorkDir, "work-dir", o.WorkDir, "Directory for the sandboxes' data and logs (default: the system's temporary directory). Removed afterwards unless --keep.")
	fs.BoolVar(&o.Keep, "keep", o.Keep, "Keep the sandboxes' data directories and logs (sandbox.log, logs/, controller-*.log).")
	fs.StringVar(&o.ProfileDir, "profile-dir", o.ProfileDir, "Save CPU profiles of everynode's controller over each scenario run to this directory, in consecutive 10 s chunks (<scenario>-everynode-NNN.pprof; `go tool pprof` merges them).")
	fs.BoolVar(&o.ByResource, "by-resource", o.ByResource, "Also print the measured phase's API requests by verb and resource.")
	return cmd
}
