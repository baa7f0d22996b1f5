package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/everynode/everynode/internal/realnode"
)

// TestRealNodeKubelet runs, on a real node (a kubelet and a containerd), the
// scenarios whose outcome the kubelet decides: a rolling update, releases that fail
// for each reason a container can (its image cannot be pulled, it crash-loops, it is
// killed for memory) rolled back by the rollout's failure rules, a readiness probe
// holding a pod un-Ready, and deletion honouring terminationGracePeriodSeconds.
func TestRealNodeKubelet(t *testing.T) {
	realNodesWanted(t)
	rn := newRealNodeSandbox(t, []string{"sandbox", "--nodes", "1", "--real-nodes", "1"})
	rn.start(t)
	client := rn.client

	t.Run("a rolling update replaces the pod", func(t *testing.T) {
		ns := realNamespace(t, client)
		createAgent(t, client, agentDaemonSet(ns, "agent", nil))
		old := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0)
		setAgent(t, client, ns, "agent", func(c *v1.Container) { c.Image = realnode.AgentImage2 })
		pod := waitAgentPod(t, client, ns, "agent", realnode.AgentImage2, 0)
		if pod.UID == old.UID {
			t.Fatalf("the rolling update kept pod %s", old.UID)
		}
		waitAgentRolledOut(t, client, ns, "agent")
	})

	t.Run("a pod reaches the API server as in a cluster", func(t *testing.T) {
		ns := realNamespace(t, client)
		ds := agentDaemonSet(ns, "client", nil)
		ds.Spec.Template.Spec.Containers[0].ReadinessProbe = &v1.Probe{
			ProbeHandler:   v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/everynode-agent", "probe-api"}}},
			PeriodSeconds:  1,
			TimeoutSeconds: 5,
		}
		createAgent(t, client, ds)
		// Ready only once its probe, an in-cluster client with the pod's service
		// account, has had the API server's answer.
		waitAgentPod(t, client, ns, "client", realnode.AgentImage1, 0)
	})

	t.Run("an in-place resize reaches the container's cgroup", func(t *testing.T) {
		ns := realNamespace(t, client)
		ds := agentDaemonSet(ns, "agent", map[string]string{annInPlace: "true"})
		ds.Spec.Template.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}
		createAgent(t, client, ds)
		before := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0)
		if quota, limit := containerCgroup(t, rn.port, before); quota != "10000" || limit != "67108864" {
			t.Fatalf("before the resize the container's cgroup has CPU quota %s and memory limit %s; want 10000 (100m) and 67108864 (64Mi)", quota, limit)
		}
		setAgent(t, client, ns, "agent", func(c *v1.Container) {
			c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("96Mi")}
		})
		// The Progressing condition, not the status counters, waits for the resize.
		waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
		after := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0)
		if after.UID != before.UID || after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
			t.Fatalf("the resize replaced the pod or its container")
		}
		if r := after.Status.ContainerStatuses[0].Resources; r == nil || !r.Limits.Cpu().Equal(resource.MustParse("200m")) || !r.Limits.Memory().Equal(resource.MustParse("96Mi")) {
			t.Fatalf("the container's status reports resources %v; want limits of 200m CPU and 96Mi", r)
		}
		if quota, limit := containerCgroup(t, rn.port, after); quota != "20000" || limit != "100663296" {
			t.Fatalf("after the resize the container's cgroup has CPU quota %s and memory limit %s; want 20000 (200m) and 100663296 (96Mi)", quota, limit)
		}
	})

	t.Run("a resize the kubelet defers shows in explain", func(t *testing.T) {
		ns := realNamespace(t, client)
		ds := agentDaemonSet(ns, "agent", map[string]string{annInPlace: "true"})
		ds.Spec.Template.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
		}
		createAgent(t, client, ds)
		before := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0)
		// A pod that takes most of the node's CPU: a resize to a whole CPU fits the
		// node, which the API server checks, but not beside it, which the kubelet does.
		node, err := client.CoreV1().Nodes().Get(context.Background(), realnode.NodeName(1), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hogCPU := node.Status.Allocatable.Cpu().DeepCopy()
		hogCPU.Sub(resource.MustParse("600m"))
		hog := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hog"},
			Spec: v1.PodSpec{
				NodeName:                      realnode.NodeName(1),
				TerminationGracePeriodSeconds: new(int64),
				Containers: []v1.Container{{Name: "hog", Image: realnode.AgentImage1, ImagePullPolicy: v1.PullNever,
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: hogCPU}}}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(context.Background(), hog, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		realWait(t, "the hog to run", func(ctx context.Context) (bool, error) {
			p, err := client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
			return err == nil && p.Status.Phase == v1.PodRunning, nil
		})
		setAgent(t, client, ns, "agent", func(c *v1.Container) {
			c.Resources = v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			}
		})
		realWait(t, "explain to show the deferred resize", func(ctx context.Context) (bool, error) {
			out, err := exec.CommandContext(ctx, env.binary, "explain", "-n", ns, "agent", "--kubeconfig", rn.kubeconfig()).CombinedOutput()
			return err == nil && strings.Contains(string(out), "which it holds back (PodResizePending"), nil
		})
		pod, err := client.CoreV1().Pods(ns).Get(context.Background(), before.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := podCondition(*pod, v1.PodResizePending); c.Reason != v1.PodReasonDeferred {
			t.Fatalf("the pod's PodResizePending condition is %+v; want Deferred", c)
		}
		// With room made, the kubelet resizes the pod, and the rollout ends. (The
		// status counters, as kube-controller-manager counts them, call the pod
		// updated and available all along: only the Progressing condition, which
		// waits for the resize, says when the rollout is done.)
		if err := client.CoreV1().Pods(ns).Delete(context.Background(), "hog", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
		after, err := client.CoreV1().Pods(ns).Get(context.Background(), before.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := after.Status.ContainerStatuses[0].Resources; after.UID != before.UID || r == nil || !r.Requests.Cpu().Equal(resource.MustParse("1")) {
			t.Fatalf("after the hog went and the rollout ended, pod %s (was %s) reports resources %v; want the same pod with 1 CPU", after.UID, before.UID, r)
		}
	})

	t.Run("failing releases are rolled back", func(t *testing.T) {
		// The bake (min-healthy) is longer than a crashing container's run plus the
		// second or two the kubelet takes to report its exit: a shorter one can be
		// passed on a status that does not show the crash yet.
		for _, tc := range []struct {
			name    string
			change  func(*v1.Container)
			reasons []string // the failure's reason, one of them
			words   []string // in the failure's message, one of them
		}{
			{"an image that was never imported", func(c *v1.Container) {
				c.Image, c.ImagePullPolicy = "everynode.local/agent:missing", v1.PullIfNotPresent
			}, []string{"PodContainerFailing"}, []string{"ErrImagePull", "ImagePullBackOff"}},
			{"a crash-looping container", func(c *v1.Container) {
				c.Image = realnode.AgentImage2
				c.Env = []v1.EnvVar{{Name: "AGENT_EXIT_AFTER", Value: "1s"}, {Name: "AGENT_EXIT_CODE", Value: "3"}}
			}, []string{"PodContainerFailing", "PodRestartLimitExceeded"}, []string{"CrashLoopBackOff", "restarted"}},
			{"a container killed for memory", func(c *v1.Container) {
				c.Image = realnode.AgentImage2
				c.Env = []v1.EnvVar{{Name: "AGENT_ALLOC_MB", Value: "8"}}
				limit := v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
				c.Resources.Limits, c.Resources.Requests = limit, v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("32Mi")}
			}, []string{"PodContainerFailing"}, []string{"OOMKilled"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ns := realNamespace(t, client)
				createAgent(t, client, agentDaemonSet(ns, "agent", map[string]string{annMaxRestarts: "2", annOnFailure: "rollback", annMinHealthy: "5s"}))
				first := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0)
				waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
				log := watchProgressing(t, client, ns, "agent")
				setAgent(t, client, ns, "agent", tc.change)
				failed := waitProgressing(t, client, ns, "agent", v1.ConditionFalse, "RolledBack")
				if !containsAny(failed.Message, tc.reasons) || !containsAny(failed.Message, tc.words) {
					t.Errorf("the rollback's message %q names none of %q, or none of %q", failed.Message, tc.reasons, tc.words)
				}
				back := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0)
				if back.UID == first.UID {
					t.Errorf("the failed release never replaced pod %s", first.UID)
				}
				waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
				log.caughtUp("True/NewRevisionAvailable")
				// The failure and the rollback are one decision: the condition goes from
				// the rollout straight to RolledBack, whose message names the failure.
				seen := log.stop()
				if want := []string{"True/RollingOut", "False/RolledBack", "True/NewRevisionAvailable"}; len(seen) < 3 || !slices.Equal(seen[len(seen)-3:], want) {
					t.Errorf("the Progressing condition went %v; want it to end %v", seen, want)
				}
				t.Logf("Progressing: %v; rollback message: %s", seen, failed.Message)
			})
		}
	})

	t.Run("a readiness probe holds the pod un-Ready", func(t *testing.T) {
		ns := realNamespace(t, client)
		ds := agentDaemonSet(ns, "probed", nil)
		c := &ds.Spec.Template.Spec.Containers[0]
		c.Args = []string{"--ready-file=/tmp/ready", "--ready-after=6s"}
		c.ReadinessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/everynode-agent", "probe", "/tmp/ready"}}},
			PeriodSeconds: 1,
		}
		createAgent(t, client, ds)
		var running v1.Pod
		realWait(t, "the probed container to run", func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=probed"})
			if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) != 1 {
				return false, err
			}
			running = pods.Items[0]
			return running.Status.ContainerStatuses[0].State.Running != nil, nil
		})
		started := running.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		until := started.Add(5 * time.Second)
		for time.Now().Before(until) {
			pod, err := client.CoreV1().Pods(ns).Get(context.Background(), running.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pod.Status.ContainerStatuses[0].Ready {
				t.Fatalf("the pod turned Ready %v after its container started; its probe fails for 6s", time.Since(started))
			}
			ds, err := client.AppsV1().DaemonSets(ns).Get(context.Background(), "probed", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ds.Status.NumberReady != 0 || ds.Status.NumberAvailable != 0 {
				t.Fatalf("the DaemonSet counts %d ready, %d available while its pod is not Ready", ds.Status.NumberReady, ds.Status.NumberAvailable)
			}
			time.Sleep(250 * time.Millisecond)
		}
		pod := waitAgentPod(t, client, ns, "probed", realnode.AgentImage1, 0)
		if pod.UID != running.UID {
			t.Fatalf("the pod was replaced while not Ready: %s, then %s", running.UID, pod.UID)
		}
		ready := podCondition(pod, v1.PodReady).LastTransitionTime.Time
		if ready.Before(started.Add(6 * time.Second)) {
			t.Errorf("the pod turned Ready at %s, less than 6s after its container started at %s", ready, started)
		}
		waitAgentRolledOut(t, client, ns, "probed")
	})

	t.Run("deletion honours terminationGracePeriodSeconds", func(t *testing.T) {
		for _, tc := range []struct {
			name            string
			stopDelay       string
			grace           int64
			atLeast, within time.Duration
		}{
			{"a container that stops in 3s of 30s", "3s", 30, 3 * time.Second, 25 * time.Second},
			{"a container killed after 2s of its 60s", "60s", 2, 2 * time.Second, 20 * time.Second},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ns := realNamespace(t, client)
				ds := agentDaemonSet(ns, "agent", nil)
				ds.Spec.Template.Spec.TerminationGracePeriodSeconds = &tc.grace
				ds.Spec.Template.Spec.Containers[0].Args = []string{"--stop-delay=" + tc.stopDelay}
				createAgent(t, client, ds)
				pod := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0)
				start := time.Now()
				if err := client.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				realWait(t, "the deleted pod to go", func(ctx context.Context) (bool, error) {
					_, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
					return apierrors.IsNotFound(err), nil
				})
				took := time.Since(start)
				if took < tc.atLeast || took > tc.within {
					t.Errorf("the pod took %v to go; want between %v and %v", took, tc.atLeast, tc.within)
				}
				t.Logf("pod %s gone %v after its deletion", pod.Name, took.Round(100*time.Millisecond))
				if again := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0); again.UID == pod.UID {
					t.Fatalf("the DaemonSet did not replace the deleted pod")
				}
			})
		}
	})
}

