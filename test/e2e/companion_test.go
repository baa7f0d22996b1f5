package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/everynode/everynode/internal/bench"
	"github.com/everynode/everynode/internal/component"
	"github.com/everynode/everynode/internal/nodesim"
)

// companionCluster is a managed cluster in one machine: a sandbox running
// kube-controller-manager's own DaemonSet controller, and everynode in companion
// mode beside it, in a process of its own that talks to the API server through a
// counting proxy, so that its writes are counted apart from everyone else's.
type companionCluster struct {
	dir    string
	client kubernetes.Interface
	proxy  *bench.Proxy
	ctrl   *controllerProcess
	nodes  []string          // sorted
	zoneOf map[string]string // node → its zone label value
}

const zoneLabel = "topology.kubernetes.io/zone"

// startCompanionCluster starts the sandbox (four nodes, two in zone a and two in zone
// b, the first of each zone labelled e2e/canary=true) and everynode in companion mode.
func startCompanionCluster(t *testing.T) *companionCluster {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sandbox")
	port, err := component.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, client := runSandboxNodes(t, dir, port, "upstream", 4)
	c := &companionCluster{dir: dir, client: client, zoneOf: map[string]string{}}
	c.nodes = waitSandboxNodes(t, client, 4)
	for i, node := range c.nodes {
		zone := []string{"a", "a", "b", "b"}[i]
		c.zoneOf[node] = zone
		labels := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, zoneLabel, zone)
		if i%2 == 0 {
			labels = fmt.Sprintf(`{"metadata":{"labels":{%q:%q,"e2e/canary":"true"}}}`, zoneLabel, zone)
		}
		if _, err := client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(labels), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	proxyKubeconfig := filepath.Join(filepath.Dir(dir), "everynode.kubeconfig")
	if c.proxy, err = bench.StartProxy(dir, proxyKubeconfig); err != nil {
		t.Fatalf("starting the counting proxy: %v", err)
	}
	t.Cleanup(func() { c.proxy.Close() })
	c.ctrl = &controllerProcess{kubeconfig: proxyKubeconfig, logs: filepath.Join(dir, "logs"), args: []string{"--mode", "companion"}}
	c.ctrl.start(t)
	t.Cleanup(c.ctrl.kill)
	return c
}

// companionDaemonSet is an OnDelete DaemonSet that companion mode rolls out, with
// max-unavailable 1 and the given annotations.
func companionDaemonSet(ns string, annotations map[string]string) *apps.DaemonSet {
	ds := daemonSet(ns, "agent", nil)
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	ds.Annotations = map[string]string{annMaxUnavailable: "1"}
	for k, v := range annotations {
		ds.Annotations[k] = v
	}
	return ds
}

// deploy creates a namespace and the DaemonSet in it, waits for kube-controller-manager
// to run it on every node, and returns the namespace and the first revision's hash.
func (c *companionCluster) deploy(t *testing.T, annotations map[string]string, change func(*apps.DaemonSet)) (string, string) {
	t.Helper()
	ns := "companion-" + strings.ToLower(strings.ReplaceAll(t.Name()[strings.LastIndex(t.Name(), "/")+1:], "_", "-"))
	createNamespace(t, c.client, ns)
	ds := companionDaemonSet(ns, annotations)
	if change != nil {
		change(ds)
	}
	if _, err := c.client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitAllOn(t, ns, 1)
	return ns, c.revisionHash(t, ns, 1)
}

// waitAllOn waits until every node runs one Ready pod of the revision numbered rev,
// and the status counters (kube-controller-manager's) say so.
func (c *companionCluster) waitAllOn(t *testing.T, ns string, rev int64) {
	t.Helper()
	c.waitAllOnWithin(t, ns, rev, 2*time.Minute)
}

