package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/bench"
	"github.com/everynode/everynode/internal/nodesim"
)

// The environment variables TestFaults reads: the number of simulated nodes (CI
// runs the default; `make faults NODES=100` sets it) and the seed of the faults.
const (
	faultNodesEnv = "EVERYNODE_FAULT_NODES"
	faultSeedEnv  = "EVERYNODE_FAULT_SEED"
)

// apiFaults are the faults between the controller and the API server: a request in
// twenty answered 500, one in twenty throttled, one in fifty stalled and one in fifty
// carried out with its answer lost (each held five seconds, past the controller's
// request timeout, faultClientTimeout); every watch cut after three to eight
// seconds, one in four by a reset, and one resume in four told its resourceVersion
// is too old. (Each reset or expiry makes client-go list again, and client-go backs
// off from listing often, up to 30s: more of them slow every rollout down to that.)
func apiFaults(seed int64) bench.Faults {
	return bench.Faults{
		Seed:         seed,
		ServerErrors: 0.05,
		Throttles:    0.05,
		Stalls:       0.02,
		LostAnswers:  0.02,
		Hold:         5 * time.Second,
		WatchMin:     3 * time.Second,
		WatchMax:     8 * time.Second,
		WatchResets:  0.25,
		Expired:      0.25,
	}
}

// faultClientTimeout is the controller's --kube-api-timeout in TestFaults.
const faultClientTimeout = "3s"

// faultWait bounds each wait for a scenario to converge: long, since a fault-ridden
// rollout over a hundred nodes on two cores is slow, and no timing is asserted.
const faultWait = 10 * time.Minute

// faultCluster is a sandbox without a DaemonSet controller of its own, and
// `everynode controller` in a process of its own, talking to the API server only
// through a proxy that counts its requests and injects the faults. The test's own
// client talks to the API server directly: nothing it sees is faulted.
type faultCluster struct {
	companionCluster // the sandbox's client, nodes and zones; the proxy; the controller
	zones            []string
}

func startFaultCluster(t *testing.T, n int) *faultCluster {
	t.Helper()
	dir, client, nodes := ownSandbox(t, "none", n)
	c := &faultCluster{companionCluster: companionCluster{dir: dir, client: client, nodes: nodes, zoneOf: map[string]string{}},
		zones: []string{"a", "b", "c"}}
	for i, node := range nodes {
		zone := c.zones[i%len(c.zones)]
		c.zoneOf[node] = zone
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, zoneLabel, zone)
		if _, err := client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(filepath.Dir(dir), "everynode.kubeconfig")
	var err error
	if c.proxy, err = bench.StartProxy(dir, kubeconfig); err != nil {
		t.Fatalf("starting the proxy: %v", err)
	}
	t.Cleanup(func() { c.proxy.Close() })
	c.ctrl = &controllerProcess{kubeconfig: kubeconfig, logs: filepath.Join(dir, "logs"), args: []string{"--conflict-probe-timeout=0", "--kube-api-timeout=" + faultClientTimeout}}
	c.ctrl.start(t)
	t.Cleanup(c.ctrl.kill)
	return c
}

// faultScenario is one thing a user does to a DaemonSet, run once without faults
// and once with them.
type faultScenario struct {
	name string
	// daemonSet shapes the DaemonSet (named agent, on every node, image v1).
	daemonSet func(ds *apps.DaemonSet)
	// change is the update the scenario rolls out; nil: the scenario is the
	// DaemonSet's creation.
	change func(ds *apps.DaemonSet)
	// invariants are watched from before the change until the end.
	invariants func(c *faultCluster, rev1 string) []invariant
	// finalRevision is the revision every node runs at the end, and revisions the
	// number of ControllerRevisions then, one per template.
	finalRevision int64
	revisions     int
}

// faultBudget is maxUnavailable or maxSurge of the scenarios: a fifth of the nodes.
const faultBudget = "20%"

func budgetOf(nodes int) int {
	v := intstr.FromString(faultBudget)
	n, _ := intstr.GetScaledValueFromIntOrPercent(&v, nodes, true)
	return n
}

