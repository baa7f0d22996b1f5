package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/component"
	"github.com/everynode/everynode/internal/nodesim"
	"github.com/everynode/everynode/internal/realnode"
)

// realNodeSection is the README section that starts a sandbox with a real node.
const realNodeSection = "## Real nodes in the sandbox"

// realNodesWanted reports whether the real-node tests run: they need root and the
// README's install command; EVERYNODE_REAL_NODES=0 skips them on a machine without.
func realNodesWanted(t *testing.T) {
	t.Helper()
	if os.Getenv("EVERYNODE_REAL_NODES") == "0" {
		t.Skip("EVERYNODE_REAL_NODES=0: skipping the real-node tests")
	}
	if err := realnode.CheckHost(); err != nil {
		t.Fatalf("%v (EVERYNODE_REAL_NODES=0 skips the real-node tests)", err)
	}
}

// TestRealNodeInPlaceUpdate starts the README's sandbox with a real node (a kubelet
// and a containerd) beside two simulated ones, runs a DaemonSet's container there,
// changes its image in place, then stops the sandbox, checks it left nothing behind
// on the host, and starts it again on the same data dir.
func TestRealNodeInPlaceUpdate(t *testing.T) {
	realNodesWanted(t)
	rn := newRealNodeSandbox(t, readmeRealNodeSandbox(t))
	sb := rn.start(t)
	client, port, dataDir, ctx := rn.client, rn.port, rn.dataDir, context.Background()

	// Three Ready nodes; exactly one is real: containerd and kubelet v1.37.2.
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var real []v1.Node
	for _, n := range nodes.Items {
		if !nodesim.Usable(&n) {
			t.Errorf("node %s is not Ready and untainted when the sandbox says it is ready", n.Name)
		}
		if strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			real = append(real, n)
		}
	}
	if len(nodes.Items) != 3 || len(real) != 1 {
		t.Fatalf("the sandbox has %d nodes, %d of them with a containerd runtime; want 3 and 1", len(nodes.Items), len(real))
	}
	node := real[0]
	if node.Name != realnode.NodeName(1) || node.Status.NodeInfo.KubeletVersion != "v1.37.2" || node.Labels[realnode.LabelReal] != "true" {
		t.Fatalf("the real node is %s, kubelet %s, labels %v; want %s, v1.37.2, %s=true",
			node.Name, node.Status.NodeInfo.KubeletVersion, node.Labels, realnode.NodeName(1), realnode.LabelReal)
	}

	// A DaemonSet of the agent, updated in place, on the real node only.
	ns := realNamespace(t, client)
	createAgent(t, client, agentDaemonSet(ns, "agent", map[string]string{annInPlace: "true"}))
	first := waitAgentPod(t, client, ns, "agent", realnode.AgentImage1, 0)
	pid := agentProcess(t, port, first)
	t.Logf("pod %s runs the agent as process %d in the pod's cgroup", first.UID, pid)

	if _, err := client.AppsV1().DaemonSets(ns).Patch(ctx, "agent", "application/strategic-merge-patch+json",
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"`+realnode.AgentImage2+`"}]}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitAgentPod(t, client, ns, "agent", realnode.AgentImage2, 1)
	if second.UID != first.UID {
		t.Fatalf("the in-place update replaced pod %s with %s", first.UID, second.UID)
	}
	before, after := first.Status.ContainerStatuses[0], second.Status.ContainerStatuses[0]
	if after.ImageID == before.ImageID || after.ContainerID == before.ContainerID {
		t.Fatalf("after the update the container reports image ID %s and ID %s, as before", after.ImageID, after.ContainerID)
	}
	realWait(t, "the rollout's status", func(ctx context.Context) (bool, error) {
		got, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := got.Status
		return s.ObservedGeneration >= got.Generation && s.DesiredNumberScheduled == 1 && s.UpdatedNumberScheduled == 1 && s.NumberAvailable == 1, nil
	})
	logs, err := client.CoreV1().Pods(ns).GetLogs(second.Name, &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "everynode-agent version 2 starting") {
		t.Fatalf("the container's log, read through the API server from the kubelet: %q, %v", logs, err)
	}

	// Stopped, the sandbox leaves nothing on the host; started again, the node and
	// its pod come back.
	sb.stop()
	checkNoRealNodeLeft(t, port, dataDir)
	sb = rn.start(t)
	var restarted v1.Pod
	realWait(t, "the agent's container to run again after the restart", func(ctx context.Context) (bool, error) {
		restarted = waitAgentPod(t, client, ns, "agent", realnode.AgentImage2, -1)
		return restarted.Status.ContainerStatuses[0].ContainerID != after.ContainerID, nil
	})
	if restarted.UID != first.UID {
		t.Fatalf("after a restart the DaemonSet's pod is %s, want %s", restarted.UID, first.UID)
	}
	agentProcess(t, port, restarted)
	sb.stop()
	checkNoRealNodeLeft(t, port, dataDir)
}

// realNodeSandbox is a sandbox with a real node, started by a test as a user starts
// one, on a free port and a data dir of the test's.
type realNodeSandbox struct {
	args    []string
	port    int
	dataDir string
	client  kubernetes.Interface
}

func newRealNodeSandbox(t *testing.T, args []string) *realNodeSandbox {
	t.Helper()
	port, err := component.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return &realNodeSandbox{args: args, port: port, dataDir: filepath.Join(t.TempDir(), "sandbox")}
}