// waitAllOnWithin is waitAllOn, waiting up to timeout.
func (c *companionCluster) waitAllOnWithin(t *testing.T, ns string, rev int64, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		hash := c.revisionHashNow(ctx, ns, rev)
		if hash == "" {
			return false, nil
		}
		byNode, err := podsByNode(ctx, c.client, ns)
		if err != nil || len(byNode) != len(c.nodes) {
			return false, nil
		}
		for _, node := range c.nodes {
			pods := byNode[node]
			if len(pods) != 1 || !isLive(&pods[0]) || !isPodReady(&pods[0]) || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != hash {
				return false, nil
			}
		}
		ds, err := c.client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		n := int32(len(c.nodes))
		return err == nil && ds.Status.ObservedGeneration == ds.Generation && ds.Status.UpdatedNumberScheduled == n && ds.Status.NumberAvailable == n, nil
	})
	if err != nil {
		t.Fatalf("waiting for every node on revision %d: %v", rev, err)
	}
}

// revisionHash waits for the revision numbered rev and returns its hash.
func (c *companionCluster) revisionHash(t *testing.T, ns string, rev int64) string {
	t.Helper()
	var hash string
	pollUntil(t, fmt.Sprintf("revision %d", rev), func(ctx context.Context) (bool, error) {
		hash = c.revisionHashNow(ctx, ns, rev)
		return hash != "", nil
	})
	return hash
}

func (c *companionCluster) revisionHashNow(ctx context.Context, ns string, rev int64) string {
	list, err := c.client.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	for _, r := range list.Items {
		if r.Revision == rev {
			return r.Labels[apps.ControllerRevisionHashLabelKey]
		}
	}
	return ""
}

