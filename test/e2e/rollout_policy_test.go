package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/everynode/everynode/internal/nodesim"
)

// The rollout annotations, spelled as users write them (docs/rollouts.md).
const (
	annPaused           = "rollout.everynode.dev/paused"
	annPartition        = "rollout.everynode.dev/partition"
	annCanary           = "rollout.everynode.dev/canary"
	annWaves            = "rollout.everynode.dev/waves"
	annWaveOrder        = "rollout.everynode.dev/wave-order"
	annProgressDeadline = "rollout.everynode.dev/progress-deadline"
	annOnFailure        = "rollout.everynode.dev/on-failure"
	annMaxRestarts      = "rollout.everynode.dev/max-restarts"
	annMaxUnavailable   = "rollout.everynode.dev/max-unavailable"
	annMinHealthy       = "rollout.everynode.dev/min-healthy"
	annSurgeFallback    = "rollout.everynode.dev/surge-fallback"
	annInPlace          = "rollout.everynode.dev/in-place"
	markFailed          = "rollout.everynode.dev/failed"
	markAvailable       = "rollout.everynode.dev/available-at"
)

// A release whose pods crash-loop never becomes available (each Ready spell is shorter
// than minReadySeconds), so the rollout stops on the first node; once no pod of it has
// become available for the progress deadline, everynode marks the revision failed and
// rolls the template back. Every pod ends on the first revision's hash, and at no
// moment do more nodes than maxUnavailable lack a Ready pod.
func TestRolloutPolicyCrashLoopRollsBack(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 3, pool)
	ds := daemonSet(ns, "agent", pool)
	// The crash-looping pod is Ready for 1s at first, then for 0.5s out of every 1s:
	// never for minReadySeconds.
	ds.Spec.MinReadySeconds = 3
	ds.Annotations = map[string]string{annProgressDeadline: "10s", annOnFailure: "rollback"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 3)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	waitFor(t, "revision 1 marked available", func(ctx context.Context) (bool, error) {
		r := revisionByHash(t, env.client, ns, "agent", rev1)
		return r != nil && r.Annotations[markAvailable] != "", nil
	})

	conds := watchProgressing(t, env.client, ns, "agent")
	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationRestartEvery: "1s"}
	})
	rev2 := waitRevisionHash(t, ns, "agent", 2)

	// The rollback restores revision 1's template, renumbered 3, and replaces the
	// crash-looping pod; pods already on revision 1 stay.
	waitFor(t, "the rollback to revision 1's template", func(ctx context.Context) (bool, error) {
		return revisionHashes(t, ns, "agent")[3] == rev1, nil
	})
	got := waitRolledOut(t, ns, "agent", 3)
	if img := got.Spec.Template.Spec.Containers[0].Image; img != imageV1 {
		t.Errorf("after the rollback the template's image is %s, want %s", img, imageV1)
	}
	byNode := mustDaemonPods(t, ns, "agent")
	onePodPerNode(t, byNode)
	for _, node := range nodes {
		pod := byNode[node][0]
		if hash := pod.Labels[apps.ControllerRevisionHashLabelKey]; hash != rev1 || !isPodReady(&pod) {
			t.Errorf("pod %s on %s: hash %s ready %t, want revision 1's hash %s and Ready", pod.Name, node, hash, isPodReady(&pod), rev1)
		}
	}
	w.stop(t)

	failed := revisionByHash(t, env.client, ns, "agent", rev2)
	if failed == nil {
		t.Fatalf("the failed revision %s is gone", rev2)
	}
	if mark := failed.Annotations[markFailed]; !strings.HasPrefix(mark, "2 ProgressDeadlineExceeded: ") {
		t.Errorf("revision 2 is marked %s=%q, want \"2 ProgressDeadlineExceeded: ...\"", markFailed, mark)
	}
	final := waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	seen := conds.stop()
	if !slices.Contains(seen, "False/RolledBack") {
		t.Errorf("the Progressing condition went through %v, never False/RolledBack", seen)
	}
	if i := slices.Index(seen, "False/RolledBack"); i >= 0 && slices.Index(seen, "True/RollingOut") > i {
		t.Errorf("the Progressing condition went through %v: rolling out again after the rollback", seen)
	}
	if ev := waitEvent(t, ns, "agent", "RolledBack"); ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, "rolled back to the template of revision 1") {
		t.Errorf("RolledBack event: %s %q, want a Warning naming revision 1", ev.Type, ev.Message)
	}
	t.Logf("Progressing went through %v, now %s: %s", seen, final.Reason, final.Message)
}

