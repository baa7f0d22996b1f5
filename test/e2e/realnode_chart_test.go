package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/daemon"
	"github.com/everynode/everynode/internal/nodesim"
	"github.com/everynode/everynode/internal/realnode"
	"github.com/everynode/everynode/internal/sandbox"
)

// TestRealNodeChart is the chart's end-to-end test: `everynode sandbox --real-nodes 1
// --controller chart` (full mode) and `chart-companion` install everynode from
// charts/everynode with its own image, 2 replicas on the real node. A DaemonSet on the
// simulated nodes is rolled out, and mid-rollout the leading replica's process is
// killed (SIGKILL, as the kernel's OOM killer or a crash would): the other replica
// takes the Lease within the Lease's bounds and finishes the rollout, the budget
// (one node at a time) held throughout, watched pod by pod. Then the chart's
// controller, with the chart's RBAC (nodeGate.enabled), opens a new node's gate.
func TestRealNodeChart(t *testing.T) {
	realNodesWanted(t)
	for _, tc := range []struct {
		controller string
		daemonSet  func(ns string, nodes map[string]string) *apps.DaemonSet
	}{
		{controller: sandbox.ControllerChart, daemonSet: func(ns string, nodes map[string]string) *apps.DaemonSet {
			return daemonSet(ns, "agent", nodes)
		}},
		{controller: sandbox.ControllerChartCompanion, daemonSet: func(ns string, nodes map[string]string) *apps.DaemonSet {
			ds := companionDaemonSet(ns, nil)
			ds.Spec.Template.Spec.NodeSelector = nodes
			return ds
		}},
	} {
		t.Run(tc.controller, func(t *testing.T) {
			rn := newRealNodeSandbox(t, readmeChartSandbox(t, tc.controller))
			sb := rn.start(t)
			client, ctx := rn.client, context.Background()
			leaseDuration, retryPeriod := chartReplicasOnTheRealNode(t, client)
			leader, identity := chartLeader(t, client, "")
			t.Logf("replica %s leads", leader.Name)

			// A DaemonSet on the simulated nodes, slow enough (minReadySeconds 2, one
			// node at a time) for the kill to land mid-rollout.
			simulated := map[string]string{nodesim.LabelSimulated: "true"}
			nodes := labelledNodes(t, client, simulated)
			ns := realNamespace(t, client)
			ds := tc.daemonSet(ns, simulated)
			ds.Spec.MinReadySeconds = 2
			if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			c := &companionCluster{client: client, nodes: nodes}
			c.waitAllOn(t, ns, 1)

			w := watchInvariantsOf(t, client, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
			mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
			pollUntil(t, "the rollout to start", func(ctx context.Context) (bool, error) {
				return rolledOutNodes(ctx, client, ns, 2) >= 1, nil
			})
			if n := rolledOutNodes(ctx, client, ns, 2); n >= len(nodes) {
				t.Fatalf("the rollout finished (%d nodes) before the leader could be killed mid-way", n)
			}
			pid := podProcess(t, rn.port, leader, realnode.ControllerPath)
			killed := time.Now()
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			// Both the other replica and the killed one's container, which the kubelet
			// restarts at once, stand for the Lease when it expires: either may win it.
			next, _ := chartLeader(t, client, identity)
			took := time.Since(killed)
			c.waitAllOn(t, ns, 2)
			w.stop(t)
			who := "the other replica"
			if next.Name == leader.Name {
				who = "the killed replica's restarted container"
			}
			t.Logf("%s (%s) took the Lease %v after replica %s's process was killed", who, next.Name, took.Round(time.Millisecond), leader.Name)
			// As in TestFailoverKilledLeaderIsReplaced: a lease duration after the last
			// renewal the standby saw, on its next try (a retry period plus up to 1.2
			// times as much jitter), which can come one try after the leader's last
			// renewal; two seconds more for polling and API round trips.
			if limit := leaseDuration + 2*retryPeriod*22/10 + 2*time.Second; took > limit {
				t.Errorf("the standby took the Lease %v after the leader was killed, want within %v", took.Round(time.Millisecond), limit)
			}

			// The killed container is restarted in its pod.
			realWait(t, "the killed replica to run again, Ready", func(ctx context.Context) (bool, error) {
				pod, err := client.CoreV1().Pods(sandbox.ChartNamespace).Get(ctx, leader.Name, metav1.GetOptions{})
				if err != nil || len(pod.Status.ContainerStatuses) != 1 {
					return false, err
				}
				s := pod.Status.ContainerStatuses[0]
				return s.RestartCount == 1 && s.Ready, nil
			})
			checkChartNodeGate(t, client, ns)
			if tc.controller == sandbox.ControllerChartCompanion {
				// Companion mode's OnDelete rollouts are what Helm 3 cannot wait
				// for: the chart's hook does.
				checkRolloutStatusHook(t, rn, ns)
			}
			for _, pod := range []v1.Pod{leader, next} {
				logs, err := client.CoreV1().Pods(sandbox.ChartNamespace).GetLogs(pod.Name, &v1.PodLogOptions{}).DoRaw(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(strings.ToLower(string(logs)), "forbidden") {
					t.Errorf("replica %s was refused something its chart's RBAC should allow:\n%s", pod.Name, logs)
				}
			}
			// Stopped, the sandbox leaves none of the chart's containers behind.
			sb.stop()
			checkNoRealNodeLeft(t, rn.port, rn.dataDir)
		})
	}
}

// readmeChartSandbox returns the arguments of the README's command that starts a
// sandbox with everynode installed from its chart, with --controller set to
// controller.
func readmeChartSandbox(t *testing.T, controller string) []string {
	t.Helper()
	for _, c := range readmeCommands(t, filepath.Join(repoRoot, "README.md"), realNodeSection) {
		rest, ok := strings.CutPrefix(c, "bin/everynode sandbox ")
		if !ok || !strings.Contains(rest, "--controller "+sandbox.ControllerChart) {
			continue
		}
		args := append([]string{"sandbox"}, strings.Fields(rest)...)
		for i := range args[:len(args)-1] {
			if args[i] == "--controller" {
				args[i+1] = controller
			}
		}
		return args
	}
	t.Fatalf("the README's %q section has no `bin/everynode sandbox ... --controller %s` command", realNodeSection, sandbox.ControllerChart)
	return nil
}

// chartReplicasOnTheRealNode checks that the chart's Deployment runs 2 Ready
// replicas of everynode's own image, both on the real node, and returns the Lease
// timings its container was given.
func chartReplicasOnTheRealNode(t *testing.T, client kubernetes.Interface) (leaseDuration, retryPeriod time.Duration) {
	t.Helper()
	ctx := context.Background()
	d, err := client.AppsV1().Deployments(sandbox.ChartNamespace).Get(ctx, sandbox.ChartRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's Deployment: %v", err)
	}
	if d.Status.AvailableReplicas != 2 {
		t.Fatalf("the sandbox was ready with %d of the chart's replicas available, want 2", d.Status.AvailableReplicas)
	}
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(arg, "--leader-elect-lease-duration="); ok {
			leaseDuration, err = time.ParseDuration(v)
		}
		if v, ok := strings.CutPrefix(arg, "--leader-elect-retry-period="); ok {
			retryPeriod, err = time.ParseDuration(v)
		}
		if err != nil {
			t.Fatalf("the chart's container argument %s: %v", arg, err)
		}
	}
	if leaseDuration == 0 || retryPeriod == 0 {
		t.Fatalf("the chart's container has no Lease timings: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	pods, err := client.CoreV1().Pods(sandbox.ChartNamespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		image := pod.Status.ContainerStatuses[0].Image
		if pod.Spec.NodeName != realnode.NodeName(1) || !strings.HasPrefix(image, realnode.ControllerRepository+":") {
			t.Errorf("the chart's pod %s runs %s on %s, want everynode's image on %s", pod.Name, image, pod.Spec.NodeName, realnode.NodeName(1))
		}
	}
	if len(pods.Items) != 2 {
		t.Fatalf("the chart's Deployment has %d pods, want 2", len(pods.Items))
	}
	return leaseDuration, retryPeriod
}

// chartLeader waits until a replica of the chart holds the Lease under an identity
// other than not, and returns its pod and identity.
func chartLeader(t *testing.T, client kubernetes.Interface, not string) (v1.Pod, string) {
	t.Helper()
	var pod *v1.Pod
	var holder string
	realWait(t, fmt.Sprintf("a replica other than %q to hold the Lease", not), func(ctx context.Context) (bool, error) {
		holder = leaseHolderIn(ctx, client, sandbox.ChartNamespace)
		// client-go's identity for a pod: its hostname (the pod's name), "_", a UUID
		// of the process.
		name, _, ok := strings.Cut(holder, "_")
		if !ok || holder == not {
			return false, nil
		}
		p, err := client.CoreV1().Pods(sandbox.ChartNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return true, nil
	})
	return *pod, holder
}

// labelledNodes are the names of the nodes carrying labels.
func labelledNodes(t *testing.T, client kubernetes.Interface, labels map[string]string) []string {
	t.Helper()
	list, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return names
}

// checkChartNodeGate adds a simulated node tainted with a gate key and a DaemonSet
// gating on it: the controller the chart installed removes the taint once the
// DaemonSet's pod there is available, which its ServiceAccount may do only by the
// node patch nodeGate.enabled grants.
func checkChartNodeGate(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	name := "gated-" + ns
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{nodesim.LabelSimulated: "true", v1.LabelHostname: name, "e2e/gated": ns}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: gateKey, Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds := daemonSet(ns, "gating", map[string]string{"e2e/gated": ns})
	ds.Annotations = map[string]string{daemon.AnnotationNodeGate: gateKey}
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: gateKey, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	realWait(t, "the chart's controller to remove the gate taint of node "+name, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && !gateTainted(n), nil
	})
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gating"})
	if err != nil || len(pods.Items) != 1 || !daemon.IsReady(&pods.Items[0]) {
		t.Errorf("the gate of node %s opened with the gating pods %v (%v); want its one pod Ready", name, pods, err)
	}
}