// everynode runs an everynode command against the companion cluster.
func (c *companionCluster) everynode(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(c.dir, "kubeconfig"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("everynode %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// companionWrites are the writes everynode made through its proxy that took effect,
// and how many it sent that the API server refused. A write refused for a conflict
// (kube-controller-manager wrote the DaemonSet's status in between) is sent again, so
// the refused ones are counted apart.
type companionWrites struct {
	podDeletes, podCreates, statusUpdates, statusPatches, revisionWrites, daemonSetWrites, all int64
	// sent counts every write request but Events, refused or not; refused, every
	// write the API server refused.
	sent, refused int64
}

func writesOf(counts bench.Counts) companionWrites {
	took := func(verb, resource string) int64 {
		t := counts.Get(verb, resource)
		return t.Requests - t.Errors
	}
	w := companionWrites{
		podDeletes:      took("delete", "pods"),
		podCreates:      took("create", "pods"),
		statusUpdates:   took("update", "daemonsets/status"),
		statusPatches:   took("patch", "daemonsets/status"),
		revisionWrites:  took("create", "controllerrevisions") + took("update", "controllerrevisions") + took("patch", "controllerrevisions"),
		daemonSetWrites: took("update", "daemonsets") + took("patch", "daemonsets"),
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		t := counts.Verb(verb)
		w.all += t.Requests - t.Errors
		w.sent += t.Requests
		w.refused += t.Errors
	}
	// Events are recorded for people; they are not writes to the DaemonSet's objects.
	w.all -= took("create", "events") + took("patch", "events")
	w.sent -= counts.Get("create", "events").Requests + counts.Get("patch", "events").Requests
	return w
}

// maxRefusedWrites is how many of everynode's writes the API server may refuse in
// one scenario: a conflict or two with kube-controller-manager's status writes.
const maxRefusedWrites = 4

func checkWrites(t *testing.T, w companionWrites, minDeletes, maxDeletes, maxTemplateWrites int64) {
	t.Helper()
	t.Logf("everynode's writes: %+v", w)
	if w.podDeletes < minDeletes || w.podDeletes > maxDeletes {
		t.Errorf("everynode deleted %d pods, want %d to %d", w.podDeletes, minDeletes, maxDeletes)
	}
	if w.podCreates != 0 || w.statusUpdates != 0 {
		t.Errorf("everynode created %d pods and updated the status %d times: both are kube-controller-manager's", w.podCreates, w.statusUpdates)
	}
	if w.statusPatches == 0 || w.statusPatches > 12 {
		t.Errorf("everynode patched its condition %d times, want a few", w.statusPatches)
	}
	if w.daemonSetWrites > maxTemplateWrites {
		t.Errorf("everynode wrote the DaemonSet %d times, want at most %d", w.daemonSetWrites, maxTemplateWrites)
	}
	if other := w.all - w.podDeletes - w.statusPatches - w.revisionWrites - w.daemonSetWrites; other != 0 {
		t.Errorf("everynode made %d other writes", other)
	}
	if w.revisionWrites > 6 {
		t.Errorf("everynode wrote revisions %d times, want a mark or two per revision", w.revisionWrites)
	}
	if w.refused > maxRefusedWrites {
		t.Errorf("the API server refused %d of everynode's writes, want at most %d", w.refused, maxRefusedWrites)
	}
}

// TestCompanion runs rollouts in a managed cluster: kube-controller-manager's
// DaemonSet controller keeps placement while everynode, in companion mode, rolls out
// OnDelete DaemonSets annotated with max-unavailable. A pod watch checks in every
// state that no more nodes than the budget lack a Ready pod and no node holds two
// live pods; the proxy counts everynode's writes.
func TestCompanion(t *testing.T) {
	c := startCompanionCluster(t)

	t.Run("waves_by_zone", func(t *testing.T) {
		ns, rev1 := c.deploy(t, map[string]string{annWaves: zoneLabel, annWaveOrder: "b"}, func(ds *apps.DaemonSet) {
			ds.Annotations[annMaxUnavailable] = "2"
		})
		waves := &waveTracker{zoneOf: c.zoneOf, order: []string{"b", "a"}, oldHash: rev1}
		w := watchInvariantsOf(t, c.client, ns, "app=agent", maxNodesWithoutReadyPod(c.nodes, 2), maxLivePodsPerNode(1),
			waves.zonesMidUpdate(), waves.zonesOutOfOrder())
		before := c.proxy.Snapshot()
		mutateDaemonSet(t, c.client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
		c.waitAllOn(t, ns, 2)
		waitProgressing(t, c.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
		peaks := w.stop(t)
		if !slices.Equal(waves.started, []string{"b", "a"}) {
			t.Errorf("zones got their first new pod in the order %v, want b then a", waves.started)
		}
		if peaks[0] != 2 {
			t.Errorf("at most %d nodes lacked a Ready pod at once; want the update to use max-unavailable 2", peaks[0])
		}
		checkWrites(t, writesOf(c.proxy.Snapshot().Sub(before)), 4, 4, 0)
	})

	t.Run("canary", func(t *testing.T) {
		ns, _ := c.deploy(t, map[string]string{annCanary: "e2e/canary=true"}, nil)
		w := watchInvariantsOf(t, c.client, ns, "app=agent", maxNodesWithoutReadyPod(c.nodes, 1), maxLivePodsPerNode(1))
		before := c.proxy.Snapshot()
		mutateDaemonSet(t, c.client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
		rev2 := c.revisionHash(t, ns, 2)
		waitProgressing(t, c.client, ns, "agent", v1.ConditionTrue, "WaitingForPromotion")
		byNode, err := podsByNode(context.Background(), c.client, ns)
		if err != nil {
			t.Fatal(err)
		}
		for i, node := range c.nodes {
			canary := i%2 == 0
			pods := byNode[node]
			if len(pods) != 1 || (pods[0].Labels[apps.ControllerRevisionHashLabelKey] == rev2) != canary {
				var hashes []string
				for _, p := range pods {
					hashes = append(hashes, p.Labels[apps.ControllerRevisionHashLabelKey])
				}
				t.Errorf("node %s (canary %t) runs %d pods, hashes %v; want the new revision on canaries only", node, canary, len(pods), hashes)
			}
		}
		c.everynode(t, "rollout", "promote", "agent", "-n", ns)
		c.waitAllOn(t, ns, 2)
		waitProgressing(t, c.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
		w.stop(t)
		checkWrites(t, writesOf(c.proxy.Snapshot().Sub(before)), 4, 4, 0)
	})

	t.Run("pause_across_a_restart", func(t *testing.T) {
		ns, _ := c.deploy(t, map[string]string{annPaused: "true"}, nil)
		before := c.proxy.Snapshot()
		uids := podUIDs(t, c.client, ns)
		mutateDaemonSet(t, c.client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
		c.revisionHash(t, ns, 2)
		waitProgressing(t, c.client, ns, "agent", v1.ConditionUnknown, "Paused")
		c.ctrl.kill()
		c.ctrl.start(t)
		c.ctrl.waitSynced(t, ns+"/agent")
		consistently(t, "a paused rollout replaces no pod across a restart", 3*time.Second, func(ctx context.Context) (bool, error) {
			return samePodUIDs(ctx, c.client, ns, uids), nil
		})
		w := watchInvariantsOf(t, c.client, ns, "app=agent", maxNodesWithoutReadyPod(c.nodes, 1), maxLivePodsPerNode(1))
		out := c.everynode(t, "rollout", "resume", "agent", "-n", ns)
		t.Logf("resume: %s", out)
		status := c.everynode(t, "rollout", "status", "agent", "-n", ns, "--timeout", "2m")
		if !strings.Contains(status, "successfully rolled out") {
			t.Errorf("everynode rollout status said:\n%s", status)
		}
		c.waitAllOn(t, ns, 2)
		w.stop(t)
		checkWrites(t, writesOf(c.proxy.Snapshot().Sub(before)), 4, 4, 0)
	})

	t.Run("crash_loop_rolled_back", func(t *testing.T) {
		ns, rev1 := c.deploy(t, map[string]string{annMaxRestarts: "2", annOnFailure: "rollback"}, func(ds *apps.DaemonSet) {
			// Until a healthy-time bake exists, minReadySeconds keeps a pod Ready
			// for a second at a time from counting as available.
			ds.Spec.MinReadySeconds = 3
		})
		w := watchInvariantsOf(t, c.client, ns, "app=agent", maxNodesWithoutReadyPod(c.nodes, 1), maxLivePodsPerNode(1))
		conds := watchProgressing(t, c.client, ns, "agent")
		before := c.proxy.Snapshot()
		mutateDaemonSet(t, c.client, ns, "agent", func(ds *apps.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Image = imageV2
			ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationRestartEvery: "1s"}
		})
		// The rollback restores revision 1's template, which kube-controller-manager
		// renumbers 3; everynode then replaces the crash-looping pod.
		pollUntil(t, "the rollback to revision 1's template", func(ctx context.Context) (bool, error) {
			return c.revisionHashNow(ctx, ns, 3) == rev1, nil
		})
		c.waitAllOn(t, ns, 3)
		waitProgressing(t, c.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
		w.stop(t)
		seen := conds.stop()
		if !slices.Contains(seen, "False/RolledBack") {
			t.Errorf("the Progressing condition went through %v, never False/RolledBack", seen)
		}
		ds, err := c.client.AppsV1().DaemonSets(ns).Get(context.Background(), "agent", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := ds.Spec.Template.Spec.Containers[0].Image; img != imageV1 {
			t.Errorf("after the rollback the template's image is %s, want %s", img, imageV1)
		}
		// One node took the bad release and was put back: two deletes, one rollback.
		checkWrites(t, writesOf(c.proxy.Snapshot().Sub(before)), 2, 2, 1)
	})
}

// TestSandboxCompanionMode starts `everynode sandbox --controller companion`, a
// managed cluster in one command, and rolls an opted-in OnDelete DaemonSet out in it.
func TestSandboxCompanionMode(t *testing.T) {
	dir, client, nodes := ownSandbox(t, "companion", 2)
	ns := "companion"
	createNamespace(t, client, ns)
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), companionDaemonSet(ns, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &companionCluster{dir: dir, client: client, nodes: nodes}
	c.waitAllOn(t, ns, 1)
	w := watchInvariantsOf(t, client, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	c.waitAllOn(t, ns, 2)
	final := waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	w.stop(t)
	events, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, e := range events.Items {
		if e.Reason == "NewRevisionAvailable" {
			sources = append(sources, e.Source.Component)
		}
	}
	sort.Strings(sources)
	if len(sources) == 0 || sources[0] != "everynode" {
		t.Errorf("NewRevisionAvailable events came from %v, want everynode", sources)
	}
	t.Logf("Progressing: %s: %s", final.Reason, final.Message)
}
