package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The controller does not check whether a pod fits its node: the pod is created,
// the scheduler cannot bind it, and it stays Pending. Status counts it as desired
// and current, not ready or available.
func TestPodTooBigForItsNodeStaysPendingAndCountsAsCurrent(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 1, map[string]string{"e2e/pool": ns})
	ds := daemonSet(ns, "hog", map[string]string{"e2e/pool": ns})
	ds.Spec.Template.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("100") // nodes have 8
	createDaemonSet(t, ds)
	waitStatus(t, ns, "hog", counts{desired: 1, current: 1, updated: 1})

	var uid types.UID
	waitFor(t, "the scheduler to report the pod unschedulable", func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "hog")
		if err != nil || len(byNode[nodes[0]]) != 1 {
			return false, err
		}
		pod := byNode[nodes[0]][0]
		uid = pod.UID
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	consistently(t, "the pod stays Pending and unbound, and is not replaced", 2*time.Second, func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "hog")
		if err != nil {
			return false, err
		}
		pods := byNode[nodes[0]]
		return len(byNode) == 1 && len(pods) == 1 && pods[0].UID == uid && pods[0].Spec.NodeName == "" && pods[0].Status.Phase == v1.PodPending, nil
	})
	// kubectl's DESIRED CURRENT READY UP-TO-DATE AVAILABLE columns.
	fields := strings.Fields(kubectl(t, "get", "daemonset", "hog", "-n", ns, "--no-headers"))
	if len(fields) < 6 || strings.Join(fields[1:6], " ") != "1 1 0 1 0" {
		t.Errorf("kubectl get daemonset: %v, want DESIRED 1 CURRENT 1 READY 0 UP-TO-DATE 1 AVAILABLE 0", fields)
	}
}

// A pod a user made that matches the selector and is pinned to a node, with no
// owner, is adopted by the DaemonSet created afterwards: it gets the DaemonSet as
// its controller, keeps its UID, and no second pod goes to its node.
func TestOrphanPodsOnNodesAreAdopted(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 3, map[string]string{"e2e/pool": ns})
	ds := daemonSet(ns, "agent", map[string]string{"e2e/pool": ns})
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}

	orphan := func(name string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "agent"}},
			Spec:       *ds.Spec.Template.Spec.DeepCopy(),
		}
	}
	bound := orphan("by-hand-bound")
	bound.Spec.NodeName = nodes[0]
	pinned := orphan("by-hand-pinned")
	pinned.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{nodes[1]}}},
		}}},
	}}
	orphans := map[string]types.UID{}
	for node, pod := range map[string]*v1.Pod{nodes[0]: bound, nodes[1]: pinned} {
		created, err := env.client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating pod %s: %v", pod.Name, err)
		}
		orphans[node] = created.UID
	}
	waitFor(t, "the hand-made pods to run", func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "agent")
		if err != nil {
			return false, err
		}
		for node := range orphans {
			if len(byNode[node]) != 1 || !isPodReady(&byNode[node][0]) {
				return false, nil
			}
		}
		return true, nil
	})

	created := createDaemonSet(t, ds)
	// The adopted pods carry no revision hash, so only the new pod is up to date.
	waitStatus(t, ns, "agent", counts{desired: 3, current: 3, ready: 3, available: 3, updated: 1})
	byNode := mustDaemonPods(t, ns, "agent")
	uids := onePodPerNode(t, byNode)
	for node, uid := range orphans {
		pod := byNode[node][0]
		if pod.UID != uid {
			t.Errorf("node %s: pod %s (%s) replaced the hand-made pod %s", node, pod.Name, pod.UID, uid)
			continue
		}
		ref := metav1.GetControllerOf(&pod)
		if ref == nil || ref.UID != created.UID || ref.Kind != "DaemonSet" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s: controller reference %+v, want the DaemonSet %s blocking owner deletion", pod.Name, ref, created.UID)
		}
	}
	if ref := metav1.GetControllerOf(&byNode[nodes[2]][0]); ref == nil || ref.UID != created.UID {
		t.Errorf("the pod on %s is not the DaemonSet's: %+v", nodes[2], ref)
	}
	consistently(t, "one pod per node, the adopted ones kept", 2*time.Second, samePods(ns, "agent", uids))
}