// With max-restarts and the default on-failure (pause), a pod of the new revision
// that restarts too often fails the rollout at once: the revision is marked, every
// other node keeps its pod, and `kubectl rollout undo` (a new current revision) lets
// the controller replace the crash-looping pod.
func TestRolloutPolicyRestartLimitPausesTheRollout(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 3, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Spec.MinReadySeconds = 3
	ds.Annotations = map[string]string{"rollout.everynode.dev/max-restarts": "1"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 3)
	rev1 := waitRevisionHash(t, ns, "agent", 1)

	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Spec.Template.Annotations = map[string]string{nodesim.AnnotationRestartEvery: "1s"}
	})
	rev2 := waitRevisionHash(t, ns, "agent", 2)
	cond := waitProgressing(t, env.client, ns, "agent", v1.ConditionFalse, "PodRestartLimitExceeded")
	if !strings.Contains(cond.Message, "more than max-restarts 1") {
		t.Errorf("PodRestartLimitExceeded message %q does not name the limit", cond.Message)
	}
	if ev := waitEvent(t, ns, "agent", "PodRestartLimitExceeded"); ev.Type != v1.EventTypeWarning {
		t.Errorf("PodRestartLimitExceeded event is of type %s, want Warning", ev.Type)
	}
	if mark := revisionByHash(t, env.client, ns, "agent", rev2).Annotations[markFailed]; !strings.HasPrefix(mark, "2 PodRestartLimitExceeded: ") {
		t.Errorf("revision 2 is marked %s=%q, want \"2 PodRestartLimitExceeded: ...\"", markFailed, mark)
	}
	// One node runs the crash-looping pod; the failure holds the other two.
	var stuck string
	held := map[string]types.UID{}
	for node, pods := range mustDaemonPods(t, ns, "agent") {
		if len(pods) != 1 {
			t.Fatalf("node %s has %d pods, want 1", node, len(pods))
		}
		if pods[0].Labels[apps.ControllerRevisionHashLabelKey] == rev2 {
			stuck = node
		} else {
			held[node] = pods[0].UID
		}
	}
	if stuck == "" || len(held) != 2 {
		t.Fatalf("want one pod of revision 2 and two of revision 1, got %v", podNames(mustDaemonPods(t, ns, "agent")))
	}
	consistently(t, "the failed rollout holds the other nodes", 4*time.Second, keepsPods(ns, "agent", held))

	kubectl(t, "rollout", "undo", "daemonset/agent", "-n", ns)
	waitRolledOut(t, ns, "agent", 3)
	w.stop(t)
	byNode := mustDaemonPods(t, ns, "agent")
	for node, uid := range held {
		if pods := byNode[node]; len(pods) != 1 || pods[0].UID != uid {
			t.Errorf("node %s already ran revision 1 but its pod was replaced: %v", node, podNames(byNode)[node])
		}
	}
	if pods := byNode[stuck]; len(pods) != 1 || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != rev1 {
		t.Errorf("the crash-looping pod on %s was not replaced by one of revision 1: %v", stuck, podNames(byNode)[stuck])
	}
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
}

