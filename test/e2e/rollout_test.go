package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/everynode/everynode/internal/nodesim"
)

const (
	imageV1 = "registry.k8s.io/pause:3.10"
	imageV2 = "registry.k8s.io/pause:3.9"
)

// A rolling update with maxUnavailable=1 replaces pods one node at a time: at no
// moment do two of the nodes lack a Ready pod, and no node ever runs two pods.
func TestRollingUpdateNeverExceedsMaxUnavailable(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 4, map[string]string{"e2e/pool": ns})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{"e2e/pool": ns}))
	waitRolledOut(t, ns, "agent", 4)
	oldHash := waitRevisionHash(t, ns, "agent", 1)

	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	kubectl(t, "set", "image", "daemonset/agent", "agent="+imageV2, "-n", ns)
	waitRolledOut(t, ns, "agent", 4)
	if peaks := w.stop(t); peaks[0] != 1 {
		t.Errorf("the watcher saw at most %d nodes without a Ready pod during the rollout, want exactly 1", peaks[0])
	}
	assertAllOnRevision(t, ns, "agent", nodes, oldHash, waitRevisionHash(t, ns, "agent", 2), imageV2)
	if out := kubectl(t, "rollout", "status", "daemonset/agent", "-n", ns, "--timeout=30s"); !strings.Contains(out, "successfully rolled out") {
		t.Errorf("kubectl rollout status said %q", out)
	}
}

// A surging rolling update (maxSurge=1, maxUnavailable=0) starts the new pod next
// to the old one, and removes the old one only once the new one has been Ready
// for minReadySeconds: at no moment is a node without a Ready pod, and at no
// moment do two nodes run two pods.
func TestSurgeRollingUpdateKeepsEveryNodeServing(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 3, map[string]string{"e2e/pool": ns})
	ds := daemonSet(ns, "agent", map[string]string{"e2e/pool": ns})
	ds.Spec.MinReadySeconds = 2
	ds.Spec.UpdateStrategy.RollingUpdate = &apps.RollingUpdateDaemonSet{
		MaxSurge:       ptrIntOrString(intstr.FromInt32(1)),
		MaxUnavailable: ptrIntOrString(intstr.FromInt32(0)),
	}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 3)
	oldHash := waitRevisionHash(t, ns, "agent", 1)

	w := watchInvariants(t, ns, "app=agent", maxNodesWithTwoPods(1), maxNodesWithoutReadyPod(nodes, 0), maxLivePodsPerNode(2))
	kubectl(t, "set", "image", "daemonset/agent", "agent="+imageV2, "-n", ns)
	waitRolledOut(t, ns, "agent", 3)
	if peaks := w.stop(t); peaks[0] != 1 {
		t.Errorf("the watcher saw at most %d nodes with two pods during the rollout, want exactly 1", peaks[0])
	}
	assertAllOnRevision(t, ns, "agent", nodes, oldHash, waitRevisionHash(t, ns, "agent", 2), imageV2)
}

// With the OnDelete strategy a template change replaces nothing; a pod the user
// deletes comes back from the new template, and the others keep the old one.
func TestOnDeleteReplacesOnlyDeletedPods(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 3, map[string]string{"e2e/pool": ns})
	ds := daemonSet(ns, "agent", map[string]string{"e2e/pool": ns})
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	createDaemonSet(t, ds)
	waitStatus(t, ns, "agent", counts{desired: 3, current: 3, ready: 3, available: 3, updated: 3})
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))
	oldHash := waitRevisionHash(t, ns, "agent", 1)

	kubectl(t, "set", "image", "daemonset/agent", "agent="+imageV2, "-n", ns)
	waitStatus(t, ns, "agent", counts{desired: 3, current: 3, ready: 3, available: 3})
	newHash := waitRevisionHash(t, ns, "agent", 2)
	consistently(t, "no pod is replaced", 2*time.Second, samePods(ns, "agent", before))

	kubectl(t, "delete", "pod", mustDaemonPods(t, ns, "agent")[nodes[0]][0].Name, "-n", ns)
	waitStatus(t, ns, "agent", counts{desired: 3, current: 3, ready: 3, available: 3, updated: 1})
	byNode := mustDaemonPods(t, ns, "agent")
	after := onePodPerNode(t, byNode)
	for _, node := range nodes {
		pod := byNode[node][0]
		hash, gen := pod.Labels[apps.ControllerRevisionHashLabelKey], pod.Labels["pod-template-generation"]
		switch {
		case node == nodes[0] && (after[node] == before[node] || hash != newHash || gen != "2" || pod.Spec.Containers[0].Image != imageV2):
			t.Errorf("replacement pod %s: uid %s (was %s), hash %s, generation %s, image %s; want a new pod with hash %s, generation 2, image %s",
				pod.Name, after[node], before[node], hash, gen, pod.Spec.Containers[0].Image, newHash, imageV2)
		case node != nodes[0] && (after[node] != before[node] || hash != oldHash):
			t.Errorf("pod %s on %s: uid %s (was %s), hash %s; want it untouched with hash %s", pod.Name, node, after[node], before[node], hash, oldHash)
		}
	}
}