func faultScenarios() []faultScenario {
	toV2 := func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 }
	rolling := func(ds *apps.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate = &apps.RollingUpdateDaemonSet{MaxUnavailable: ptrIntOrString(intstr.FromString(faultBudget))}
	}
	return []faultScenario{{
		name:          "cold_create",
		daemonSet:     rolling,
		finalRevision: 1, revisions: 1,
		invariants: func(c *faultCluster, _ string) []invariant {
			return []invariant{maxLivePodsPerNode(1), noRevisionTwiceOnANode()}
		},
	}, {
		name:          "rolling_update",
		daemonSet:     rolling,
		change:        toV2,
		finalRevision: 2, revisions: 2,
		invariants: func(c *faultCluster, _ string) []invariant {
			return []invariant{maxNodesWithoutReadyPod(c.nodes, budgetOf(len(c.nodes))), maxLivePodsPerNode(1), noRevisionTwiceOnANode()}
		},
	}, {
		name: "surge_update",
		daemonSet: func(ds *apps.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &apps.RollingUpdateDaemonSet{
				MaxSurge: ptrIntOrString(intstr.FromString(faultBudget)), MaxUnavailable: ptrIntOrString(intstr.FromInt32(0))}
		},
		change:        toV2,
		finalRevision: 2, revisions: 2,
		invariants: func(c *faultCluster, _ string) []invariant {
			return []invariant{maxNodesWithoutReadyPod(c.nodes, 0), maxNodesWithTwoPods(budgetOf(len(c.nodes))), maxLivePodsPerNode(2), noRevisionTwiceOnANode()}
		},
	}, {
		name: "waves",
		daemonSet: func(ds *apps.DaemonSet) {
			rolling(ds)
			ds.Annotations = map[string]string{annWaves: zoneLabel, annWaveOrder: "c,a"}
		},
		change:        toV2,
		finalRevision: 2, revisions: 2,
		invariants: func(c *faultCluster, rev1 string) []invariant {
			waves := &waveTracker{zoneOf: c.zoneOf, order: []string{"c", "a", "b"}, oldHash: rev1}
			return []invariant{maxNodesWithoutReadyPod(c.nodes, budgetOf(len(c.nodes))), maxLivePodsPerNode(1), noRevisionTwiceOnANode(),
				waves.zonesMidUpdate(), waves.zonesOutOfOrder()}
		},
	}, {
		// A release that crash-loops: its first pod restarts past the limit before
		// it has baked, and the template is rolled back to revision 1's (renumbered
		// 3). One node at a time, so that no node is caught between its old pod and
		// its new one when the rollback comes.
		name: "rollback",
		daemonSet: func(ds *apps.DaemonSet) {
			ds.Annotations = map[string]string{annMaxRestarts: "2", annOnFailure: "rollback"}
		},
		change: func(ds *apps.DaemonSet) {
			toV2(ds)
			ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationRestartEvery: "1s"}
		},
		finalRevision: 3, revisions: 2,
		invariants: func(c *faultCluster, _ string) []invariant {
			return []invariant{maxNodesWithoutReadyPod(c.nodes, 1), maxLivePodsPerNode(1), noRevisionTwiceOnANode()}
		},
	}}
}

// faultRun is what one run of a scenario cost.
type faultRun struct {
	writes companionWrites
	counts bench.Counts // every request, by verb and resource
	faults bench.FaultCounts
	took   time.Duration
}