// A canary selector updates only the nodes it matches; the other nodes keep their
// very pods until the annotation goes, and then they are updated too.
func TestRolloutPolicyCanaryWaitsForPromotion(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	canary := map[string]string{"e2e/pool": ns, "e2e/canary": "true"}
	nodes := newNodesLabelled(t, []map[string]string{pool, pool, pool, canary, canary})
	canaries, others := nodes[3:], nodes[:3]
	ds := daemonSet(ns, "agent", pool)
	ds.Annotations = map[string]string{annCanary: "e2e/canary=true"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 5)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))

	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	kubectl(t, "set", "image", "daemonset/agent", "agent="+imageV2, "-n", ns)
	rev2 := waitRevisionHash(t, ns, "agent", 2)
	waitStatus(t, ns, "agent", counts{desired: 5, current: 5, ready: 5, available: 5, updated: 2})
	cond := waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "WaitingForPromotion")
	t.Logf("Progressing: %s: %s", cond.Reason, cond.Message)
	byNode := mustDaemonPods(t, ns, "agent")
	for _, node := range canaries {
		if pods := byNode[node]; len(pods) != 1 || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != rev2 {
			t.Errorf("canary node %s has pods %v, want one of revision 2 (%s)", node, podNames(byNode)[node], rev2)
		}
	}
	held := map[string]types.UID{}
	for _, node := range others {
		held[node] = before[node]
	}
	consistently(t, "the nodes outside the canary keep their pods", 5*time.Second, func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "agent")
		if err != nil {
			return false, err
		}
		for node, uid := range held {
			if pods := byNode[node]; len(pods) != 1 || pods[0].UID != uid || pods[0].DeletionTimestamp != nil ||
				pods[0].Labels[apps.ControllerRevisionHashLabelKey] != rev1 {
				return false, nil
			}
		}
		return true, nil
	})

	// A node relabelled into the canary is updated, though its placement is the same.
	kubectl(t, "label", "node", others[0], "e2e/canary=true")
	waitStatus(t, ns, "agent", counts{desired: 5, current: 5, ready: 5, available: 5, updated: 3})
	if pods := mustDaemonPods(t, ns, "agent")[others[0]]; len(pods) != 1 || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != rev2 {
		t.Errorf("node %s, relabelled into the canary, has pods %v, want one of revision 2", others[0], podNames(mustDaemonPods(t, ns, "agent"))[others[0]])
	}
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "WaitingForPromotion")

	kubectl(t, "annotate", "daemonset/agent", annCanary+"-", "-n", ns)
	waitRolledOut(t, ns, "agent", 5)
	w.stop(t)
	assertAllOnRevision(t, ns, "agent", nodes, rev1, rev2, imageV2)
	// Without rollout annotations the condition is not kept.
	waitFor(t, "the Progressing condition removed", func(ctx context.Context) (bool, error) {
		ds, err := env.client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && progressingOf(ds) == nil, err
	})
}

