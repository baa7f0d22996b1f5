package daemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// The node gate. A DaemonSet annotated everynode.dev/node-gate: <key> gates new
// nodes on its pod: the nodes come up with a NoSchedule taint of that key (put there
// by whoever creates them: a provisioner's startup taints, a kubelet flag), so that
// ordinary pods wait, and everynode removes the taint from a node once every
// DaemonSet gating on the key that should run there has an available pod on it
// (Ready for its minReadySeconds). Nothing else removes it: a node whose gating pod
// fails, and a node that no gating DaemonSet should run on, keep the taint, since
// nothing proves them ready.
//
// The gate is decided per node and taint key, across DaemonSets, by DecideGate; the
// controller's gate (internal/controller) asks for it and removes the taint.

// AnnotationNodeGate names, on a DaemonSet, the key of the NoSchedule taint its pod
// gates nodes on.
const AnnotationNodeGate = "everynode.dev/node-gate"

// Reasons of the gate's verdict on a node, and of a gating DaemonSet's problem.
const (
	// ReasonGateOpen: every gating pod on the node is available; the taint goes.
	ReasonGateOpen Reason = "GateOpen"
	// ReasonGateWaiting: a gating DaemonSet that should run on the node has no
	// available pod there yet.
	ReasonGateWaiting Reason = "WaitingForGatingPods"
	// ReasonGateNoDaemonSet: no DaemonSet gating on the key should run on the node.
	ReasonGateNoDaemonSet Reason = "NoGatingDaemonSet"
	// ReasonNodeGateInvalid: the DaemonSet's node-gate annotation cannot work as set
	// (not a taint key, or the template does not tolerate the taint it gates on).
	ReasonNodeGateInvalid Reason = "NodeGateInvalid"
)

// ConditionNodeGate is the DaemonSet condition everynode sets, True, while the
// DaemonSet's node gate cannot work (ReasonNodeGateInvalid, or the gate is off);
// it is removed once it can.
const ConditionNodeGate apps.DaemonSetConditionType = "NodeGateFailure"

// NodeGate is a DaemonSet's node-gate annotation, read.
type NodeGate struct {
	// Key is the taint key the DaemonSet gates nodes on; "" when it gates none.
	Key string
	// Problem says why the gate cannot work as set, and how to fix it; "" when it
	// can. A gating DaemonSet with a problem still keeps the taint on the nodes it
	// should run on: nothing proves them ready.
	Problem string
}

// ParseNodeGate reads ds's node-gate annotation.
func ParseNodeGate(ds *apps.DaemonSet) NodeGate {
	raw, ok := ds.Annotations[AnnotationNodeGate]
	if !ok {
		return NodeGate{}
	}
	key := strings.TrimSpace(raw)
	g := NodeGate{Key: key}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		g.Key = ""
		g.Problem = fmt.Sprintf("annotation %s=%q is not a taint key (%s); name the key of the NoSchedule taint new nodes carry until this DaemonSet's pod is available",
			AnnotationNodeGate, raw, strings.Join(errs, "; "))
		return g
	}
	if !toleratesGate(&ds.Spec.Template.Spec, key) {
		g.Problem = fmt.Sprintf("annotation %s=%q: the pod template does not tolerate the taint %s:NoSchedule it gates nodes on, so its pods cannot start on a gated node and the taint would never go; add the toleration {key: %s, operator: Exists, effect: NoSchedule}",
			AnnotationNodeGate, raw, key, key)
	}
	return g
}

// gateTaint is the taint a gate of key removes, as the tolerations see it.
func gateTaint(key string) v1.Taint { return v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule} }

func toleratesGate(spec *v1.PodSpec, key string) bool {
	t := gateTaint(key)
	return corev1helpers.TolerationsTolerateTaint(noLog, DaemonPodTolerations(spec), &t, false)
}

// GateKeys returns the keys of node's NoSchedule taints, each once: the gates the
// node may be waiting on.
func GateKeys(node *v1.Node) []string {
	var keys []string
	for _, t := range node.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule && !slices.Contains(keys, t.Key) {
			keys = append(keys, t.Key)
		}
	}
	return keys
}

// GateMember is one DaemonSet gating on a key, with its pods on the node decided for.
type GateMember struct {
	DaemonSet *apps.DaemonSet
	Gate      NodeGate
	Pods      []*v1.Pod
}

// GateMemberState is what one gating DaemonSet says of the node.
type GateMemberState struct {
	DaemonSet string `json:"daemonSet"` // namespace/name
	// ShouldRun: the DaemonSet should run a pod on the node (its placement rules,
	// the gate's own taint aside); only those DaemonSets hold the gate.
	ShouldRun bool `json:"shouldRun"`
	Available bool `json:"available"`
	// Detail says, for people, why the DaemonSet does or does not hold the gate.
	Detail string `json:"detail"`
}

