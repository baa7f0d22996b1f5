package daemon

import (
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

const gateKey = "example.com/agents-not-ready"

// gating returns a DaemonSet gating on gateKey and tolerating it.
func gating(name string, opts ...dsOpt) *apps.DaemonSet {
	opts = append([]dsOpt{
		withAnnotations(AnnotationNodeGate, gateKey),
		withTolerations(v1.Toleration{Key: gateKey, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}),
	}, opts...)
	return newDS(name, opts...)
}

func member(ds *apps.DaemonSet, pods ...*v1.Pod) GateMember {
	return GateMember{DaemonSet: ds, Gate: ParseNodeGate(ds), Pods: pods}
}

func TestParseNodeGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ds      *apps.DaemonSet
		key     string
		problem string // a part of the problem; "" for none
	}{
		{"no annotation gates nothing", newDS("a"), "", ""},
		{"a tolerated key gates", gating("a"), gateKey, ""},
		{"spaces around the key are ignored", newDS("a", withAnnotations(AnnotationNodeGate, " "+gateKey+" "),
			withTolerations(v1.Toleration{Operator: v1.TolerationOpExists})), gateKey, ""},
		{"a toleration of every taint tolerates the gate", newDS("a", withAnnotations(AnnotationNodeGate, gateKey),
			withTolerations(v1.Toleration{Operator: v1.TolerationOpExists})), gateKey, ""},
		{"a toleration of the key's NoExecute only does not", newDS("a", withAnnotations(AnnotationNodeGate, gateKey),
			withTolerations(v1.Toleration{Key: gateKey, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})), gateKey, "does not tolerate the taint " + gateKey + ":NoSchedule"},
		{"an untolerated key is a problem that says the toleration to add", newDS("a", withAnnotations(AnnotationNodeGate, gateKey)),
			gateKey, "add the toleration {key: " + gateKey + ", operator: Exists, effect: NoSchedule}"},
		{"a key that is no taint key is a problem", newDS("a", withAnnotations(AnnotationNodeGate, "not a key!")), "", "is not a taint key"},
		{"an empty key is a problem", newDS("a", withAnnotations(AnnotationNodeGate, "")), "", "is not a taint key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := ParseNodeGate(tc.ds)
			if g.Key != tc.key {
				t.Errorf("key %q, want %q", g.Key, tc.key)
			}
			if (tc.problem == "") != (g.Problem == "") || !strings.Contains(g.Problem, tc.problem) {
				t.Errorf("problem %q, want one containing %q", g.Problem, tc.problem)
			}
		})
	}
}

