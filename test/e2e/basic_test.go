package e2e

import (
	"context"
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOnePodPerNodeWithExactStatus(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 2, map[string]string{"e2e/role": ns})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{"e2e/role": ns}))
	ds := waitRolledOut(t, ns, "agent", 2)

	if s := ds.Status; s.CurrentNumberScheduled != 2 || s.NumberReady != 2 || s.NumberMisscheduled != 0 || s.NumberUnavailable != 0 {
		t.Errorf("status = %+v, want 2 current/ready, none misscheduled or unavailable", s)
	}
	byNode, err := daemonPods(context.Background(), ns, "agent")
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		pods := byNode[node]
		if len(pods) != 1 {
			t.Fatalf("node %s has %d pods, want 1", node, len(pods))
		}
		pod := pods[0]
		if pod.Spec.NodeName != node || pod.Status.Phase != v1.PodRunning {
			t.Errorf("pod %s: node %q phase %s, want bound to %s and Running", pod.Name, pod.Spec.NodeName, pod.Status.Phase, node)
		}
		if !strings.HasPrefix(pod.Name, "agent-") || pod.Labels[apps.ControllerRevisionHashLabelKey] == "" || pod.Labels["pod-template-generation"] != "1" {
			t.Errorf("pod %s labels %v: want generateName agent-, a revision hash and pod-template-generation 1", pod.Name, pod.Labels)
		}
		if ref := metav1.GetControllerOf(&pod); ref == nil || ref.Name != "agent" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s controller ref = %+v", pod.Name, ref)
		}
	}
	out := kubectl(t, "rollout", "status", "daemonset/agent", "-n", ns, "--timeout=30s")
	if !strings.Contains(out, "successfully rolled out") {
		t.Errorf("kubectl rollout status said %q", out)
	}
}

func TestNodeSelectorFollowsRelabelledNodes(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 3, map[string]string{"e2e/pool": ns})
	createDaemonSet(t, daemonSet(ns, "agent", map[string]string{"e2e/pool": ns, "e2e/tier": "a"}))
	waitRolledOut(t, ns, "agent", 0)

	labelNode(t, nodes[0], "e2e/tier", "a")
	labelNode(t, nodes[1], "e2e/tier", "a")
	waitRolledOut(t, ns, "agent", 2)

	labelNode(t, nodes[0], "e2e/tier", "b")
	waitRolledOut(t, ns, "agent", 1)
	waitFor(t, "the pod on the relabelled node to go", func(ctx context.Context) (bool, error) {
		byNode, err := daemonPods(ctx, ns, "agent")
		return err == nil && len(byNode[nodes[0]]) == 0 && len(byNode[nodes[1]]) == 1, err
	})
}

func TestNodeAffinityTermsAreORed(t *testing.T) {
	ns := newNamespace(t)
	nodes := newNodes(t, 3, map[string]string{"e2e/pool": ns})
	labelNode(t, nodes[0], "e2e/zone", "x")
	labelNode(t, nodes[1], "e2e/zone", "y")
	ds := daemonSet(ns, "agent", map[string]string{"e2e/pool": ns})
	ds.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
			{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "e2e/zone", Operator: v1.NodeSelectorOpIn, Values: []string{"x"}}}},
			{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{nodes[1]}}}},
		}},
	}}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 2)
	byNode, err := daemonPods(context.Background(), ns, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if len(byNode[nodes[0]]) != 1 || len(byNode[nodes[1]]) != 1 || len(byNode[nodes[2]]) != 0 {
		t.Errorf("pods by node = %v, want one on each of the two matching nodes only", podNames(byNode))
	}
}

func labelNode(t *testing.T, name, key, value string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"` + key + `":"` + value + `"}}}`)
	if _, err := env.client.CoreV1().Nodes().Patch(context.Background(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling node %s: %v", name, err)
	}
}

func podNames(byNode map[string][]v1.Pod) map[string][]string {
	out := map[string][]string{}
	for node, pods := range byNode {
		for _, p := range pods {
			out[node] = append(out[node], p.Name)
		}
	}
	return out
}
