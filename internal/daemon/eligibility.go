package daemon

import (
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Verdict is the answer to "should this DaemonSet have a pod on this node?".
type Verdict struct {
	// Run: a pod should be created on the node if none runs there.
	Run bool
	// KeepRunning: a pod already on the node may stay.
	KeepRunning bool
	// Reason names the rule that decided; ReasonEligible when Run is true.
	Reason Reason

	node  string
	rules *Eligibility      // for explaining a selector or affinity mismatch
	nodeL map[string]string // the node's labels, likewise
	want  string            // the template's nodeName, for ReasonNodeNameMismatch
	taint v1.Taint          // the offending taint, for the taint reasons
	err   error             // an unparsable affinity term, for ReasonNodeAffinityMismatch
}

// Message says, for people, why the verdict is what it is. It is built on demand so
// that evaluating thousands of nodes allocates nothing for the common answers.
func (v Verdict) Message() string {
	switch v.Reason {
	case ReasonEligible:
		return fmt.Sprintf("node %s satisfies the pod's node selector, affinity and tolerations", v.node)
	case ReasonNodeNameMismatch:
		return fmt.Sprintf("the pod template names node %q, not %s", v.want, v.node)
	case ReasonNodeSelectorMismatch:
		return fmt.Sprintf("node %s does not match the pod's nodeSelector: %s", v.node, v.selectorMismatch())
	case ReasonNodeAffinityMismatch:
		if v.err != nil {
			return fmt.Sprintf("node %s matches no required node affinity term (%v)", v.node, v.err)
		}
		return fmt.Sprintf("node %s matches no required node affinity term: %s", v.node, v.affinityMismatch())
	case ReasonUntoleratedTaint, ReasonUntoleratedNoExecute:
		return fmt.Sprintf("node %s has taint %s that the pod does not tolerate", v.node, v.taint.ToString())
	case ReasonNodeGone:
		return fmt.Sprintf("node %s no longer exists", v.node)
	}
	return string(v.Reason)
}

// Taint returns the taint that made the node ineligible, if a taint did.
func (v Verdict) Taint() (v1.Taint, bool) {
	return v.taint, v.Reason == ReasonUntoleratedTaint || v.Reason == ReasonUntoleratedNoExecute
}

// Eligibility is a DaemonSet pod template's placement rules, parsed once and checked
// against any number of nodes. It is safe for concurrent use.
type Eligibility struct {
	nodeName     string
	nodeSelector map[string]string
	terms        []v1.NodeSelectorTerm
	selector     labels.Selector                     // nil: no nodeSelector
	affinity     *nodeaffinity.LazyErrorNodeSelector // nil: no required node affinity
	tolerations  []v1.Toleration
	remembered   *verdicts // nil: every Check evaluates the rules
}

// NewEligibility parses the placement rules of a pod template's spec. The tolerations
// checked are the template's plus the defaults every daemon pod receives.
func NewEligibility(spec *v1.PodSpec) *Eligibility {
	e := &Eligibility{
		nodeName:    spec.NodeName,
		tolerations: DaemonPodTolerations(spec),
	}
	if len(spec.NodeSelector) > 0 {
		e.nodeSelector = spec.NodeSelector
		e.selector = labels.SelectorFromSet(spec.NodeSelector)
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		e.terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		e.affinity = nodeaffinity.NewLazyErrorNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	return e
}

// Tolerations are the tolerations every pod of this template carries.
func (e *Eligibility) Tolerations() []v1.Toleration { return e.tolerations }

// noLog discards what the taint helpers would log; the core does not log.
var noLog = logr.Discard()

// Check decides whether a pod of this template belongs on node.
//
// Rules, in order: the template's nodeName; its nodeSelector; its required node
// affinity (terms ORed, each term's expressions ANDed); the node's NoSchedule and
// NoExecute taints against the pod's tolerations. PreferNoSchedule taints, resources
// and host ports are not considered: the scheduler decides those.
func (e *Eligibility) Check(node *v1.Node) Verdict {
	if e.remembered != nil {
		return e.remembered.check(node, e.evaluate)
	}
	return e.evaluate(node)
}

func (e *Eligibility) evaluate(node *v1.Node) Verdict {
	v := Verdict{node: node.Name}
	if e.nodeName != "" && e.nodeName != node.Name {
		v.Reason, v.want = ReasonNodeNameMismatch, e.nodeName
		return v
	}
	if e.selector != nil && !e.selector.Matches(labels.Set(node.Labels)) {
		v.Reason, v.rules, v.nodeL = ReasonNodeSelectorMismatch, e, node.Labels
		return v
	}
	if e.affinity != nil {
		if ok, err := e.affinity.Match(node); !ok {
			v.Reason, v.err, v.rules, v.nodeL = ReasonNodeAffinityMismatch, err, e, node.Labels
			return v
		}
	}
	if len(node.Spec.Taints) > 0 {
		if t, found := corev1helpers.FindMatchingUntoleratedTaint(noLog, node.Spec.Taints, e.tolerations, isNoExecute, false); found {
			v.Reason, v.taint = ReasonUntoleratedNoExecute, t
			return v
		}
		if t, found := corev1helpers.FindMatchingUntoleratedTaint(noLog, node.Spec.Taints, e.tolerations, isNoSchedule, false); found {
			v.Reason, v.taint, v.KeepRunning = ReasonUntoleratedTaint, t, true
			return v
		}
	}
	v.Run, v.KeepRunning, v.Reason = true, true, ReasonEligible
	return v
}

func isNoExecute(t *v1.Taint) bool  { return t.Effect == v1.TaintEffectNoExecute }
func isNoSchedule(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoSchedule }

// defaultTolerations are added to every daemon pod so that node conditions which
// would evict or repel ordinary pods do not affect it. Each is an Exists toleration
// without tolerationSeconds.
var defaultTolerations = []v1.Toleration{
	{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodePIDPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
}

// hostNetworkToleration is added only to pods on the host network, which do not need
// the pod network to be up.
var hostNetworkToleration = v1.Toleration{
	Key: v1.TaintNodeNetworkUnavailable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule,
}

// DaemonPodTolerations returns spec's tolerations with the daemon defaults merged in,
// without modifying spec. A template toleration with the same key, operator, value and
// effect as a default is replaced by the default (so it loses any tolerationSeconds);
// all others are kept in their order, and missing defaults are appended.
func DaemonPodTolerations(spec *v1.PodSpec) []v1.Toleration {
	out := make([]v1.Toleration, len(spec.Tolerations), len(spec.Tolerations)+len(defaultTolerations)+1)
	copy(out, spec.Tolerations)
	for i := range defaultTolerations {
		out = mergeToleration(out, defaultTolerations[i])
	}
	if spec.HostNetwork {
		out = mergeToleration(out, hostNetworkToleration)
	}
	return out
}

func mergeToleration(list []v1.Toleration, t v1.Toleration) []v1.Toleration {
	replaced := false
	for i := range list {
		if t.MatchToleration(&list[i]) {
			list[i] = t
			replaced = true
		}
	}
	if !replaced {
		list = append(list, t)
	}
	return list
}