func TestDecideGate(t *testing.T) {
	agent, storage := gating("agent"), gating("storage", withMinReady(10))
	linuxOnly := gating("linux", withNodeSelector("os", "linux"))
	blind := newDS("blind", withAnnotations(AnnotationNodeGate, gateKey))
	node := func() *v1.Node { return newNode("n1", withTaint(gateKey, v1.TaintEffectNoSchedule)) }
	for _, tc := range []struct {
		name    string
		members []GateMember
		reason  Reason
		recheck time.Duration
		detail  string // a part of the first member's detail
	}{
		{"the taint goes once the gating pod is available",
			[]GateMember{member(agent, newPod(agent, "a", "n1"))}, ReasonGateOpen, 0, "is available"},
		{"the taint stays while there is no gating pod",
			[]GateMember{member(agent)}, ReasonGateWaiting, 0, "no pod on the node yet"},
		{"the taint stays while the gating pod is not Ready",
			[]GateMember{member(agent, newPod(agent, "a", "n1", notReady()))}, ReasonGateWaiting, 0, "is not Ready"},
		{"the taint stays while the gating pod cannot pull its image",
			[]GateMember{member(agent, newPod(agent, "a", "n1", notReady(), waitingIn("ImagePullBackOff", false)))}, ReasonGateWaiting, 0, "(ImagePullBackOff)"},
		{"the taint stays until a Ready pod has been Ready for minReadySeconds, and the gate looks again then",
			[]GateMember{member(storage, newPod(storage, "s", "n1", readySince(t0.Add(-4*time.Second))))}, ReasonGateWaiting, 6*time.Second + time.Millisecond, "available in 6s"},
		{"a pod Ready for longer than minReadySeconds opens the gate",
			[]GateMember{member(storage, newPod(storage, "s", "n1", readySince(t0.Add(-11*time.Second))))}, ReasonGateOpen, 0, "is available"},
		{"a terminating pod does not count",
			[]GateMember{member(agent, newPod(agent, "a", "n1", terminating()))}, ReasonGateWaiting, 0, "no pod on the node yet"},
		{"a failed pod does not count",
			[]GateMember{member(agent, newPod(agent, "a", "n1", withPhase(v1.PodFailed)))}, ReasonGateWaiting, 0, "no pod on the node yet"},
		{"every gating DaemonSet that should run here must have an available pod",
			[]GateMember{member(agent, newPod(agent, "a", "n1")), member(storage)}, ReasonGateWaiting, 0, "is available"},
		{"a gating DaemonSet that should not run here does not hold the gate",
			[]GateMember{member(agent, newPod(agent, "a", "n1")), member(linuxOnly)}, ReasonGateOpen, 0, "is available"},
		{"a node that no gating DaemonSet should run on keeps the taint",
			[]GateMember{member(linuxOnly)}, ReasonGateNoDaemonSet, 0, "should not run here"},
		{"no gating DaemonSet at all keeps the taint",
			nil, ReasonGateNoDaemonSet, 0, ""},
		{"a gating DaemonSet that does not tolerate its key holds the node, whatever its pods",
			[]GateMember{member(blind, newPod(blind, "b", "n1"))}, ReasonGateWaiting, 0, "does not tolerate the taint it gates on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := DecideGate(node(), gateKey, tc.members, t0)
			if v.Reason != tc.reason || v.Open != (tc.reason == ReasonGateOpen) {
				t.Fatalf("verdict %s (open %v): %s; want %s", v.Reason, v.Open, v.Message, tc.reason)
			}
			if v.RecheckAfter != tc.recheck {
				t.Errorf("recheck after %v, want %v", v.RecheckAfter, tc.recheck)
			}
			if !strings.Contains(v.Message, gateKey) || !strings.Contains(v.Message, "n1") {
				t.Errorf("message %q names neither the taint nor the node", v.Message)
			}
			if tc.detail != "" && (len(v.Members) == 0 || !strings.Contains(v.Members[0].Detail, tc.detail)) {
				t.Errorf("members %+v, want the first's detail to contain %q", v.Members, tc.detail)
			}
		})
	}
}

// The gate's own taint does not make its DaemonSets ineligible, but the node's other
// taints do: a gating DaemonSet that does not tolerate them should not run there.
func TestDecideGateReadsOtherTaints(t *testing.T) {
	agent := gating("agent")
	n := newNode("n1", withTaint(gateKey, v1.TaintEffectNoSchedule), withTaint("dedicated", v1.TaintEffectNoSchedule))
	v := DecideGate(n, gateKey, []GateMember{member(agent, newPod(agent, "a", "n1"))}, t0)
	if v.Reason != ReasonGateNoDaemonSet || !strings.Contains(v.Members[0].Detail, "dedicated") {
		t.Fatalf("verdict %s %+v, want NoGatingDaemonSet naming the dedicated taint", v.Reason, v.Members)
	}
	if len(n.Spec.Taints) != 2 {
		t.Fatalf("DecideGate changed the node's taints: %v", n.Spec.Taints)
	}
}

func TestGateTaints(t *testing.T) {
	n := newNode("n1", withTaint(gateKey, v1.TaintEffectNoSchedule), withTaint("other", v1.TaintEffectNoSchedule),
		withTaint(gateKey, v1.TaintEffectNoExecute), withTaint(gateKey, v1.TaintEffectNoSchedule))
	n.Spec.Taints[3].Value = "second"
	if got := GateTaints(n, gateKey); len(got) != 2 || got[0] != 3 || got[1] != 0 {
		t.Fatalf("gate taints at %v, want [3 0]: the NoSchedule ones of the key, last first", got)
	}
	if got := GateKeys(n); strings.Join(got, ",") != gateKey+",other" {
		t.Fatalf("gate keys %v, want the NoSchedule keys once each", got)
	}
}
