package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/everynode/everynode/internal/nodesim"
)

// TestInPlaceUpdate: with rollout.everynode.dev/in-place, an image change updates
// every pod in place — the same pods, restarted once with the new image — never more
// than maxUnavailable at once (watched), with the status, `kubectl rollout status`
// and `rollout history` of a replacement update; `kubectl rollout undo` goes back in
// place too.
func TestInPlaceUpdate(t *testing.T) {
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 4, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
	ds.Annotations = map[string]string{annInPlace: "true"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 4)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))
	t.Cleanup(func() {
		if t.Failed() {
			logRollout(t, ns, "agent")
		}
	})

	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 2), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	rev2 := waitRevisionHash(t, ns, "agent", 2)
	waitRolledOut(t, ns, "agent", 4)
	got := waitStatus(t, ns, "agent", counts{desired: 4, current: 4, ready: 4, available: 4, updated: 4})
	peaks := w.stop(t)
	if peaks[0] == 0 {
		t.Errorf("no node was ever without a Ready pod: the pods did not restart for their new image")
	}
	checkInPlace(t, ns, before, rev2, got.Annotations[apps.DeprecatedTemplateGeneration], imageV2, 1)
	if out := kubectl(t, "rollout", "status", "daemonset/agent", "-n", ns, "--timeout=30s"); !strings.Contains(out, "successfully rolled out") {
		t.Errorf("kubectl rollout status said %q", out)
	}
	history := kubectl(t, "rollout", "history", "daemonset/agent", "-n", ns)
	for _, rev := range []string{"\n1 ", "\n2 "} {
		if !strings.Contains(history, rev) {
			t.Errorf("kubectl rollout history lacks revision %q:\n%s", strings.TrimSpace(rev), history)
		}
	}
	if n := countEvents(t, ns, "SuccessfulInPlaceUpdate"); n != 4 {
		t.Errorf("%d SuccessfulInPlaceUpdate events, want 4", n)
	}
	if n := countEvents(t, ns, "SuccessfulDelete"); n != 0 {
		t.Errorf("%d pods deleted; want none", n)
	}

	w = watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 2), maxLivePodsPerNode(1))
	kubectl(t, "rollout", "undo", "daemonset/agent", "-n", ns)
	waitFor(t, "revision 3, the undo", func(ctx context.Context) (bool, error) {
		return revisionHashes(t, ns, "agent")[3] == rev1, nil
	})
	got = waitRolledOut(t, ns, "agent", 4)
	w.stop(t)
	checkInPlace(t, ns, before, rev1, got.Annotations[apps.DeprecatedTemplateGeneration], imageV1, 2)
}

// podTemplateGeneration is the label that carries a daemon pod's template generation.
const podTemplateGeneration = "pod-template-generation"

// checkInPlace checks that each node still runs the pod it had (before), now a pod
// of revision hash and template generation gen, running image after restarts
// restarts.
func checkInPlace(t *testing.T, ns string, before map[string]types.UID, hash, gen, image string, restarts int32) {
	t.Helper()
	byNode := mustDaemonPods(t, ns, "agent")
	for node, uid := range before {
		pods := byNode[node]
		if len(pods) != 1 || pods[0].UID != uid {
			t.Errorf("node %s runs %v; want its pod %s, updated in place", node, podNames(byNode)[node], uid)
			continue
		}
		p := pods[0]
		if p.Labels[apps.ControllerRevisionHashLabelKey] != hash || p.Labels[podTemplateGeneration] != gen {
			t.Errorf("pod %s labels %v; want revision %s and template generation %s", p.Name, p.Labels, hash, gen)
		}
		if p.Spec.Containers[0].Image != image || len(p.Status.ContainerStatuses) != 1 ||
			p.Status.ContainerStatuses[0].Image != image || p.Status.ContainerStatuses[0].RestartCount != restarts {
			t.Errorf("pod %s: spec image %s, container statuses %+v; want %s running after %d restarts",
				p.Name, p.Spec.Containers[0].Image, p.Status.ContainerStatuses, image, restarts)
		}
	}
}

// countEvents counts the events of namespace ns with reason.
func countEvents(t *testing.T, ns, reason string) int {
	t.Helper()
	list, err := env.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	n := 0
	for _, e := range list.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

// inPlaceAgent runs the DaemonSet agent, with in-place updates (maxUnavailable 1),
// rolled out on n new nodes of a new namespace, and returns the namespace, the nodes
// and each node's pod.
func inPlaceAgent(t *testing.T, n int) (string, []string, map[string]types.UID) {
	t.Helper()
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, n, pool)
	ds := daemonSet(ns, "agent", pool)
	ds.Annotations = map[string]string{annInPlace: "true"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", int32(n))
	return ns, nodes, onePodPerNode(t, mustDaemonPods(t, ns, "agent"))
}

// TestInPlaceFallsBackToReplacement: a change beyond the images (here an env var
// with the image) replaces the pods, in-place annotation or not.
func TestInPlaceFallsBackToReplacement(t *testing.T) {
	ns, nodes, before := inPlaceAgent(t, 3)

	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = imageV2
		ds.Spec.Template.Spec.Containers[0].Env = []v1.EnvVar{{Name: "MODE", Value: "new"}}
	})
	waitRevisionHash(t, ns, "agent", 2)
	waitRolledOut(t, ns, "agent", 3)
	w.stop(t)
	for node, pods := range mustDaemonPods(t, ns, "agent") {
		if len(pods) != 1 || pods[0].UID == before[node] {
			t.Errorf("node %s: %v; want its pod replaced", node, podNames(map[string][]v1.Pod{node: pods})[node])
		}
	}
	if n := countEvents(t, ns, "SuccessfulInPlaceUpdate"); n != 0 {
		t.Errorf("%d pods updated in place; want none", n)
	}
}