// agentDaemonSet is a DaemonSet of the agent image on the real node.
func agentDaemonSet(ns, name string, annotations map[string]string) *apps.DaemonSet {
	ds := daemonSet(ns, name, map[string]string{realnode.LabelReal: "true"})
	ds.Annotations = annotations
	c := &ds.Spec.Template.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = realnode.AgentImage1, v1.PullNever
	return ds
}

func createAgent(t *testing.T, client kubernetes.Interface, ds *apps.DaemonSet) {
	t.Helper()
	if _, err := client.AppsV1().DaemonSets(ds.Namespace).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating DaemonSet %s: %v", ds.Name, err)
	}
}

// setAgent changes the DaemonSet's container, retrying on conflicts.
func setAgent(t *testing.T, client kubernetes.Interface, ns, name string, change func(*v1.Container)) {
	t.Helper()
	setTemplate(t, client, ns, name, func(tpl *v1.PodTemplateSpec) { change(&tpl.Spec.Containers[0]) })
}

// setTemplate changes the pod template of DaemonSet name, reading it again when the
// controller's status write got there first.
func setTemplate(t *testing.T, client kubernetes.Interface, ns, name string, change func(*v1.PodTemplateSpec)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := client.AppsV1().DaemonSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&ds.Spec.Template)
		_, err = client.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating DaemonSet %s: %v", name, err)
	}
}