// GateVerdict is the gate's answer for one node and one taint key.
type GateVerdict struct {
	Node string `json:"node"`
	Key  string `json:"key"`
	// Open: the node's NoSchedule taints of Key are to be removed.
	Open    bool              `json:"open"`
	Reason  Reason            `json:"reason"`
	Message string            `json:"message"`
	Members []GateMemberState `json:"daemonSets"`
	// RecheckAfter: a gating pod is Ready and becomes available after this long;
	// zero when no time alone would change the verdict.
	RecheckAfter time.Duration `json:"-"`
}

// DecideGate decides whether node's NoSchedule taint of key may go, given every
// DaemonSet gating on key (members, each with its pods on the node), at now.
func DecideGate(node *v1.Node, key string, members []GateMember, now time.Time) GateVerdict {
	v := GateVerdict{Node: node.Name, Key: key}
	// The gate's own taint aside, placement decides which members should run here:
	// one that does not tolerate it (its Problem) still should, and so holds the node.
	bare := withoutTaint(node, key)
	var waiting []string
	holders := 0
	for _, m := range members {
		s := GateMemberState{DaemonSet: m.DaemonSet.Namespace + "/" + m.DaemonSet.Name}
		verdict := NewEligibility(&m.DaemonSet.Spec.Template.Spec).Check(bare)
		s.ShouldRun = verdict.Run
		if !s.ShouldRun {
			s.Detail = "should not run here: " + verdict.Message()
			v.Members = append(v.Members, s)
			continue
		}
		holders++
		var wait time.Duration
		s.Available, wait, s.Detail = gatingPod(m, now)
		if m.Gate.Problem != "" {
			s.Available, wait, s.Detail = false, 0, "does not tolerate the taint it gates on ("+string(ReasonNodeGateInvalid)+")"
		}
		if !s.Available {
			waiting = append(waiting, s.DaemonSet)
			if wait > 0 && (v.RecheckAfter == 0 || wait < v.RecheckAfter) {
				v.RecheckAfter = wait
			}
		}
		v.Members = append(v.Members, s)
	}
	switch {
	case holders == 0:
		v.Reason = ReasonGateNoDaemonSet
		v.Message = fmt.Sprintf("taint %s stays: no DaemonSet gating on it (%s) should run on node %s, so nothing proves the node ready", key, AnnotationNodeGate, node.Name)
	case len(waiting) > 0:
		v.Reason = ReasonGateWaiting
		v.Message = fmt.Sprintf("taint %s stays until %s %s an available pod on node %s", key, strings.Join(waiting, ", "), hasOrHave(len(waiting)), node.Name)
	default:
		v.Open, v.Reason = true, ReasonGateOpen
		v.Message = fmt.Sprintf("taint %s goes: every DaemonSet gating on it that should run on node %s has an available pod there", key, node.Name)
	}
	return v
}

func hasOrHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

// gatingPod says whether m has an available pod among its pods on the node, and if
// not, how long until a Ready one becomes available (zero if none will by time
// alone) and why.
func gatingPod(m GateMember, now time.Time) (available bool, wait time.Duration, detail string) {
	minReady := m.DaemonSet.Spec.MinReadySeconds
	detail = "no pod on the node yet"
	for _, pod := range m.Pods {
		switch {
		case pod.DeletionTimestamp != nil || isTerminal(pod):
			continue
		case IsAvailable(pod, minReady, now):
			return true, 0, fmt.Sprintf("pod %s is available", pod.Name)
		}
		if d, ok := untilAvailable(pod, minReady, now); ok {
			if wait == 0 || d < wait {
				wait = d
			}
			detail = fmt.Sprintf("pod %s is Ready, available in %s (minReadySeconds %d)", pod.Name, d.Round(time.Second), minReady)
			continue
		}
		if wait == 0 {
			detail = fmt.Sprintf("pod %s is not Ready%s", pod.Name, notReadyWhy(pod))
		}
	}
	return false, wait, detail
}

// notReadyWhy is the kubelet's reason a pod's container fails, as " (Reason)", or "".
func notReadyWhy(pod *v1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if r, _ := failingReason(cs); r != "" {
			return " (" + r + ")"
		}
	}
	if pod.Spec.NodeName == "" {
		return " (not scheduled yet)"
	}
	return ""
}

// withoutTaint is node, or a shallow copy of it without its NoSchedule taints of key.
func withoutTaint(node *v1.Node, key string) *v1.Node {
	if !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return isGateTaint(t, key) }) {
		return node
	}
	bare := *node
	bare.Spec.Taints = slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t v1.Taint) bool { return isGateTaint(t, key) })
	return &bare
}

// isGateTaint reports whether t is a taint the gate of key removes.
func isGateTaint(t v1.Taint, key string) bool {
	return t.Key == key && t.Effect == v1.TaintEffectNoSchedule
}

// GateTaints returns the indexes in node.Spec.Taints of the taints an open gate of
// key removes, in descending order (the order to remove them by index).
func GateTaints(node *v1.Node, key string) []int {
	var at []int
	for i := len(node.Spec.Taints) - 1; i >= 0; i-- {
		if isGateTaint(node.Spec.Taints[i], key) {
			at = append(at, i)
		}
	}
	return at
}