// Waves by zone update one zone at a time, in wave order and then the remaining
// zones sorted: a pod watch checks in every state that at most one zone has a node
// mid-update, and that no zone is touched before the zones ahead of it are done.
func TestRolloutPolicyWavesGoZoneByZone(t *testing.T) {
	ns := newNamespace(t)
	var labels []map[string]string
	for _, zone := range []string{"a", "a", "b", "b", "c", "c"} {
		labels = append(labels, map[string]string{"e2e/pool": ns, "e2e/zone": zone})
	}
	nodes := newNodesLabelled(t, labels)
	zoneOf := map[string]string{}
	for i, node := range nodes {
		zoneOf[node] = labels[i]["e2e/zone"]
	}
	ds := daemonSet(ns, "agent", map[string]string{"e2e/pool": ns})
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
	ds.Annotations = map[string]string{annWaves: "e2e/zone", annWaveOrder: "c,a", "rollout.everynode.dev/wave-pause": "5s"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 6)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	conds := watchProgressing(t, env.client, ns, "agent")

	order := []string{"c", "a", "b"}
	waves := &waveTracker{zoneOf: zoneOf, order: order, oldHash: rev1}
	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 2), maxLivePodsPerNode(1),
		waves.zonesMidUpdate(), waves.zonesOutOfOrder())
	kubectl(t, "set", "image", "daemonset/agent", "agent="+imageV2, "-n", ns)
	rev2 := waitRevisionHash(t, ns, "agent", 2)
	waitRolledOut(t, ns, "agent", 6)
	peaks := w.stop(t)
	if peaks[2] != 1 {
		t.Errorf("the watcher saw at most %d zones mid-update, want exactly 1", peaks[2])
	}
	if !slices.Equal(waves.started, order) {
		t.Errorf("zones got their first new pod in the order %v, want %v", waves.started, order)
	}
	assertAllOnRevision(t, ns, "agent", nodes, rev1, rev2, imageV2)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	// Between the waves, the wave pause shows in the condition.
	seen := conds.stop()
	if want := []string{"True/NewRevisionAvailable", "True/RollingOut", "True/WaitingForWave", "True/RollingOut", "True/WaitingForWave", "True/RollingOut", "True/NewRevisionAvailable"}; !slices.Equal(seen, want) {
		t.Errorf("the Progressing condition went through %v, want %v", seen, want)
	}
}

// With new-nodes: stable, a node that joins while a rollout is held gets the
// revision the other nodes still run, and is updated with them once the hold ends.
func TestRolloutPolicyNewNodeGetsStableRevision(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 2, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Annotations = map[string]string{"rollout.everynode.dev/new-nodes": "stable"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 2)
	rev1 := waitRevisionHash(t, ns, "agent", 1)

	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Annotations[annPaused] = "true"
	})
	rev2 := waitRevisionHash(t, ns, "agent", 2)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionUnknown, "Paused")
	joined := newNodes(t, 1, pool)[0]
	waitStatus(t, ns, "agent", counts{desired: 3, current: 3, ready: 3, available: 3})
	pod := mustDaemonPods(t, ns, "agent")[joined]
	if len(pod) != 1 || pod[0].Labels[apps.ControllerRevisionHashLabelKey] != rev1 || pod[0].Spec.Containers[0].Image != imageV1 {
		t.Fatalf("node %s joined during the paused rollout and got pods %v, want one of revision 1 (%s) with %s", joined, podNames(mustDaemonPods(t, ns, "agent"))[joined], rev1, imageV1)
	}
	if gen, ok := pod[0].Labels["pod-template-generation"]; ok && gen != "1" {
		t.Errorf("the stable pod carries pod-template-generation %s, which would count it as current", gen)
	}

	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) { delete(ds.Annotations, annPaused) })
	waitRolledOut(t, ns, "agent", 3)
	assertAllOnRevision(t, ns, "agent", append(nodes, joined), rev1, rev2, imageV2)
}

