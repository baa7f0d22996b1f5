package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/inspect"
	"github.com/everynode/everynode/internal/sandboxpath"
)

// clusterFlags are --kubeconfig, --context and -n of the commands that talk to a
// cluster. The kubeconfig is found as `everynode kubectl` finds it.
type clusterFlags struct{ inspect.Cluster }

func (f *clusterFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else the sandbox's in .everynode/sandbox or $EVERYNODE_DATA_DIR, else ~/.kube/config)")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context to use (default: its current context)")
	fs.StringVarP(&f.Namespace, "namespace", "n", "", "namespace of the DaemonSet (default: the context's, else default)")
}

func (f *clusterFlags) connect() (kubernetes.Interface, string, error) {
	f.Fallback = sandboxpath.FallbackKubeconfig()
	return f.Connect()
}

func newRolloutCommand() *cobra.Command {
	var cluster clusterFlags
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and steer a DaemonSet's rolling update",
		Long: `Follow and steer the rolling update of a DaemonSet that everynode controls.

The rollout.everynode.dev/ annotations shape a RollingUpdate (see docs/rollouts.md):
paused, partition, canary, waves, wave-order, wave-pause, new-nodes,
progress-deadline, max-restarts, on-failure and sick-nodes. These commands set and clear them
for you, and report the Progressing condition the controller keeps; plan estimates,
without changing anything, how a rollout will go.`,
	}
	cluster.add(cmd.PersistentFlags())
	cmd.AddCommand(newRolloutStatusCommand(&cluster), newRolloutPauseCommand(&cluster), newRolloutResumeCommand(&cluster),
		newRolloutPromoteCommand(&cluster), newRolloutUndoCommand(&cluster), newRolloutPlanCommand(&cluster))
	return cmd
}

// simpleRolloutCommand is a rollout verb that changes a DaemonSet and prints what it did.
func simpleRolloutCommand(cluster *clusterFlags, use, short, long string,
	do func(ctx context.Context, client kubernetes.Interface, ns, name string) (string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use + " DAEMONSET",
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := daemonSetArg(args[0])
			if err != nil {
				return err
			}
			client, ns, err := cluster.connect()
			if err != nil {
				return err
			}
			msg, err := do(cmd.Context(), client, ns, name)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
}

func newRolloutPauseCommand(cluster *clusterFlags) *cobra.Command {
	return simpleRolloutCommand(cluster, "pause", "Stop updating nodes",
		`Pause a DaemonSet's rollout: set rollout.everynode.dev/paused="true".

While paused no node is updated: no old pod is deleted for the update and no surge
pod is created. Placement goes on: a node that joins still gets a pod. The
Progressing condition reads Unknown/Paused. Undo it with `+"`everynode rollout resume`.",
		inspect.Pause)
}

func newRolloutResumeCommand(cluster *clusterFlags) *cobra.Command {
	return simpleRolloutCommand(cluster, "resume", "Go on with a paused or failed rollout",
		`Resume a DaemonSet's rollout: remove rollout.everynode.dev/paused, and remove the
rollout.everynode.dev/failed mark from the ControllerRevisions the DaemonSet
controls.

A rollout that failed (its progress deadline passed or a pod restarted more than
max-restarts times) holds every node until this runs or the template changes; after
it, the failed revision is tried again and the progress deadline counts afresh.`,
		inspect.Resume)
}

func newRolloutPromoteCommand(cluster *clusterFlags) *cobra.Command {
	return simpleRolloutCommand(cluster, "promote", "Update the nodes a canary or partition holds back",
		`Promote a DaemonSet's rollout: remove rollout.everynode.dev/canary and
rollout.everynode.dev/partition, so that the current revision rolls out to every
node (still within maxUnavailable/maxSurge, and wave by wave when the DaemonSet has
rollout.everynode.dev/waves).`,
		inspect.Promote)
}

func newRolloutUndoCommand(cluster *clusterFlags) *cobra.Command {
	var to int64
	cmd := simpleRolloutCommand(cluster, "undo", "Roll back to an earlier revision",
		`Roll a DaemonSet back to an earlier revision, as `+"`kubectl rollout undo`"+` does (it
is kubectl's own code): the revision's pod template is patched back into the
DaemonSet, which then rolls out like any template change.

Without --to-revision it goes back to the revision before the current one. List the
revisions with `+"`everynode kubectl rollout history daemonset/NAME`.",
		func(ctx context.Context, client kubernetes.Interface, ns, name string) (string, error) {
			return inspect.Undo(ctx, client, ns, name, to)
		})
	cmd.Flags().Int64Var(&to, "to-revision", 0, "the revision to roll back to (0: the one before the current)")
	return cmd
}

func newRolloutStatusCommand(cluster *clusterFlags) *cobra.Command {
	o := inspect.StatusOptions{Watch: true}
	cmd := &cobra.Command{
		Use:   "status DAEMONSET",
		Short: "Watch a rollout until it completes",
		Long: `Watch a DaemonSet's rollout until every node that should run its pod runs an
available pod of the current template (the controller having seen the latest
generation), with its updated/available/desired counts, the Progressing
condition's reason and message and, when the DaemonSet has
rollout.everynode.dev/waves, the counts of each wave. On a terminal the progress
is redrawn in place; elsewhere a line is printed per change.

Exits 0 once the rollout is complete. Exits non-zero with a one-line error when
the Progressing condition turns False (the rollout failed, was rolled back, or an
annotation is invalid), when --timeout passes, or when the DaemonSet is deleted.
A paused rollout, or one held by a canary or partition, is waited for.
With --watch=false it prints the progress once and exits (non-zero only for a
failed rollout).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := daemonSetArg(args[0])
			if err != nil {
				return err
			}
			client, ns, err := cluster.connect()
			if err != nil {
				return err
			}
			o.Out = cmd.OutOrStdout()
			if f, ok := o.Out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				o.Terminal = true
				if w, _, err := term.GetSize(int(f.Fd())); err == nil {
					o.Width = w
				}
			}
			return inspect.Status(cmd.Context(), client, ns, name, o)
		},
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", true, "watch until the rollout completes; false prints its progress once")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "give up after this long, such as 10m (0: wait for ever)")
	return cmd
}