// TestInPlaceReleaseThatFailsRollsBack: the new image cannot be pulled on the node
// the in-place update reaches first. The failure is seen at once (ErrImagePull
// under max-restarts), the release is rolled back, in place, and no other node is
// touched: every node ends with the pod it began with, on revision 1's template.
func TestInPlaceReleaseThatFailsRollsBack(t *testing.T) {
	const missing = "registry.k8s.io/pause:missing"
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	nodes := newNodes(t, 3, pool)
	for _, node := range nodes {
		setNodeAnnotation(t, node, nodesim.AnnotationUnpullable, missing)
	}
	ds := daemonSet(ns, "agent", pool)
	ds.Annotations = map[string]string{annInPlace: "true", annMaxRestarts: "2", annOnFailure: "rollback"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 3)
	rev1 := waitRevisionHash(t, ns, "agent", 1)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	before := onePodPerNode(t, mustDaemonPods(t, ns, "agent"))
	t.Cleanup(func() {
		if t.Failed() {
			logRollout(t, ns, "agent")
		}
	})

	conds := watchProgressing(t, env.client, ns, "agent")
	w := watchInvariants(t, ns, "app=agent", nodesOffRevision(nodes, rev1, 1), maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = missing })
	waitFor(t, "the rollback to revision 1's template", func(ctx context.Context) (bool, error) {
		return revisionHashes(t, ns, "agent")[3] == rev1, nil
	})
	got := waitRolledOut(t, ns, "agent", 3)
	waitProgressing(t, env.client, ns, "agent", v1.ConditionTrue, "NewRevisionAvailable")
	peaks := w.stop(t)
	seen := conds.stop()
	if !slices.Contains(seen, "False/RolledBack") {
		t.Errorf("the Progressing condition went through %v, never False/RolledBack", seen)
	}
	if peaks[0] != 1 {
		t.Errorf("%d nodes left revision 1; want the one the release reached", peaks[0])
	}
	byNode := mustDaemonPods(t, ns, "agent")
	reached := 0
	for node, uid := range before {
		pods := byNode[node]
		if len(pods) != 1 || pods[0].UID != uid || pods[0].Labels[apps.ControllerRevisionHashLabelKey] != rev1 || pods[0].Spec.Containers[0].Image != imageV1 {
			t.Errorf("node %s ends with %v; want its pod %s, on revision 1's template", node, podNames(byNode)[node], uid)
			continue
		}
		// The pod the release reached went there and back in place: it carries the
		// template generation of the rollback. The others were never touched.
		if pods[0].Status.ContainerStatuses[0].RestartCount > 0 {
			reached++
			if gen := pods[0].Labels[podTemplateGeneration]; gen != got.Annotations[apps.DeprecatedTemplateGeneration] {
				t.Errorf("pod %s, rolled back in place, has template generation %s, want %s", pods[0].Name, gen, got.Annotations[apps.DeprecatedTemplateGeneration])
			}
		}
	}
	if reached != 1 {
		t.Errorf("%d pods restarted; want the one the release reached", reached)
	}
}

// TestInPlaceResize: a release that changes a container's CPU (within its QoS class)
// and its image resizes and updates each pod in place: the same pods, the new CPU
// in spec and status, through the real API server's resize subresource.
func TestInPlaceResize(t *testing.T) {
	ns, nodes, before := inPlaceAgent(t, 3)
	t.Cleanup(func() {
		if t.Failed() {
			logRollout(t, ns, "agent")
		}
	})

	w := watchInvariants(t, ns, "app=agent", maxNodesWithoutReadyPod(nodes, 1), maxLivePodsPerNode(1))
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		c := &ds.Spec.Template.Spec.Containers[0]
		c.Image = imageV2
		c.Resources.Requests[v1.ResourceCPU] = resource.MustParse("20m")
	})
	rev2 := waitRevisionHash(t, ns, "agent", 2)
	got := waitRolledOut(t, ns, "agent", 3)
	w.stop(t)
	checkInPlace(t, ns, before, rev2, got.Annotations[apps.DeprecatedTemplateGeneration], imageV2, 1)
	for node, pods := range mustDaemonPods(t, ns, "agent") {
		p := pods[0]
		spec := p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]
		var status resource.Quantity
		if r := p.Status.ContainerStatuses[0].Resources; r != nil {
			status = r.Requests[v1.ResourceCPU]
		}
		if spec.String() != "20m" || status.String() != "20m" {
			t.Errorf("node %s: pod %s asks for %s CPU and runs with %s; want 20m, resized in place", node, p.Name, spec.String(), status.String())
		}
	}
}
