package inspect

import (
	"bytes"
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/everynode/everynode/internal/daemon"
)

const gateKey = "example.com/agents"

// explain node/NAME: a gated node whose gating pod is not Ready says so, naming the
// DaemonSet; a node no gating DaemonSet selects says nothing proves it ready; an
// ungated node says no gate holds it.
func TestExplainNodeGates(t *testing.T) {
	ds := newDS("agent", map[string]string{daemon.AnnotationNodeGate: gateKey})
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"}
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: gateKey, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	hash := daemon.TemplateHash(&ds.Spec.Template, nil)
	gated := func(n *v1.Node) *v1.Node {
		n.Spec.Taints = []v1.Taint{{Key: gateKey, Effect: v1.TaintEffectNoSchedule}}
		return n
	}
	pod := newPod(ds, "agent-w1", hash, "w1", false)
	pod.Spec.NodeName = "w1"
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	elsewhere := newPod(ds, "agent-w2", hash, "w2", true)
	elsewhere.Spec.NodeName = "w2"
	client := fake.NewClientset(ds, pod, elsewhere,
		gated(newNode("w1", "role", "worker")), gated(newNode("infra", "role", "infra")), newNode("w2", "role", "worker"))

	for _, tc := range []struct {
		node string
		want []string
	}{
		{"w1", []string{"Node gate " + gateKey + ":NoSchedule on node w1: closed [WaitingForGatingPods]", "prod/agent: pod agent-w1 is not Ready (ImagePullBackOff)"}},
		{"infra", []string{"closed [NoGatingDaemonSet]", "nothing proves the node ready", "prod/agent: should not run here"}},
		{"w2", []string{"Node w2 has no NoSchedule taint that a DaemonSet gates on"}},
	} {
		g, err := ExplainNodeGates(context.Background(), client, tc.node, t0)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := g.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("explain node/%s:\n%s\nwant it to say %q", tc.node, out.String(), w)
			}
		}
	}
	if _, err := ExplainNodeGates(context.Background(), client, "nope", t0); err == nil || !strings.Contains(err.Error(), `node "nope" not found`) {
		t.Errorf("a missing node: error %v, want one naming it", err)
	}
}