// `kubectl rollout undo` returns to the previous revision's template, reusing its
// hash: pods that still run that template are kept, only the others are replaced.
// Here revision 2's pods never become Ready, so its rollout stops after one node,
// and the undo must replace that pod only.
func TestRolloutUndoKeepsPodsAlreadyOnTheTargetRevision(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 3, map[string]string{"e2e/pool": ns})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{"e2e/pool": ns}))
	waitRolledOut(t, ns, "agent", 3)
	rev1 := waitRevisionHash(t, ns, "agent", 1)

	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationReady: "false"}
	})
	rev2 := waitRevisionHash(t, ns, "agent", 2)
	// maxUnavailable=1 is spent on the first node whose new pod never becomes Ready.
	waitStatus(t, ns, "agent", counts{desired: 3, current: 3, ready: 2, available: 2, updated: 1})
	var stuckNode string
	kept := map[string]types.UID{}
	for node, pods := range mustDaemonPods(t, ns, "agent") {
		if len(pods) != 1 {
			t.Fatalf("node %s has %d pods, want 1", node, len(pods))
		}
		switch pods[0].Labels[apps.ControllerRevisionHashLabelKey] {
		case rev1:
			kept[node] = pods[0].UID
		case rev2:
			stuckNode = node
		}
	}
	if stuckNode == "" || len(kept) != 2 {
		t.Fatalf("want one pod of revision 2 and two of revision 1, got %v", podNames(mustDaemonPods(t, ns, "agent")))
	}
	consistently(t, "the rollout stays stuck on one node", 2*time.Second, func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "agent")
		if err != nil {
			return false, err
		}
		for node, uid := range kept {
			if len(byNode[node]) != 1 || byNode[node][0].UID != uid {
				return false, nil
			}
		}
		return true, nil
	})
	if got := historyRevisions(t, ns, "agent"); got != "1 2" {
		t.Errorf("kubectl rollout history lists revisions %q, want \"1 2\"", got)
	}

	kubectl(t, "rollout", "undo", "daemonset/agent", "-n", ns)
	waitRolledOut(t, ns, "agent", 3)
	if out := kubectl(t, "rollout", "status", "daemonset/agent", "-n", ns, "--timeout=30s"); !strings.Contains(out, "successfully rolled out") {
		t.Errorf("kubectl rollout status said %q", out)
	}
	byNode := mustDaemonPods(t, ns, "agent")
	after := onePodPerNode(t, byNode)
	for _, node := range nodes {
		pod := byNode[node][0]
		if hash := pod.Labels[apps.ControllerRevisionHashLabelKey]; hash != rev1 || pod.Spec.Containers[0].Image != imageV1 {
			t.Errorf("pod %s on %s: hash %s image %s, want revision 1's hash %s and image %s", pod.Name, node, hash, pod.Spec.Containers[0].Image, rev1, imageV1)
		}
		if uid, ok := kept[node]; ok && after[node] != uid {
			t.Errorf("pod on %s already ran revision 1 but was replaced by %s", node, pod.Name)
		}
	}
	if after[stuckNode] == "" || byNode[stuckNode][0].Labels[apps.ControllerRevisionHashLabelKey] != rev1 {
		t.Errorf("the revision 2 pod on %s was not replaced", stuckNode)
	}
	if got := historyRevisions(t, ns, "agent"); got != "2 3" {
		t.Errorf("after the undo kubectl rollout history lists revisions %q, want \"2 3\"", got)
	}
	if h := revisionHashes(t, ns, "agent"); h[3] != rev1 || h[2] != rev2 {
		t.Errorf("ControllerRevisions by number = %v, want revision 3 to reuse revision 1's hash %s", h, rev1)
	}
}

// historyRevisions are the revision numbers `kubectl rollout history` lists, in order.
func historyRevisions(t *testing.T, ns, name string) string {
	t.Helper()
	var revs []string
	for _, line := range strings.Split(kubectl(t, "rollout", "history", "daemonset/"+name, "-n", ns), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				revs = append(revs, f[0])
			}
		}
	}
	return strings.Join(revs, " ")
}

// assertAllOnRevision checks that every node runs exactly one pod of the new
// revision, with its image, and that the new hash is not the old one.
func assertAllOnRevision(t *testing.T, ns, name string, nodes []string, oldHash, newHash, image string) {
	t.Helper()
	if oldHash == newHash {
		t.Fatalf("the template change kept the revision hash %s", oldHash)
	}
	byNode := mustDaemonPods(t, ns, name)
	if len(byNode) != len(nodes) {
		t.Errorf("pods by node = %v, want one on each of %v", podNames(byNode), nodes)
	}
	for _, node := range nodes {
		pods := byNode[node]
		if len(pods) != 1 {
			t.Errorf("node %s has pods %v, want one", node, podNames(byNode)[node])
			continue
		}
		if hash := pods[0].Labels[apps.ControllerRevisionHashLabelKey]; hash != newHash || pods[0].Spec.Containers[0].Image != image || pods[0].Status.Phase != v1.PodRunning {
			t.Errorf("pod %s: hash %s, image %s, phase %s; want hash %s, image %s, Running", pods[0].Name, hash, pods[0].Spec.Containers[0].Image, pods[0].Status.Phase, newHash, image)
		}
	}
}