// A partition and a pause are read from the DaemonSet, not remembered by the
// controller: a controller process killed and started again keeps holding the same
// nodes, and then holds every node while paused, even with the partition lowered.
func TestRolloutPolicyPartitionAndPauseHoldAcrossControllerRestart(t *testing.T) {
	dir, client, nodes := ownSandbox(t, "none", 4)
	ctrl := &controllerProcess{kubeconfig: filepath.Join(dir, "kubeconfig"), logs: filepath.Join(dir, "logs")}
	ctrl.start(t)
	t.Cleanup(ctrl.kill)

	ns := "partition"
	createNamespace(t, client, ns)
	ds := daemonSet(ns, "agent", nil)
	ds.Annotations = map[string]string{annPartition: "2"}
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "agent on every node", func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && ds.Status.NumberAvailable == 4 && ds.Status.UpdatedNumberScheduled == 4, nil
	})
	before := podUIDs(t, client, ns)
	if len(before) != 4 {
		t.Fatalf("pods by node %v, want one on each of %v", before, nodes)
	}
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })

	// Nodes are updated in name order: the two with the largest names stay.
	updated, kept := nodes[:2], nodes[2:]
	holding := func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		byNode, err := podsByNode(ctx, client, ns)
		if err != nil {
			return false, err
		}
		for _, node := range kept {
			if pods := byNode[node]; len(pods) != 1 || pods[0].UID != before[node] || pods[0].DeletionTimestamp != nil {
				return false, nil
			}
		}
		for _, node := range updated {
			if pods := byNode[node]; len(pods) != 1 || pods[0].Spec.Containers[0].Image != imageV2 || !isPodReady(&pods[0]) || pods[0].DeletionTimestamp != nil {
				return false, nil
			}
		}
		s := ds.Status
		return s.ObservedGeneration == ds.Generation && s.UpdatedNumberScheduled == 2 && s.NumberAvailable == 4, nil
	}
	pollUntil(t, "two nodes updated, two held by the partition", holding)
	waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "PartitionHeld")
	afterUpdate := podUIDs(t, client, ns)

	ctrl.kill()
	ctrl.start(t)
	ctrl.waitSynced(t, ns+"/agent")
	consistently(t, "the partition holds after the restart", 10*time.Second, func(ctx context.Context) (bool, error) {
		ok, err := holding(ctx)
		return ok && samePodUIDs(ctx, client, ns, afterUpdate), err
	})

	// Pause and lower the partition while no controller runs; the new one must
	// honour the pause from its first sync.
	ctrl.kill()
	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Annotations[annPaused] = "true"
		ds.Annotations[annPartition] = "0"
	})
	ctrl.start(t)
	ctrl.waitSynced(t, ns+"/agent")
	waitProgressing(t, client, ns, "agent", v1.ConditionUnknown, "Paused")
	consistently(t, "the pause holds every node after the restart", 10*time.Second, func(ctx context.Context) (bool, error) {
		ok, err := holding(ctx)
		return ok && samePodUIDs(ctx, client, ns, afterUpdate), err
	})

	mutateDaemonSet(t, client, ns, "agent", func(ds *apps.DaemonSet) { delete(ds.Annotations, annPaused) })
	pollUntil(t, "every node updated", func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := ds.Status
		return s.ObservedGeneration == ds.Generation && s.UpdatedNumberScheduled == 4 && s.NumberAvailable == 4 && s.DesiredNumberScheduled == 4, nil
	})
	byNode, err := podsByNode(context.Background(), client, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		if pods := byNode[node]; len(pods) != 1 || pods[0].Spec.Containers[0].Image != imageV2 {
			t.Errorf("node %s: %d pods, want one with %s", node, len(pods), imageV2)
		}
	}
	waitProgressing(t, client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
}

// An annotation that does not parse holds the whole update: no pod is deleted, the
// condition names the annotation, and a Warning event says so. Fixing it resumes.
func TestRolloutPolicyInvalidAnnotationHoldsUntilFixed(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 3, pool)
	createDaemonSet(t, daemonSet(ns, "agent", pool))
	waitRolledOut(t, ns, "agent", 3)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))

	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Annotations = map[string]string{annPartition: "abc"}
	})
	rev2 := waitRevisionHash(t, ns, "agent", 2)
	cond := waitProgressing(t, env.client, ns, "agent", v1.ConditionFalse, "InvalidAnnotation")
	if !strings.Contains(cond.Message, annPartition) || !strings.Contains(cond.Message, `"abc"`) {
		t.Errorf("InvalidAnnotation message %q does not name %s=\"abc\"", cond.Message, annPartition)
	}
	if ev := waitEvent(t, ns, "agent", "InvalidAnnotation"); ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, annPartition) {
		t.Errorf("InvalidAnnotation event: %s %q, want a Warning naming %s", ev.Type, ev.Message, annPartition)
	}
	consistently(t, "no pod is replaced", 5*time.Second, samePods(ns, "agent", before))
	waitStatus(t, ns, "agent", counts{desired: 3, current: 3, ready: 3, available: 3})

	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) { ds.Annotations[annPartition] = "0" })
	waitRolledOut(t, ns, "agent", 3)
	w.stop(t)
	assertAllOnRevision(t, ns, "agent", nodes, rev1, rev2, imageV2)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
}

