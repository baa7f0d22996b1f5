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
		Long: `Run DaemonSet scenarios once per controller, on a fresh sandbox every time (everynode sandbox
--controller=none, a child process): once with kube-controller-manager's DaemonSet
controller, once with everynode's (and the churn scenario once more with the floor
controller, see below). Each controller runs in a process of its own, with
the same client rate limit, and talks to the API server only through a counting
reverse proxy on loopback, so its requests are attributed exactly. Prints one
markdown table: per scenario and measure, upstream, everynode and everynode/upstream
(and, in the churn scenario, the floor controller and everynode/floor). With
--rounds N every scenario runs N times per controller, the controllers taking turns,
and each cell is the median of the N runs.

Scenarios (--scenarios, in this order; all but burst by default):
  create     one DaemonSet onto --nodes nodes: time until it converged
  create-5   five DaemonSets at once onto --nodes nodes
  rolling    a DaemonSet on --nodes nodes with maxUnavailable=10%: change its image,
             time the update until it converged
  surge      the same with maxSurge=10% (maxUnavailable=0)
  in-place   the rolling update with rollout.everynode.dev/in-place: everynode patches
             each pod, upstream (which ignores the annotation) replaces it
  churn      --churn-nodes nodes in --churn-pools pools, --churn-daemonsets DaemonSets
             selecting a pool each; then --churn-rate node changes a second for
             --churn-duration: with --churn-changes=moves (the default) each moves a
             node to the next pool (its pods of the old pool's DaemonSets go, the new
             pool's come); with =mixed one in ten does, the others toggle a taint all
             tolerate or bump a label that one more DaemonSet's 6-expression NotIn
             affinity reads; then --churn-add-nodes new nodes at once. Measures
             p50/p99 from a pool move to its pods created and deleted (a move never
             answered before the node's next one counts as ∞), controller CPU per
             node change, and p50/p99 from a node created (and from it Ready) to all
             its pods created. Also run by the floor controller (see below)
  steady     --steady-nodes nodes × --steady-daemonsets DaemonSets; make
             --steady-flip-percent of the pods unready, then ready again (through the
             node simulator's sim.everynode.dev/ready pod annotation), counting
             DaemonSet status writes
  big-cluster --big-nodes nodes running --big-pods pods of no DaemonSet (created
             bound by a plain client before the controller starts, then adopted
             by a ReplicaSet), then
             --big-daemonsets DaemonSets: the controller's peak memory with every pod
             of the cluster in its cache. All its pods run on the simulator's
             first status write (sim.everynode.dev/ready-after: 0s), which halves
             the writes the sandbox's API server must keep up with
  burst      --burst-nodes nodes × 20 DaemonSets (a CNI agent of priority class
             system-node-critical that every node's readiness waits for, nine more
             tolerating every taint, the first of them a storage agent gating new
             nodes with everynode.dev/node-gate, ten plain), settled: their pods
             created bound by a plain client before the controller starts, as it
             would have made them; then --burst-add nodes at once, NotReady until
             their CNI pod runs and tainted until the storage agent is available
             there: p50/p99 from a new node created to its CNI pod created, to the
             node Ready (and the not-ready taint lifted), to the gate taint removed,
             to all its 20 pods Running. everynode removes the gate taint itself;
             beside upstream the same gate runs as a controller of its own, in the
             benchmark's process, with the same rate limit, its requests counted.
             Not run by default; run it with --scenarios burst

The floor controller (--controllers floor, in the default set) is the churn
scenario's third column: a minimal controller, in a process of its own like the
others, that does only the unavoidable work: the same informers, the core's
eligibility decided per node, pod creates and deletes, no status, no revisions. As
it writes no status, its convergence is read from the pods. Other scenarios do not
run it.

A DaemonSet has converged when its status shows observedGeneration == generation and
desired == current == updated == ready == available == the nodes it should run on,
none misscheduled. Each sandbox first measures its API server's pod-create rate with
a plain client (--floor-pods pods, --floor-parallelism at a time, no rate limit; the
better of two passes), and convergence times are set against it: the API floor is
pods ÷ that rate.

Measures: wall time to converge; controller CPU (utime+stime of its process, from
/proc/<pid>/stat, over the measured phase plus 3 s); kube-apiserver CPU over the same
phase; peak RSS of the controller process (VmHWM from /proc/<pid>/status at the end of
the run: the largest resident set over its whole life, startup included); API
requests by verb, errors and response bytes, counted by the proxy over the phase.

Progress goes to stderr, the table to stdout. Each progress line names its run (the
how-manieth of all), scenario and controller, and a wait for convergence says every
15 s how far the DaemonSets are (converged, pods updated and available of those
wanted). --json FILE also writes the results as JSON: every run and metric with raw
values (seconds, bytes, counts) and its unit named, a latency never reached as null
with "infinite": true. Expect minutes per run at the default
sizes; the first build of everynode takes much longer.`,
		Example: `  everynode bench --scenarios create,rolling --nodes 100
  everynode bench --kube-api-qps 0 --scenarios create,create-5,rolling,surge --nodes 1000
  everynode bench --scenarios burst --burst-nodes 500 --burst-add 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Command = "everynode " + strings.Join(os.Args[1:], " ")
			return bench.Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&o.Scenarios, "scenarios", o.Scenarios, "Scenarios to run, comma-separated: "+strings.Join(bench.ScenarioNames(), ", ")+".")
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers, `Controllers to run each scenario with, in column order: "upstream" (kube-controller-manager's DaemonSet controller), "everynode", and "floor" (the minimal per-node controller; the churn scenario only). The ratio columns need everynode and the other one.`)
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Client requests a second for both controllers (20 is kube-controller-manager's default); 0 or negative lifts the limit.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Client burst above --kube-api-qps for both controllers (30 is kube-controller-manager's default).")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "Nodes of the create, create-5, rolling and surge scenarios.")
	fs.IntVar(&o.ChurnNodes, "churn-nodes", o.ChurnNodes, "Nodes of the churn scenario before nodes are added.")
	fs.IntVar(&o.ChurnDaemonSets, "churn-daemonsets", o.ChurnDaemonSets, "DaemonSets with a node selector in the churn scenario (with --churn-changes=mixed one more has the NotIn affinity).")
	fs.IntVar(&o.ChurnPools, "churn-pools", o.ChurnPools, "Node pools the churn scenario's DaemonSets select, in turn.")
	fs.StringVar(&o.ChurnChanges, "churn-changes", o.ChurnChanges, `What the churn scenario changes: "moves" (every change a pool move) or "mixed" (1 in 10 a move, the others a tolerated taint or a label the NotIn affinity reads).`)
	fs.IntVar(&o.ChurnRate, "churn-rate", o.ChurnRate, "Node changes a second in the churn scenario.")
	fs.DurationVar(&o.ChurnDuration, "churn-duration", o.ChurnDuration, "How long the churn scenario changes nodes.")
	fs.IntVar(&o.ChurnAddNodes, "churn-add-nodes", o.ChurnAddNodes, "Nodes the churn scenario adds at once after the churn (0: none).")
	fs.IntVar(&o.SteadyNodes, "steady-nodes", o.SteadyNodes, "Nodes of the steady scenario.")
	fs.IntVar(&o.SteadyDaemonSets, "steady-daemonsets", o.SteadyDaemonSets, "DaemonSets (on every node) of the steady scenario.")
	fs.IntVar(&o.SteadyPercent, "steady-flip-percent", o.SteadyPercent, "Percent of the steady scenario's pods made unready, then ready.")
	fs.IntVar(&o.BigNodes, "big-nodes", o.BigNodes, "Nodes of the big-cluster scenario.")
	fs.IntVar(&o.BigPods, "big-pods", o.BigPods, "Pods of no DaemonSet, controlled by a ReplicaSet, the big-cluster scenario runs before the controller starts.")
	fs.IntVar(&o.BigDaemonSets, "big-daemonsets", o.BigDaemonSets, "DaemonSets (on every node) of the big-cluster scenario.")
	fs.IntVar(&o.BurstNodes, "burst-nodes", o.BurstNodes, "Nodes of the burst scenario's settled cluster.")
	fs.IntVar(&o.BurstAdd, "burst-add", o.BurstAdd, "Nodes the burst scenario adds at once.")
	fs.IntVar(&o.FloorPods, "floor-pods", o.FloorPods, "Pods created to measure the API server's pod-create rate on each sandbox.")
	fs.IntVar(&o.FloorParallel, "floor-parallelism", o.FloorParallel, "Creates in flight at once when measuring the pod-create rate.")
	fs.DurationVar(&o.PodReadyDelay, "pod-ready-delay", o.PodReadyDelay, "How long a simulated pod stays Pending before it is Ready (the sandbox's --pod-ready-delay).")
	fs.DurationVar(&o.PodStopDelay, "pod-stop-delay", o.PodStopDelay, "How long a deleted simulated pod lingers (the sandbox's --pod-stop-delay).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "Longest wait for any one convergence before the run fails.")
	fs.StringVar(&o.WorkDir, "work-dir", o.WorkDir, "Directory for the sandboxes' data and logs (default: the system's temporary directory). Removed afterwards unless --keep.")
	fs.BoolVar(&o.Keep, "keep", o.Keep, "Keep the sandboxes' data directories and logs (sandbox.log, logs/, controller-*.log).")
	fs.StringVar(&o.ProfileDir, "profile-dir", o.ProfileDir, "Save CPU profiles of everynode's controller, and of the floor's, over each scenario run to this directory, in consecutive 10 s chunks (<scenario>-<controller>-NNN.pprof; `go tool pprof` merges them), and a heap profile at the end of each run (<scenario>-<controller>-heap.pprof). Upstream's is not profiled.")
	fs.StringArrayVar(&o.EveryNodeArgs, "everynode-arg", o.EveryNodeArgs, "A flag added to everynode's controller command line (repeat for more), to try its settings: --everynode-arg=--sync-batch-period=50ms. The line above the table names them.")
	fs.BoolVar(&o.ByResource, "by-resource", o.ByResource, "Also print the measured phase's API requests by verb and resource.")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "Run each scenario this many times per controller, the controllers taking turns (in reverse order every other round); the table shows each measure's median, the JSON every run. Each run's sandbox differs in speed from the last: on a small machine one round cannot tell controllers apart by less than that.")
	fs.StringVar(&o.JSONPath, "json", o.JSONPath, "Also write the results to this file as JSON (raw values: seconds, bytes, counts; each unit named), for scripts that compare runs.")
	cmd.AddCommand(newBenchModelCommand())
	return cmd
}
