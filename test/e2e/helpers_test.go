package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/nodesim"
)

const (
	pollInterval = 100 * time.Millisecond
	waitTimeout  = 90 * time.Second
)

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := "e2e-" + strings.ToLower(rand.String(6))
	ctx := context.Background()
	if _, err := env.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	// The ServiceAccount admission plugin refuses pods until "default" exists.
	waitFor(t, "the default service account", func(ctx context.Context) (bool, error) {
		_, err := env.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// newNodes adds simulated nodes with the given labels (plus a test label) and removes
// them after the test. They are Ready once the node lifecycle controller lifts the
// not-ready taint.
func newNodes(t *testing.T, n int, labels map[string]string) []string {
	t.Helper()
	sets := make([]map[string]string, n)
	for i := range sets {
		sets[i] = labels
	}
	return newNodesLabelled(t, sets)
}

// waitNodesReady waits until at least n nodes are Ready with no not-ready taint.
func waitNodesReady(ctx context.Context, n int) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range nodes.Items {
			if nodesim.Usable(&nodes.Items[i]) {
				ready++
			}
		}
		return ready >= n, nil
	})
}

func waitFor(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), pollInterval, waitTimeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// daemonSet is a minimal DaemonSet running a pause-like container on nodes with
// nodeLabel=value (every node when nodeLabel is empty).
func daemonSet(ns, name string, selector map[string]string) *apps.DaemonSet {
	labels := map[string]string{"app": name}
	return &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector:                  selector,
					TerminationGracePeriodSeconds: new(int64),
					Containers: []v1.Container{{
						Name:  "agent",
						Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
							v1.ResourceCPU: resource.MustParse("10m"),
						}},
					}},
				},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{
				Type:          apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: ptrIntOrString(intstr.FromInt32(1))},
			},
		},
	}
}

func ptrIntOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }

// sideBySide runs run once per name, as parallel subtests, and returns what each
// returned once all are done (a subtest that failed leaves its name out).
func sideBySide[T any](t *testing.T, names []string, run func(t *testing.T, name string) T) map[string]T {
	t.Helper()
	var mu sync.Mutex
	out := map[string]T{}
	t.Run("side-by-side", func(t *testing.T) {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				v := run(t, name)
				mu.Lock()
				defer mu.Unlock()
				out[name] = v
			})
		}
	})
	return out
}

func createDaemonSet(t *testing.T, ds *apps.DaemonSet) *apps.DaemonSet {
	t.Helper()
	out, err := env.client.AppsV1().DaemonSets(ds.Namespace).Create(context.Background(), ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating DaemonSet: %v", err)
	}
	return out
}

// updateDaemonSet applies change to the current DaemonSet, retrying on conflicts.
func updateDaemonSet(t *testing.T, ns, name string, change func(*apps.DaemonSet)) {
	t.Helper()
	waitFor(t, "the DaemonSet update", func(ctx context.Context) (bool, error) {
		ds, err := env.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(ds)
		_, err = env.client.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// daemonPods lists the DaemonSet's pods, grouped by the node they are pinned to.
func daemonPods(ctx context.Context, ns, name string) (map[string][]v1.Pod, error) {
	pods, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, err
	}
	byNode := map[string][]v1.Pod{}
	for _, pod := range pods.Items {
		byNode[targetNode(&pod)] = append(byNode[targetNode(&pod)], pod)
	}
	return byNode, nil
}

func targetNode(pod *v1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}

// waitRolledOut waits until the DaemonSet's status says every desired node runs an
// available pod of the current template, as `kubectl rollout status` judges it, with
// desired pods in all.
func waitRolledOut(t *testing.T, ns, name string, desired int32) *apps.DaemonSet {
	t.Helper()
	var ds *apps.DaemonSet
	waitFor(t, fmt.Sprintf("%s/%s rolled out on %d nodes", ns, name, desired), func(ctx context.Context) (bool, error) {
		var err error
		ds, err = env.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := ds.Status
		return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled == desired &&
			s.UpdatedNumberScheduled == desired && s.NumberAvailable == desired && s.CurrentNumberScheduled == desired, nil
	})
	return ds
}

// kubectl runs everynode's built-in kubectl against the sandbox.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.binary, append([]string{"kubectl"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// counts are the pod counts of a DaemonSet's status; unavailable is implied
// (desired - available).
type counts struct {
	desired, current, ready, available, updated, misscheduled int32
}

func statusCounts(s apps.DaemonSetStatus) counts {
	return counts{s.DesiredNumberScheduled, s.CurrentNumberScheduled, s.NumberReady, s.NumberAvailable, s.UpdatedNumberScheduled, s.NumberMisscheduled}
}

// waitStatus waits until the DaemonSet's status, for its current generation, holds
// exactly the given counts.
func waitStatus(t *testing.T, ns, name string, want counts) *apps.DaemonSet {
	t.Helper()
	var ds *apps.DaemonSet
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := env.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ds = got
		s := ds.Status
		return s.ObservedGeneration >= ds.Generation && statusCounts(s) == want &&
			s.NumberUnavailable == want.desired-want.available, nil
	})
	if err != nil {
		got := "none"
		if ds != nil {
			got = fmt.Sprintf("%+v (unavailable %d, observed generation %d of %d)", statusCounts(ds.Status), ds.Status.NumberUnavailable, ds.Status.ObservedGeneration, ds.Generation)
		}
		t.Fatalf("waiting for %s/%s status %+v: %v; last status %s", ns, name, want, err, got)
	}
	return ds
}