// newNodesLabelled adds one simulated node per label set, as newNodes does, and
// returns their names sorted, each label set going to the node at its index.
func newNodesLabelled(t *testing.T, labels []map[string]string) []string {
	t.Helper()
	// Names sorted in the order of the label sets, so a test knows which node
	// comes first in everynode's node-name order.
	prefix := "e2e-node-" + strings.ToLower(rand.String(5))
	ctx := context.Background()
	var names []string
	for i, extra := range labels {
		name := fmt.Sprintf("%s-%d", prefix, i)
		l := map[string]string{nodesim.LabelSimulated: "true", v1.LabelHostname: name}
		for k, v := range extra {
			l[k] = v
		}
		if _, err := env.client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node: %v", err)
		}
		names = append(names, name)
		t.Cleanup(func() { _ = env.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	waitFor(t, "new nodes Ready and untainted", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			node, err := env.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodesim.Usable(node) {
				return false, nil
			}
		}
		return true, nil
	})
	return names
}

// progressingOf returns the DaemonSet's Progressing condition, or nil.
func progressingOf(ds *apps.DaemonSet) *apps.DaemonSetCondition {
	return conditionOf(ds, "Progressing")
}

// waitProgressing waits until the DaemonSet's Progressing condition has the status
// and reason, for its current generation, and returns it.
func waitProgressing(t *testing.T, client kubernetes.Interface, ns, name string, status v1.ConditionStatus, reason string) apps.DaemonSetCondition {
	t.Helper()
	var last *apps.DaemonSetCondition
	var found apps.DaemonSetCondition
	pollUntil(t, fmt.Sprintf("%s Progressing %s/%s", name, status, reason), func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = progressingOf(ds)
		if last == nil || ds.Status.ObservedGeneration < ds.Generation || last.Status != status || last.Reason != reason {
			return false, nil
		}
		found = *last
		return true, nil
	})
	return found
}

// conditionLog records, from a watch, every status/reason the DaemonSet's Progressing
// condition goes through.
type conditionLog struct {
	stopWatch func()
	mu        sync.Mutex
	seen      []string
}

// caughtUp waits, up to 10 s, for the watch to deliver the condition last read
// through the API (status/reason): a read can see a write before the watch does.
func (l *conditionLog) caughtUp(last string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		l.mu.Lock()
		done := len(l.seen) > 0 && l.seen[len(l.seen)-1] == last
		l.mu.Unlock()
		if done {
			return
		}
	}
}

func watchProgressing(t *testing.T, client kubernetes.Interface, ns, name string) *conditionLog {
	t.Helper()
	l := &conditionLog{}
	l.stopWatch = watchDaemonSet(t, client, ns, name, func(ds *apps.DaemonSet) {
		l.mu.Lock()
		defer l.mu.Unlock()
		c := progressingOf(ds)
		if c == nil {
			return
		}
		s := string(c.Status) + "/" + c.Reason
		if len(l.seen) == 0 || l.seen[len(l.seen)-1] != s {
			l.seen = append(l.seen, s)
		}
	})
	return l
}

