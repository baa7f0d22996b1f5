package controller

import (
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/everynode/everynode/internal/daemon"
)

const (
	agentsGate = "example.com/agents"
	brokenGate = "example.com/broken"
)

// gatingDaemonSet returns a DaemonSet gating on key, tolerating it, on the nodes
// labelled os=linux.
func gatingDaemonSet(name, key string) *apps.DaemonSet {
	ds := newDaemonSet(name)
	ds.Annotations = map[string]string{daemon.AnnotationNodeGate: key}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"os": "linux"}
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	return ds
}

func gateTaint(key string) v1.Taint {
	return v1.Taint{Key: key, Value: "true", Effect: v1.TaintEffectNoSchedule}
}

func (h *harness) taintKeys(node string) []string {
	h.t.Helper()
	n, err := h.client.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("reading node %s: %v", node, err)
	}
	var keys []string
	for _, t := range n.Spec.Taints {
		keys = append(keys, t.Key+":"+string(t.Effect))
	}
	return keys
}

// The gate opens on the nodes where the gating pod is available, and only there: a
// node whose gating pod is never Ready, and a node no gating DaemonSet selects, keep
// their taints; other taints stay. In both modes.
// In full mode also under a client rate limit, where the taint removals take their
// tokens from the pod write dispatchers (writeQueue.takeToken).
func TestNodeGate(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		limiter    flowcontrol.RateLimiter
	}{
		{ModeFull, ModeFull, nil},
		{"full-rate-limited", ModeFull, flowcontrol.NewTokenBucketRateLimiter(50, 5)},
		{ModeCompanion, ModeCompanion, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{mode: tc.mode, nodeGate: true, limiter: tc.limiter})
			other := v1.Taint{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule}
			linux := map[string]string{"os": "linux"}
			h.createNode("ready-1", linux, gateTaint(agentsGate))
			h.createNode("ready-2", linux, gateTaint(agentsGate), other)
			h.createNode("broken", linux, gateTaint(brokenGate))
			h.createNode("windows", map[string]string{"os": "windows"}, gateTaint(agentsGate))
			agent := gatingDaemonSet("agent", agentsGate)
			agent.Spec.Template.Spec.Tolerations = append(agent.Spec.Template.Spec.Tolerations, v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists})
			agent = h.createDaemonSet(agent)
			broken := gatingDaemonSet("broken", brokenGate)
			broken.Spec.Template.Annotations = map[string]string{annotationNeverReady: "true"}
			broken = h.createDaemonSet(broken)

			h.waitFor("the gate taint gone from ready-1 and ready-2", func() bool {
				return len(h.taintKeys("ready-1")) == 0 && strings.Join(h.taintKeys("ready-2"), ",") == "dedicated:NoSchedule"
			})
			for node, pods := range h.podsByNode(agent) {
				if node == "ready-1" || node == "ready-2" {
					if len(pods) != 1 || !isRunningReady(&pods[0]) {
						t.Errorf("gate open on %s with agent pods %v", node, pods)
					}
				}
			}
			h.waitFor("the broken DaemonSet's pod on its node, never Ready", func() bool { return len(h.podsByNode(broken)["broken"]) == 1 })
			for _, round := range []string{"first", "again after a resync's worth of events"} {
				h.step()
				if got := strings.Join(h.taintKeys("broken"), ","); got != brokenGate+":NoSchedule" {
					t.Errorf("%s: node broken has taints %q; its gating pod is never Ready, so the gate taint must stay", round, got)
				}
				if got := strings.Join(h.taintKeys("windows"), ","); got != agentsGate+":NoSchedule" {
					t.Errorf("%s: node windows has taints %q; no gating DaemonSet selects it, so the gate taint must stay", round, got)
				}
			}
		})
	}
}

// A gating DaemonSet that does not tolerate its own key gets a Warning event and the
// NodeGateFailure condition, which goes once the toleration is added; with the gate
// off, a gating DaemonSet is marked NodeGateOff.
func TestNodeGateFailure(t *testing.T) {
	h := newHarness(t, harnessOptions{nodeGate: true})
	ds := gatingDaemonSet("blind", agentsGate)
	ds.Spec.Template.Spec.Tolerations = nil
	h.createDaemonSet(ds)
	h.waitFor("the NodeGateFailure condition", func() bool {
		c := daemon.Condition(h.daemonSet("blind").Status.Conditions, daemon.ConditionNodeGate)
		return c != nil && c.Status == v1.ConditionTrue && c.Reason == string(daemon.ReasonNodeGateInvalid) &&
			strings.Contains(c.Message, "add the toleration")
	})
	h.waitFor("a NodeGateInvalid warning event", func() bool { return len(h.events(string(daemon.ReasonNodeGateInvalid))) > 0 })
	h.changeTemplate("blind", func(t *v1.PodTemplateSpec) {
		t.Spec.Tolerations = []v1.Toleration{{Key: agentsGate, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	})
	h.waitFor("the NodeGateFailure condition removed", func() bool {
		ds := h.daemonSet("blind")
		return daemon.Condition(ds.Status.Conditions, daemon.ConditionNodeGate) == nil
	})

	off := newHarness(t, harnessOptions{})
	off.createNode("n1", map[string]string{"os": "linux"}, gateTaint(agentsGate))
	off.createDaemonSet(gatingDaemonSet("agent", agentsGate))
	off.waitFor("the NodeGateFailure condition, NodeGateOff", func() bool {
		c := daemon.Condition(off.daemonSet("agent").Status.Conditions, daemon.ConditionNodeGate)
		return c != nil && c.Reason == ReasonNodeGateOff
	})
	off.waitFor("the agent pod Running on n1", func() bool { return off.converged("agent", []string{"n1"}) })
	if got := off.taintKeys("n1"); len(got) != 1 {
		t.Errorf("with the gate off, n1 has taints %v; want the gate taint kept", got)
	}
}

// A node gated on two keys, each by its own DaemonSet, loses both taints once both
// pods are available (in one patch, whose indexes are all from the same node), and
// keeps its other taint.
func TestNodeGateTwoKeys(t *testing.T) {
	h := newHarness(t, harnessOptions{nodeGate: true})
	other := v1.Taint{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule}
	h.createNode("n1", map[string]string{"os": "linux"}, gateTaint(agentsGate), other, gateTaint(brokenGate))
	for name, key := range map[string]string{"agent": agentsGate, "storage": brokenGate} {
		ds := gatingDaemonSet(name, key)
		ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
		h.createDaemonSet(ds)
	}
	h.waitFor("both gate taints gone, the other kept", func() bool {
		return strings.Join(h.taintKeys("n1"), ",") == "dedicated:NoSchedule"
	})
}
