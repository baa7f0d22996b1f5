package e2e

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/bench"
)

// Short leader election timings, so that a failover takes seconds.
var leaderFlags = []string{"--leader-elect", "--leader-elect-namespace", "kube-system",
	"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}

const (
	leaseDuration = 4 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// replica is one `everynode controller --leader-elect` process behind a counting
// proxy of its own, so that its requests are counted apart from the other's.
type replica struct {
	ctrl  *controllerProcess
	proxy *bench.Proxy
}

func startReplica(t *testing.T, dir, name string) *replica {
	t.Helper()
	kubeconfig := filepath.Join(filepath.Dir(dir), name+".kubeconfig")
	proxy, err := bench.StartProxy(dir, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	logs := filepath.Join(filepath.Dir(dir), name)
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &replica{ctrl: &controllerProcess{kubeconfig: kubeconfig, logs: logs, args: append([]string{"--conflict-probe-timeout=0"}, leaderFlags...)}, proxy: proxy}
	r.ctrl.start(t)
	t.Cleanup(func() {
		if r.ctrl.cmd != nil {
			_ = r.ctrl.cmd.Process.Signal(syscall.SIGCONT)
		}
		r.ctrl.kill()
	})
	return r
}

// writes are the replica's writes so far, the Lease's own excepted.
func (r *replica) writes() int64 {
	counts := r.proxy.Snapshot()
	var n int64
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		n += counts.Verb(verb).Requests
	}
	for _, verb := range []string{"create", "update", "patch"} {
		n -= counts.Get(verb, "leases").Requests
	}
	return n
}

// leaseHolder is the identity holding the everynode Lease ("" for none).
func leaseHolder(ctx context.Context, client kubernetes.Interface) string {
	return leaseHolderIn(ctx, client, "kube-system")
}

// leaseHolderIn is the identity holding the everynode Lease in ns ("" for none).
func leaseHolderIn(ctx context.Context, client kubernetes.Interface, ns string) string {
	lease, err := client.CoordinationV1().Leases(ns).Get(ctx, "everynode", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// failoverCluster starts a sandbox without a DaemonSet controller of its own, replica
// a (which takes the Lease) then replica b, and a DaemonSet rolled out on every node,
// slow enough (minReadySeconds 2, one node at a time) for a failover to land
// mid-rollout. It returns the namespace, the nodes and the first leader's identity.
func failoverCluster(t *testing.T) (kubernetes.Interface, string, []string, *replica, *replica, string) {
	t.Helper()
	dir, client, nodes := ownSandbox(t, "none", 4)
	a := startReplica(t, dir, "a")
	var first string
	pollUntil(t, "replica a to take the Lease", func(ctx context.Context) (bool, error) {
		first = leaseHolder(ctx, client)
		return first != "", nil
	})
	b := startReplica(t, dir, "b")
	ns := "failover"
	createNamespace(t, client, ns)
	ds := daemonSet(ns, "agent", nil)
	ds.Spec.MinReadySeconds = 2
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &companionCluster{dir: dir, client: client, nodes: nodes}
	c.waitAllOn(t, ns, 1)
	return client, ns, nodes, a, b, first
}

// TestFailoverFrozenLeaderWritesNothing freezes the leading replica (SIGSTOP)
// mid-rollout until the standby has taken the Lease, then thaws it (SIGCONT): the
// thawed replica must send no write at all (its fence: its last renewal is older
// than the renew deadline), while the new leader finishes the rollout within the
// budget, watched pod by pod.
func TestFailoverFrozenLeaderWritesNothing(t *testing.T) {
	client, ns, nodes, a, b, first := failoverCluster(t)
	w := watchInvariantsOf(t, client, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	pollUntil(t, "the rollout to start", func(ctx context.Context) (bool, error) {
		return a.writes() > 0 && rolledOutNodes(ctx, client, ns, 2) >= 1, nil
	})
	if err := a.ctrl.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "replica b to take the Lease", func(ctx context.Context) (bool, error) {
		h := leaseHolder(ctx, client)
		return h != "" && h != first, nil
	})
	// Counted only now: a write the replica had put on the wire as it was stopped
	// reaches the proxy a moment later, and a stopped process sends nothing new.
	frozen := a.writes()
	if err := a.ctrl.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c := &companionCluster{client: client, nodes: nodes}
	c.waitAllOn(t, ns, 2)
	time.Sleep(3 * time.Second) // the thawed replica's workers had their chance
	w.stop(t)
	if after := a.writes() - frozen; after != 0 {
		t.Errorf("the thawed replica sent %d writes after it lost the Lease, want none", after)
	}
	t.Logf("writes: replica a %d (all before it froze), replica b %d", frozen, b.writes())
}

// TestFailoverKilledLeaderIsReplaced kills the leading replica (SIGKILL) mid-rollout:
// the standby takes the Lease within the lease duration plus two (jittered) retries and
// finishes the rollout, the budget held throughout.
func TestFailoverKilledLeaderIsReplaced(t *testing.T) {
	client, ns, nodes, a, b, first := failoverCluster(t)
	w := watchInvariantsOf(t, client, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	pollUntil(t, "the rollout to start", func(ctx context.Context) (bool, error) {
		return a.writes() > 0 && rolledOutNodes(ctx, client, ns, 2) >= 1, nil
	})
	killed := time.Now()
	a.ctrl.kill()
	pollUntil(t, "replica b to take the Lease", func(ctx context.Context) (bool, error) {
		h := leaseHolder(ctx, client)
		return h != "" && h != first, nil
	})
	took := time.Since(killed)
	c := &companionCluster{client: client, nodes: nodes}
	c.waitAllOn(t, ns, 2)
	w.stop(t)
	// The Lease's holder is replaced once the standby has seen no new renewal for a
	// lease duration, on its next try: client-go's leader election retries every
	// retry period plus up to 1.2 times as much jitter, and counts the lease from when
	// the standby itself last saw the record change, which can be one such try after
	// the leader's last renewal. Two seconds more cover this test's polling and the API
	// round trips on a loaded machine.
	if limit := leaseDuration + 2*retryPeriod*22/10 + 2*time.Second; took > limit {
		t.Errorf("the standby took the Lease %v after the leader was killed, want within %v", took.Round(time.Millisecond), limit)
	}
	if b.writes() == 0 {
		t.Error("the standby made no write: who finished the rollout?")
	}
	t.Logf("the standby took over %v after the kill", took.Round(time.Millisecond))
}

// rolledOutNodes counts the nodes running a Ready pod of revision rev.
func rolledOutNodes(ctx context.Context, client kubernetes.Interface, ns string, rev int64) int {
	c := &companionCluster{client: client}
	hash := c.revisionHashNow(ctx, ns, rev)
	byNode, err := podsByNode(ctx, client, ns)
	if err != nil || hash == "" {
		return 0
	}
	n := 0
	for _, pods := range byNode {
		for i := range pods {
			if pods[i].Labels[apps.ControllerRevisionHashLabelKey] == hash && isLive(&pods[i]) && isPodReady(&pods[i]) {
				n++
			}
		}
	}
	return n
}
