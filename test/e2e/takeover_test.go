package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/everynode/everynode/internal/component"
)

// TestTakeoverFromUpstreamRestartsNoPod runs a cluster under kube-controller-manager's
// DaemonSet controller, rolls a DaemonSet out and updates it, then restarts the
// sandbox on the same data directory with everynode in charge: every pod and every
// ControllerRevision must be the very same object afterwards, and everynode must
// still manage the DaemonSet (a new node gets its pod).
func TestTakeoverFromUpstreamRestartsNoPod(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sandbox")
	port, err := component.FreePort()
	if err != nil {
		t.Fatal(err)
	}

	stop, client := runSandbox(t, dir, port, "upstream")
	ns := "takeover"
	createNamespace(t, client, ns)
	ds := daemonSet(ns, "agent", nil)
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, client, ns, "agent", 1)
	setAgent(t, client, ns, "agent", func(c *v1.Container) { c.Image = "registry.k8s.io/pause:3.9" })
	waitSettled(t, client, ns, "agent", 2)
	before := objectVersions(t, client, ns)
	stop()

	stop, client = runSandbox(t, dir, port, "everynode")
	defer stop()
	// Give everynode time to sync everything it would touch.
	time.Sleep(5 * time.Second)
	waitSettled(t, client, ns, "agent", 2)
	after := objectVersions(t, client, ns)
	for name, version := range before {
		if after[name] != version {
			t.Errorf("%s changed across the takeover: resourceVersion %s, now %q", name, version, after[name])
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s appeared after the takeover", name)
		}
	}
}

// runSandbox starts a sandbox of its own (not the package's) with two nodes and
// returns a stop function and an admin client.
func runSandbox(t *testing.T, dir string, port int, controller string) (func(), kubernetes.Interface) {
	t.Helper()
	return runSandboxNodes(t, dir, port, controller, 2)
}

// ownSandbox starts a sandbox of the test's own, on a free port, with the given
// DaemonSet controller and number of simulated nodes, and waits for them: its data
// directory, an admin client and the nodes' names, sorted.
func ownSandbox(t *testing.T, controller string, nodes int) (string, kubernetes.Interface, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sandbox")
	port, err := component.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, client := runSandboxNodes(t, dir, port, controller, nodes)
	return dir, client, waitSandboxNodes(t, client, nodes)
}

// runSandboxNodes is runSandbox with the given number of simulated nodes.
func runSandboxNodes(t *testing.T, dir string, port int, controller string, nodes int) (func(), kubernetes.Interface) {
	t.Helper()
	cmd := exec.Command(env.binary, "sandbox", "--data-dir", dir, "--port", fmt.Sprint(port),
		"--nodes", fmt.Sprint(nodes), "--controller", controller, "--pod-ready-delay", "200ms", "--pod-stop-delay", "200ms")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "sandbox ready") {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("sandbox (%s) exited before it was ready; logs in %s", controller, filepath.Join(dir, "logs"))
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("sandbox (%s) not ready within 3 minutes", controller)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return stop, client
}

// waitSettled waits for the DaemonSet to be rolled out at the given generation on
// every node of its sandbox.
func waitSettled(t *testing.T, client kubernetes.Interface, ns, name string, generation int64) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("%s rolled out at generation %d", name, generation), func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := ds.Status
		return ds.Generation == generation && s.ObservedGeneration == generation && s.DesiredNumberScheduled == 2 &&
			s.UpdatedNumberScheduled == 2 && s.NumberAvailable == 2 && s.CurrentNumberScheduled == 2, nil
	})
}

// objectVersions maps every pod and revision of ns to its resourceVersion.
func objectVersions(t *testing.T, client kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out["pod/"+p.Name] = p.ResourceVersion
	}
	revs, err := client.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs.Items {
		out["controllerrevision/"+r.Name] = r.ResourceVersion
	}
	return out
}

func pollUntil(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), pollInterval, 2*time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// createNamespace creates namespace ns in the cluster of client and waits for its
// default ServiceAccount, without which the API server refuses pods.
func createNamespace(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), namespaceObject(ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the default service account", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

func namespaceObject(name string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