// start starts the sandbox and waits until it is ready; it is stopped when the test
// ends, if the test has not stopped it.
func (rn *realNodeSandbox) start(t *testing.T) *sandboxProcess {
	t.Helper()
	cmd := exec.Command(env.binary, append(rn.args, "--data-dir", rn.dataDir, "--port", fmt.Sprint(rn.port))...)
	sb, err := startSandboxProcess(cmd, "real-node sandbox: ", 5*time.Minute)
	if err != nil {
		t.Fatalf("%s: %v; logs in %s", strings.Join(cmd.Args, " "), err, filepath.Join(rn.dataDir, "logs"))
	}
	t.Cleanup(func() {
		if sb.alive() {
			sb.stop()
		}
	})
	if rn.client == nil {
		rn.client = kubeconfigClient(t, rn.kubeconfig())
	}
	return sb
}

// kubeconfig is the sandbox's admin kubeconfig.
func (rn *realNodeSandbox) kubeconfig() string { return filepath.Join(rn.dataDir, "kubeconfig") }

// readmeRealNodeSandbox returns the arguments of the README's real-node sandbox
// command, after checking that the section's install command is the one the
// sandbox names when something is missing.
func readmeRealNodeSandbox(t *testing.T) []string {
	t.Helper()
	commands := readmeCommands(t, filepath.Join(repoRoot, "README.md"), realNodeSection)
	if len(commands) < 2 || commands[0] != realnode.InstallCommand {
		t.Fatalf("the README's %q section starts with %q; want the install command %q, then the sandbox's", realNodeSection, commands, realnode.InstallCommand)
	}
	for _, c := range commands[1:] {
		if rest, ok := strings.CutPrefix(c, "bin/everynode sandbox "); ok {
			return append([]string{"sandbox"}, strings.Fields(rest)...)
		}
	}
	t.Fatalf("the README's %q section has no `bin/everynode sandbox` command: %q", realNodeSection, commands)
	return nil
}

// waitAgentPod waits until the DaemonSet name (its pods labelled app=name) has one
// pod, Running and Ready on the real node with image, and (unless restarts is -1)
// that restart count.
func waitAgentPod(t *testing.T, client kubernetes.Interface, ns, name, image string, restarts int32) v1.Pod {
	t.Helper()
	var pod v1.Pod
	realWait(t, fmt.Sprintf("the %s pod to run %s, Ready", name, image), func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(pods.Items) != 1 {
			return false, err
		}
		pod = pods.Items[0]
		if pod.Spec.NodeName != realnode.NodeName(1) || pod.Status.Phase != v1.PodRunning || len(pod.Status.ContainerStatuses) != 1 {
			return false, nil
		}
		s := pod.Status.ContainerStatuses[0]
		return s.Ready && s.State.Running != nil && s.Image == image && (restarts < 0 || s.RestartCount == restarts), nil
	})
	return pod
}

// agentProcess finds the agent's process in the real node's cgroups: in a container
// cgroup under the one that carries the pod's UID.
func agentProcess(t *testing.T, port int, pod v1.Pod) int {
	t.Helper()
	return podProcess(t, port, pod, realnode.AgentPath)
}

// podProcess finds the process running the binary at exe in the real node's
// cgroups: in a container cgroup under the one that carries the pod's UID.
func podProcess(t *testing.T, port int, pod v1.Pod, exe string) int {
	t.Helper()
	root := filepath.Join("/sys/fs/cgroup/memory/everynode", fmt.Sprint(port), realnode.NodeName(1), "kubepods")
	var found int
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || !strings.Contains(path, "pod"+string(pod.UID)+"/") {
			return nil
		}
		procs, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, f := range strings.Fields(string(procs)) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", f, "cmdline"))
			if strings.HasPrefix(string(cmdline), exe+"\x00") {
				fmt.Sscan(f, &found)
			}
		}
		return nil
	})
	if found == 0 {
		t.Fatalf("no %s process in a cgroup of pod %s under %s", exe, pod.UID, root)
	}
	return found
}

// checkNoRealNodeLeft checks that a stopped sandbox left no process, cgroup, mount,
// network namespace or link of its real nodes on the host.
func checkNoRealNodeLeft(t *testing.T, port int, dataDir string) {
	t.Helper()
	var left []string
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil && strings.Contains(string(out), fmt.Sprintf("everynode-%d-", port)) {
		left = append(left, "network namespaces: "+strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "-o", "link").Output(); err == nil && strings.Contains(string(out), fmt.Sprintf("en%dh", port)) {
		left = append(left, "a veth link en"+fmt.Sprint(port)+"h…")
	}
	cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*/everynode", fmt.Sprint(port)))
	left = append(left, cgroups...)
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if strings.Contains(s.Text(), dataDir) {
				left = append(left, "mount: "+s.Text())
			}
		}
		f.Close()
	}
	// This sandbox's processes: started with its data dir, or in its nodes' cgroups
	// (containers, shims). Other sandboxes on the machine are not this test's, nor
	// are processes that have exited and wait for init to reap them.
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if stat, _ := os.ReadFile(filepath.Join(p, "stat")); zombie(string(stat)) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		cgroups, _ := os.ReadFile(filepath.Join(p, "cgroup"))
		if strings.Contains(string(cmdline), dataDir) || strings.Contains(string(cgroups), fmt.Sprintf("/everynode/%d/", port)) {
			left = append(left, "process "+filepath.Base(p)+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	if len(left) > 0 {
		t.Fatalf("the stopped sandbox left behind:\n%s", strings.Join(left, "\n"))
	}
}

// zombie reports whether /proc/<pid>/stat says the process has exited (state Z).
func zombie(stat string) bool {
	i := strings.LastIndex(stat, ") ")
	return i >= 0 && strings.HasPrefix(stat[i+2:], "Z")
}

// realWait is waitFor for a real node: containers take seconds, not milliseconds.
func realWait(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 3*time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