// run runs the scenario in a namespace of its own, with faults (nil: none) between
// the controller and the API server from just before the creation or change until
// every node runs the final revision; it checks the invariants throughout and that
// nothing was duplicated at the end.
func (c *faultCluster) run(t *testing.T, sc faultScenario, faults *bench.Faults) faultRun {
	t.Helper()
	ns := "faults-" + strings.ReplaceAll(sc.name, "_", "-")
	if faults != nil {
		ns += "-faulty"
	}
	createNamespace(t, c.client, ns)
	ds := daemonSet(ns, "agent", nil)
	sc.daemonSet(ds)
	dss := c.client.AppsV1().DaemonSets(ns)
	rev1 := ""
	if sc.change != nil {
		if _, err := dss.Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitAllOnWithin(t, ns, 1, faultWait)
		rev1 = c.revisionHash(t, ns, 1)
	}
	w := watchInvariantsOf(t, c.client, ns, "app=agent", sc.invariants(c, rev1)...)
	before, faultsBefore, start := c.proxy.Snapshot(), c.proxy.FaultCounts(), time.Now()
	if err := c.proxy.SetFaults(faults); err != nil {
		t.Fatal(err)
	}
	if sc.change == nil {
		if _, err := dss.Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else {
		mutateDaemonSet(t, c.client, ns, "agent", sc.change)
	}
	c.waitAllOnWithin(t, ns, sc.finalRevision, faultWait)
	if err := c.proxy.SetFaults(nil); err != nil {
		t.Fatal(err)
	}
	counts := c.proxy.Snapshot().Sub(before)
	run := faultRun{writes: writesOf(counts), counts: counts, faults: subFaults(c.proxy.FaultCounts(), faultsBefore), took: time.Since(start)}
	w.stop(t)
	c.checkNothingDuplicated(t, ns, sc.finalRevision, sc.revisions)
	return run
}

// checkNothingDuplicated checks the end of a rollout: one live pod on every node, of
// the revision numbered rev, and revisions ControllerRevisions, one per template.
func (c *companionCluster) checkNothingDuplicated(t *testing.T, ns string, rev int64, revisions int) {
	t.Helper()
	hash := c.revisionHash(t, ns, rev)
	byNode, err := podsByNode(context.Background(), c.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(byNode) != len(c.nodes) {
		t.Errorf("pods on %d nodes, want one on each of the %d", len(byNode), len(c.nodes))
	}
	for _, node := range c.nodes {
		pods := byNode[node]
		if len(pods) != 1 || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != hash || !isLive(&pods[0]) {
			t.Errorf("node %s runs %v, want one live pod of revision %d (%s)", node, podNames(map[string][]v1.Pod{node: pods})[node], rev, hash)
		}
	}
	checkOneRevisionPerTemplate(t, c.client, ns, revisions)
}

// checkOneRevisionPerTemplate fails the test unless the namespace holds want
// ControllerRevisions, no two of them with the same template.
func checkOneRevisionPerTemplate(t *testing.T, client kubernetes.Interface, ns string, want int) {
	t.Helper()
	list, err := client.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]string{}
	for _, r := range list.Items {
		if other, ok := templates[string(r.Data.Raw)]; ok {
			t.Errorf("ControllerRevisions %s and %s hold the same template", other, r.Name)
		}
		templates[string(r.Data.Raw)] = r.Name
	}
	if len(list.Items) != want {
		t.Errorf("%d ControllerRevisions, want %d", len(list.Items), want)
	}
}

func subFaults(later, earlier bench.FaultCounts) bench.FaultCounts {
	return bench.FaultCounts{
		ServerErrors: later.ServerErrors - earlier.ServerErrors, Throttles: later.Throttles - earlier.Throttles,
		Stalls: later.Stalls - earlier.Stalls, LostAnswers: later.LostAnswers - earlier.LostAnswers,
		WatchEnds: later.WatchEnds - earlier.WatchEnds, WatchResets: later.WatchResets - earlier.WatchResets,
		Expired: later.Expired - earlier.Expired,
	}
}

// writeKeys lists the write requests of counts by verb and resource, with how many
// of them were answered with an error.
func writeKeys(counts bench.Counts) string {
	var out []string
	for _, k := range counts.Keys() {
		switch k.Verb {
		case "create", "update", "patch", "delete":
			t := counts[k]
			out = append(out, fmt.Sprintf("%s %s %d (%d errors)", k.Verb, k.Resource, t.Requests, t.Errors))
		}
	}
	return strings.Join(out, ", ")
}

// envInt reads a positive whole number from the environment, or gives def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a whole number of at least 1", name, s)
	}
	return n
}

// TestFaults runs a cold create, a rolling and a surge update, a rollout by waves
// and a rollback with everynode's controller behind a proxy that injects API
// faults (apiFaults): each converges, with the invariants watched pod by pod from
// the test's own, unfaulted client — no more nodes without a Ready pod than the
// budget, no more live pods on a node than the strategy allows, no pod created twice
// or deleted unplanned — and nothing duplicated at the end. Every scenario runs
// first without faults, all before the first fault, so that the controller meets
// them with caches and watches that no fault has disturbed (client-go backs off
// from a watch that keeps failing); the writes the faults cost beyond that are
// logged.
func TestFaults(t *testing.T) {
	n := envInt(t, faultNodesEnv, 20)
	seed := int64(envInt(t, faultSeedEnv, 1))
	c := startFaultCluster(t, n)
	t.Logf("%d nodes; faults %+v", n, apiFaults(seed))
	scenarios := faultScenarios()
	clean := map[string]faultRun{}
	t.Run("without_faults", func(t *testing.T) {
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) { clean[sc.name] = c.run(t, sc, nil) })
		}
	})
	var report []string
	t.Run("with_faults", func(t *testing.T) {
		for i, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				// Each scenario draws from a seed of its own, so that they meet
				// different faults.
				faults := apiFaults(seed + int64(i))
				faulty := c.run(t, sc, &faults)
				base := clean[sc.name]
				line := fmt.Sprintf("%-15s writes %4d without faults, %4d with (%+d); faults injected %+v; %s and %s",
					sc.name, base.writes.sent, faulty.writes.sent, faulty.writes.sent-base.writes.sent, faulty.faults,
					base.took.Round(100*time.Millisecond), faulty.took.Round(100*time.Millisecond))
				t.Log(line)
				t.Logf("writes without faults %s; with %s", writeKeys(base.counts), writeKeys(faulty.counts))
				report = append(report, line)
			})
		}
	})
	t.Logf("%d nodes, seed %d:\n%s", n, seed, strings.Join(report, "\n"))
}