// watchDaemonSet calls record with the DaemonSet as it is now, then with every
// version of it a watch delivers (one per write), until the returned stop is called
// or the test ends.
func watchDaemonSet(t *testing.T, client kubernetes.Interface, ns, name string, record func(*apps.DaemonSet)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	dss := client.AppsV1().DaemonSets(ns)
	ds, err := dss.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		cancel()
		t.Fatalf("reading DaemonSet %s: %v", name, err)
	}
	record(ds)
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		return dss.Watch(ctx, o)
	}}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, ds.ResourceVersion, lw)
	if err != nil {
		cancel()
		t.Fatalf("watching DaemonSet %s: %v", name, err)
	}
	go func() {
		defer close(done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				if ds, isDS := ev.Object.(*apps.DaemonSet); isDS && ev.Type != watch.Deleted {
					record(ds)
				}
			}
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// stop ends the watch and returns what it saw, in order.
func (l *conditionLog) stop() []string {
	l.stopWatch()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// revisionByHash returns the DaemonSet's ControllerRevision with that hash, or nil.
func revisionByHash(t *testing.T, client kubernetes.Interface, ns, name, hash string) *apps.ControllerRevision {
	t.Helper()
	list, err := client.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing ControllerRevisions: %v", err)
	}
	for i, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.Name == name && r.Labels[apps.ControllerRevisionHashLabelKey] == hash {
			return &list.Items[i]
		}
	}
	return nil
}

// waveTracker measures, from the invariant watcher's states, how a rollout by waves
// moves through the zones. Its measures run under the watcher's lock; read started
// only after the watcher stopped.
type waveTracker struct {
	zoneOf  map[string]string
	order   []string
	oldHash string
	// started lists the zones in the order they first ran a new pod.
	started []string
}

type nodeProgress int

const (
	nodeOld    nodeProgress = iota // one Ready pod of the old revision
	nodeNew                        // one Ready pod of a newer revision
	nodeMoving                     // anything else: being replaced, or a new pod not Ready yet
)

func (w *waveTracker) progress(pods []*v1.Pod) nodeProgress {
	if len(pods) != 1 || !isLive(pods[0]) || !isPodReady(pods[0]) {
		return nodeMoving
	}
	if pods[0].Labels[apps.ControllerRevisionHashLabelKey] == w.oldHash {
		return nodeOld
	}
	return nodeNew
}

// zones maps each zone to the progress of its nodes.
func (w *waveTracker) zones(byNode map[string][]*v1.Pod) map[string][]nodeProgress {
	out := map[string][]nodeProgress{}
	for node, zone := range w.zoneOf {
		out[zone] = append(out[zone], w.progress(byNode[node]))
		for _, p := range byNode[node] {
			if p.Labels[apps.ControllerRevisionHashLabelKey] != w.oldHash && !slices.Contains(w.started, zone) {
				w.started = append(w.started, zone)
			}
		}
	}
	return out
}

// zonesMidUpdate: zones with a node being replaced or whose new pod is not Ready.
func (w *waveTracker) zonesMidUpdate() invariant {
	return invariant{
		name:  "zones with a node mid-update",
		limit: 1,
		measure: func(byNode map[string][]*v1.Pod) (int, []string) {
			var moving []string
			for zone, nodes := range w.zones(byNode) {
				if slices.Contains(nodes, nodeMoving) {
					moving = append(moving, zone)
				}
			}
			sort.Strings(moving)
			return len(moving), moving
		},
	}
}

// zonesOutOfOrder: zones touched by the update while a zone ahead of them in the
// wave order is not done.
func (w *waveTracker) zonesOutOfOrder() invariant {
	return invariant{
		name:  "zones updated before the waves ahead of them were done",
		limit: 0,
		measure: func(byNode map[string][]*v1.Pod) (int, []string) {
			zones := w.zones(byNode)
			var early []string
			for i, zone := range w.order {
				touched := slices.ContainsFunc(zones[zone], func(p nodeProgress) bool { return p != nodeOld })
				if !touched {
					continue
				}
				for _, ahead := range w.order[:i] {
					if slices.ContainsFunc(zones[ahead], func(p nodeProgress) bool { return p != nodeNew }) {
						early = append(early, zone)
						break
					}
				}
			}
			return len(early), early
		},
	}
}