// consistently checks cond for d and fails the test the first time it is false.
func consistently(t *testing.T, what string, d time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		ok, err := cond(ctx)
		if err != nil {
			t.Fatalf("checking that %s: %v", what, err)
		}
		if !ok {
			t.Fatalf("expected %s for %v, but it stopped being so", what, d)
		}
	}
}

// mustDaemonPods is daemonPods for the test's own goroutine.
func mustDaemonPods(t *testing.T, ns, name string) map[string][]v1.Pod {
	t.Helper()
	byNode, err := daemonPods(context.Background(), ns, name)
	if err != nil {
		t.Fatalf("listing pods of %s/%s: %v", ns, name, err)
	}
	return byNode
}

// onePodPerNode returns the UID of the single pod on each node, failing the test
// if a node holds more than one.
func onePodPerNode(t *testing.T, byNode map[string][]v1.Pod) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for node, pods := range byNode {
		if len(pods) != 1 {
			t.Fatalf("node %q has pods %v, want one", node, podNames(map[string][]v1.Pod{node: pods})[node])
		}
		out[node] = pods[0].UID
	}
	return out
}

// samePods reports whether the DaemonSet's pods are exactly the given ones, one per node.
func samePods(ns, name string, want map[string]types.UID) func(context.Context) (bool, error) {
	return podsKept(ns, name, want, true)
}

// keepsPods reports whether each node of held still has exactly its pod, not
// being deleted; other nodes may change.
func keepsPods(ns, name string, held map[string]types.UID) func(context.Context) (bool, error) {
	return podsKept(ns, name, held, false)
}

func podsKept(ns, name string, want map[string]types.UID, only bool) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, name)
		if err != nil {
			return false, err
		}
		if only && len(byNode) != len(want) {
			return false, nil
		}
		for node, uid := range want {
			if pods := byNode[node]; len(pods) != 1 || pods[0].UID != uid || pods[0].DeletionTimestamp != nil {
				return false, nil
			}
		}
		return true, nil
	}
}

// revisionHashes maps each ControllerRevision of the DaemonSet to its hash label.
func revisionHashes(t *testing.T, ns, name string) map[int64]string {
	t.Helper()
	list, err := env.client.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing ControllerRevisions: %v", err)
	}
	out := map[int64]string{}
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.Kind == "DaemonSet" && ref.Name == name {
			out[r.Revision] = r.Labels[apps.ControllerRevisionHashLabelKey]
		}
	}
	return out
}

// waitRevisionHash waits for the DaemonSet's ControllerRevision with the given
// revision number and returns its hash.
func waitRevisionHash(t *testing.T, ns, name string, revision int64) string {
	t.Helper()
	var hash string
	waitFor(t, fmt.Sprintf("ControllerRevision %d of %s", revision, name), func(context.Context) (bool, error) {
		hash = revisionHashes(t, ns, name)[revision]
		return hash != "", nil
	})
	return hash
}

// waitEvent waits for an event of the given reason about the DaemonSet and returns it.
func waitEvent(t *testing.T, ns, name, reason string) v1.Event {
	t.Helper()
	return waitEventOf(t, env.client, ns, name, reason)
}

// waitEventOf is waitEvent in the cluster of client.
func waitEventOf(t *testing.T, client kubernetes.Interface, ns, name, reason string) v1.Event {
	t.Helper()
	var found v1.Event
	waitFor(t, fmt.Sprintf("a %s event on %s", reason, name), func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=DaemonSet,involvedObject.name=" + name + ",reason=" + reason,
		})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		found = list.Items[0]
		return true, nil
	})
	return found
}

// nodeHasTaints reports whether the node carries every taint (key and effect).
func nodeHasTaints(node *v1.Node, taints ...v1.Taint) bool {
	for _, want := range taints {
		found := false
		for _, got := range node.Spec.Taints {
			found = found || (got.Key == want.Key && got.Effect == want.Effect)
		}
		if !found {
			return false
		}
	}
	return true
}

// waitNodeTaints waits until the node carries every taint, or none of them when
// present is false.
func waitNodeTaints(t *testing.T, name string, present bool, taints ...v1.Taint) {
	t.Helper()
	waitFor(t, fmt.Sprintf("node %s taints %v present=%t", name, taints, present), func(ctx context.Context) (bool, error) {
		node, err := env.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if present {
			return nodeHasTaints(node, taints...), nil
		}
		for _, want := range taints {
			if nodeHasTaints(node, want) {
				return false, nil
			}
		}
		return true, nil
	})
}
