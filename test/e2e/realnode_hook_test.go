package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/everynode/everynode/charts"
	"github.com/everynode/everynode/internal/chart"
	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/realnode"
)

// helmHook is the annotation that makes an object of a chart a Helm hook.
const helmHook = "helm.sh/hook"

// checkRolloutStatusHook installs the chart as the release of an application's
// own DaemonSet would take it as a dependency — controller.enabled false,
// rolloutStatusHook on for DaemonSet agent in ns — and runs its hook as Helm runs a
// post-upgrade hook: the release's objects applied first, then the hook Job, waited
// for until it completes or fails. The Job, in everynode's image on the real node
// with its own read-only ServiceAccount, must succeed only once the rollout it
// waits for is complete, and fail when the rollout cannot finish within its
// timeout.
func checkRolloutStatusHook(t *testing.T, rn *realNodeSandbox, ns string) {
	t.Helper()
	client, ctx := rn.client, context.Background()

	// An upgrade: a new template, and the hook run after it.
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV1 })
	job := runRolloutStatusHook(t, rn, ns, "2m")
	if !jobFinished(job, batch.JobComplete) {
		t.Fatalf("the hook Job failed on a rollout that can finish: %s", jobLogs(t, client, ns))
	}
	ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := ds.Status; st.ObservedGeneration < ds.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberAvailable != st.DesiredNumberScheduled {
		t.Errorf("the hook Job completed with daemonset/agent at generation %d, observed %d, %d of %d updated, %d available: before its rollout was complete",
			ds.Generation, st.ObservedGeneration, st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberAvailable)
	}
	if logs := jobLogs(t, client, ns); !strings.Contains(logs, `daemonset "agent" successfully rolled out`) {
		t.Errorf("the hook Job's log does not say the rollout finished:\n%s", logs)
	}

	// An upgrade whose rollout cannot finish (paused): the hook fails at its timeout.
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Annotations[daemon.AnnotationPaused] = "true"
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
	})
	job = runRolloutStatusHook(t, rn, ns, "10s")
	logs := jobLogs(t, client, ns)
	if !jobFinished(job, batch.JobFailed) || !strings.Contains(logs, "timed out after 10s waiting for the rollout of daemonset/agent") {
		t.Errorf("on a paused rollout the hook Job ended %v, want Failed with a timeout in its log:\n%s", job.Status.Conditions, logs)
	}
	t.Logf("hook Job on a paused rollout: %s", strings.TrimSpace(logs))
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { delete(ds.Annotations, daemon.AnnotationPaused) })
}

// runRolloutStatusHook renders the chart with the hook for DaemonSet agent in ns,
// applies the release's objects, deletes the previous hook Job (the hook's
// before-hook-creation policy), creates the new one and returns it once it has
// finished.
func runRolloutStatusHook(t *testing.T, rn *realNodeSandbox, ns, timeout string) *batch.Job {
	t.Helper()
	client, ctx := rn.client, context.Background()
	c, err := chart.Load(charts.Everynode())
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Render(c, "app", ns, map[string]any{
		"controller":        map[string]any{"enabled": false},
		"rolloutStatusHook": map[string]any{"enabled": true, "daemonSets": []any{"agent"}, "timeout": timeout},
		"image":             map[string]any{"repository": realnode.ControllerRepository, "pullPolicy": string(v1.PullNever)},
		"nodeSelector":      map[string]any{realnode.LabelReal: "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var release, hooks []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAnnotations()[helmHook] != "" {
			hooks = append(hooks, o)
		} else {
			release = append(release, o)
		}
	}
	if len(hooks) != 1 || hooks[0].GetKind() != "Job" || hooks[0].GetAnnotations()[helmHook] != "post-install,post-upgrade" {
		t.Fatalf("the chart's hooks are %v, want one post-install,post-upgrade Job", hooks)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", rn.kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := chart.Apply(ctx, restCfg, ns, release); err != nil {
		t.Fatalf("applying the release: %v", err)
	}
	name := hooks[0].GetName()
	propagation := metav1.DeletePropagationForeground
	_ = client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &propagation})
	realWait(t, "the previous hook Job to be gone", func(ctx context.Context) (bool, error) {
		_, err := client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err := chart.Apply(ctx, restCfg, ns, hooks); err != nil {
		t.Fatalf("creating the hook Job: %v", err)
	}
	var job *batch.Job
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		job, err = client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return jobFinished(job, batch.JobComplete) || jobFinished(job, batch.JobFailed), nil
	})
	if err != nil {
		pods, _ := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: hookPods})
		var states []string
		for _, p := range pods.Items {
			states = append(states, fmt.Sprintf("%s on %q: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses))
		}
		t.Fatalf("hook Job %s did not finish: %v; its pods: %v", name, err, states)
	}
	return job
}

// hookPods selects the hook Job's pods.
const hookPods = "app.kubernetes.io/name=everynode-rollout-status"

func jobFinished(job *batch.Job, as batch.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == as && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobLogs is the log of the hook Job's pod in ns.
func jobLogs(t *testing.T, client kubernetes.Interface, ns string) string {
	t.Helper()
	ctx := context.Background()
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: hookPods})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the hook Job's pods: %d, %v; want 1", len(pods.Items), err)
	}
	logs, err := client.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(logs)
}