// waitAgentRolledOut waits until the DaemonSet's status shows its one pod updated
// and available.
func waitAgentRolledOut(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	realWait(t, name+" rolled out", func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := ds.Status
		return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled == 1 && s.UpdatedNumberScheduled == 1 && s.NumberAvailable == 1, nil
	})
}

// realNamespace creates a namespace for one real-node scenario.
func realNamespace(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	ns := "real-" + strings.ToLower(rand.String(6))
	createNamespace(t, client, ns)
	return ns
}

func podCondition(pod v1.Pod, t v1.PodConditionType) v1.PodCondition {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

func containsAny(s string, words []string) bool {
	return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(s, w) })
}

// containerCgroup reads the CPU quota and memory limit of the pod's one container
// from its cgroups on the real node.
func containerCgroup(t *testing.T, port int, pod v1.Pod) (quota, limit string) {
	t.Helper()
	_, id, _ := strings.Cut(pod.Status.ContainerStatuses[0].ContainerID, "://")
	rel := filepath.Join("everynode", fmt.Sprint(port), realnode.NodeName(1), "kubepods", strings.ToLower(string(pod.Status.QOSClass)), "pod"+string(pod.UID), id)
	read := func(hierarchy, file string) string {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", hierarchy, rel, file))
		if err != nil {
			t.Fatalf("reading the container's cgroup: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
	return read("cpu", "cpu.cfs_quota_us"), read("memory", "memory.limit_in_bytes")
}
