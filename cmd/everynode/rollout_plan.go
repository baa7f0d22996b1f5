package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/inspect"
	"github.com/everynode/everynode/internal/rolloutplan"
)

// rolloutPlanFlags are the flags of `everynode rollout plan`.
type rolloutPlanFlags struct {
	file     string
	output   string
	podStart time.Duration
	maxTime  time.Duration
}

func newRolloutPlanCommand(cluster *clusterFlags) *cobra.Command {
	var f rolloutPlanFlags
	cmd := &cobra.Command{
		Use:   "plan [DAEMONSET] [-f MANIFEST]",
		Short: "Estimate, without changing anything, how a rollout will go",
		Long: `Plan a DaemonSet's rollout without changing anything: a dry run of the controller's
own rollout rules on a simulated timeline, starting from the DaemonSet, nodes, pods and
ControllerRevisions the cluster holds now.

With -f, the rollout of the manifest's DaemonSet (YAML or JSON, as you would apply it):
its template, update strategy, minReadySeconds and annotations, with the API server's
defaults, over the cluster's DaemonSet of that name. Annotations the manifest does not
name are kept. Without -f, the rollout already pending: the current template over the
pods that run older revisions.

It prints the schedule: the moments nodes begin their update and which nodes, the wave
of each step under rollout.everynode.dev/waves, what the rollout waits for between
steps (new pods to become available, the min-healthy bake, the wave pause), and how it
ends: complete, with the estimated duration; held for something only a person ends
(paused, partition, canary), with the command that goes on; or failed (a progress
deadline shorter than the pods take). -o json prints the same schedule as data.

It is an estimate: every pod is taken to be Ready --pod-start after it is created and
to stay healthy, deleted pods to be gone at once, and nothing else to change. It only
reads the cluster (get and list); with -f it also sends the manifest as a dry-run
update, which stores nothing: the API server checks it and fills in its defaults.`,
		Example: `  everynode rollout plan node-agent
  everynode rollout plan -f node-agent.yaml --pod-start 20s
  everynode rollout plan node-agent -f release.yaml -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				var err error
				if name, err = daemonSetArg(args[0]); err != nil {
					return err
				}
			}
			if err := f.check(name); err != nil {
				return err
			}
			var manifest []byte
			if f.file != "" {
				var err error
				if manifest, err = readFile(f.file, cmd.InOrStdin()); err != nil {
					return err
				}
			}
			client, ns, err := cluster.connect()
			if err != nil {
				return err
			}
			s, err := planRollout(cmd.Context(), client, planTarget{ns: ns, nsGiven: cluster.Namespace != "", name: name,
				file: f.file, manifest: manifest}, f.options(time.Now()))
			if err != nil {
				return err
			}
			if f.output == "json" {
				return s.WriteJSON(cmd.OutOrStdout())
			}
			return s.WriteTable(cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "filename", "f", "", "a DaemonSet manifest (YAML or JSON; - for stdin) whose rollout to plan")
	fs.StringVarP(&f.output, "output", "o", "", "output format: json (default: a table)")
	fs.DurationVar(&f.podStart, "pod-start", rolloutplan.DefaultPodStart, "how long a new pod takes from its creation to Ready")
	fs.DurationVar(&f.maxTime, "max-time", 7*24*time.Hour, "stop following the rollout after this much simulated time")
	return cmd
}

// check says what is wrong with the flags, and how to fix it.
func (f *rolloutPlanFlags) check(name string) error {
	switch {
	case f.output != "" && f.output != "json":
		return fmt.Errorf("unknown output format %q: use -o json, or no -o for a table", f.output)
	case name == "" && f.file == "":
		return fmt.Errorf("name the DaemonSet, `everynode rollout plan NAME`, or give its new manifest with -f FILE")
	case f.maxTime <= 0:
		return fmt.Errorf("--max-time %v: give a positive duration such as 24h", f.maxTime)
	}
	o := f.options(time.Time{})
	return o.Validate()
}

func (f *rolloutPlanFlags) options(now time.Time) rolloutplan.Options {
	return rolloutplan.Options{Start: now, PodStart: f.podStart, MaxDuration: f.maxTime}
}

func readFile(path string, stdin io.Reader) ([]byte, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest: %v; give -f the path of a DaemonSet manifest", err)
	}
	return data, nil
}

// planTarget is the DaemonSet to plan: named, or given by a manifest, or both.
type planTarget struct {
	ns       string
	nsGiven  bool // -n was given: it wins over the context's namespace, and must agree with the manifest's
	name     string
	file     string
	manifest []byte
}

// planRollout reads the cluster (get and list; a dry-run update for a manifest) and
// plans the rollout.
func planRollout(ctx context.Context, client kubernetes.Interface, t planTarget, o rolloutplan.Options) (*rolloutplan.Schedule, error) {
	var m *apps.DaemonSet
	if t.manifest != nil {
		var err error
		if m, err = rolloutplan.ReadManifest(t.manifest, t.name); err != nil {
			return nil, fmt.Errorf("%s: %w", t.file, err)
		}
		if t.name == "" {
			t.name = m.Name
		}
		if t.name == "" {
			return nil, fmt.Errorf("%s: its DaemonSet has no metadata.name: add it, or name the DaemonSet, `everynode rollout plan NAME -f %s`", t.file, t.file)
		}
		if m.Namespace != "" && !t.nsGiven {
			t.ns = m.Namespace
		}
	}
	ds, err := inspect.GetDaemonSet(ctx, client, t.ns, t.name)
	if err != nil {
		return nil, err
	}
	if ds.DeletionTimestamp != nil {
		return nil, fmt.Errorf("DaemonSet %s/%s is being deleted: there is no rollout to plan", t.ns, t.name)
	}
	s, err := inspect.Gather(ctx, client, ds, o.Start)
	if err != nil {
		return nil, err
	}
	if m != nil {
		if ds, err = rolloutplan.WithManifest(ds, m); err != nil {
			return nil, fmt.Errorf("%s: %w", t.file, err)
		}
		// The API server fills in its defaults, and checks the manifest, in a dry
		// run: nothing is stored.
		if ds, err = client.AppsV1().DaemonSets(ds.Namespace).Update(ctx, ds, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			if apierrors.IsForbidden(err) {
				return nil, fmt.Errorf("%s: planning a manifest has the API server check it in a dry run, which needs permission to update DaemonSets: %v", t.file, err)
			}
			return nil, fmt.Errorf("%s: the API server refuses it (dry run, nothing stored): %v", t.file, err)
		}
	}
	return rolloutplan.Plan(rolloutplan.Input{DaemonSet: ds, Nodes: s.Nodes, Pods: s.Pods, Revisions: s.Revisions}, o)
}