// waitSandboxNodes waits until the sandbox has n usable nodes and returns their
// names, sorted.
func waitSandboxNodes(t *testing.T, client kubernetes.Interface, n int) []string {
	t.Helper()
	var names []string
	pollUntil(t, fmt.Sprintf("%d usable nodes", n), func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		names = names[:0]
		for i := range list.Items {
			if nodesim.Usable(&list.Items[i]) {
				names = append(names, list.Items[i].Name)
			}
		}
		return len(names) == n, nil
	})
	sort.Strings(names)
	return names
}

// mutateDaemonSet is updateDaemonSet for another sandbox's client.
func mutateDaemonSet(t *testing.T, client kubernetes.Interface, ns, name string, change func(*apps.DaemonSet)) {
	t.Helper()
	pollUntil(t, "the DaemonSet update", func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		change(ds)
		_, err = client.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// podsByNode lists a namespace's pods by the node they are pinned to.
func podsByNode(ctx context.Context, client kubernetes.Interface, ns string) (map[string][]v1.Pod, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]v1.Pod{}
	for _, p := range pods.Items {
		out[targetNode(&p)] = append(out[targetNode(&p)], p)
	}
	return out, nil
}

// podUIDs maps each node to the UID of its one pod.
func podUIDs(t *testing.T, client kubernetes.Interface, ns string) map[string]types.UID {
	t.Helper()
	byNode, err := podsByNode(context.Background(), client, ns)
	if err != nil {
		t.Fatal(err)
	}
	return onePodPerNode(t, byNode)
}

// samePodUIDs reports whether the namespace holds exactly the given pods, live.
func samePodUIDs(ctx context.Context, client kubernetes.Interface, ns string, want map[string]types.UID) bool {
	byNode, err := podsByNode(ctx, client, ns)
	if err != nil || len(byNode) != len(want) {
		return false
	}
	for node, uid := range want {
		if pods := byNode[node]; len(pods) != 1 || pods[0].UID != uid || pods[0].DeletionTimestamp != nil {
			return false
		}
	}
	return true
}

// controllerProcess is an `everynode controller` run against a sandbox started with
// --controller=none, which a test kills and starts again.
type controllerProcess struct {
	kubeconfig, logs string
	args             []string // more flags
	env              []string // more environment variables
	runs             int
	cmd              *exec.Cmd
	synced           chan string // DaemonSet keys the current run logged a sync of
}

func (c *controllerProcess) start(t *testing.T) {
	t.Helper()
	c.runs++
	logFile, err := os.Create(filepath.Join(c.logs, fmt.Sprintf("everynode-controller-%d.log", c.runs)))
	if err != nil {
		t.Fatal(err)
	}
	// -v=4 logs every sync, so the test knows when the new process has looked.
	c.cmd = exec.Command(env.binary, append([]string{"controller", "--kubeconfig", c.kubeconfig, "--metrics-addr", "0", "-v", "4"}, c.args...)...)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Env = append(os.Environ(), c.env...)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout = logFile
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	synced := make(chan string, 1024)
	c.synced = synced
	go func() {
		defer logFile.Close()
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			line := s.Text()
			fmt.Fprintln(logFile, line)
			if strings.Contains(line, `"Synced DaemonSet"`) {
				if _, rest, ok := strings.Cut(line, `daemonset="`); ok {
					key, _, _ := strings.Cut(rest, `"`)
					select {
					case synced <- key:
					default:
					}
				}
			}
		}
	}()
}

// waitSynced waits until the current run has synced the DaemonSet.
func (c *controllerProcess) waitSynced(t *testing.T, key string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case got := <-c.synced:
			if got == key {
				return
			}
		case <-timeout:
			t.Fatalf("controller run %d did not sync %s within a minute; logs in %s", c.runs, key, c.logs)
		}
	}
}

// kill ends the current run at once, as a crash would.
func (c *controllerProcess) kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	c.cmd = nil
}
