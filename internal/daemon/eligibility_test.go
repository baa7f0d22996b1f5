package daemon

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func affinity(terms ...v1.NodeSelectorTerm) *v1.Affinity {
	return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func exprTerm(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func fieldTerm(node string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{
		Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node},
	}}}
}

func TestEligibilityCheck(t *testing.T) {
	tests := []struct {
		name       string
		spec       v1.PodSpec
		node       *v1.Node
		run, keep  bool
		reason     Reason
		msgContain string
	}{
		{name: "no rules: eligible", node: newNode("n1"),
			run: true, keep: true, reason: ReasonEligible, msgContain: "n1"},
		{name: "nodeName matches", spec: v1.PodSpec{NodeName: "n1"}, node: newNode("n1"),
			run: true, keep: true, reason: ReasonEligible},
		{name: "nodeName names another node", spec: v1.PodSpec{NodeName: "n2"}, node: newNode("n1"),
			reason: ReasonNodeNameMismatch, msgContain: `"n2"`},
		{name: "nodeSelector matches", spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "a"}},
			node: newNode("n1", withLabels("zone", "a")), run: true, keep: true, reason: ReasonEligible},
		{name: "nodeSelector mismatch", spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "a"}},
			node: newNode("n1", withLabels("zone", "b")), reason: ReasonNodeSelectorMismatch, msgContain: "nodeSelector"},
		{name: "nodeSelector label missing", spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "a"}},
			node: newNode("n1"), reason: ReasonNodeSelectorMismatch},
		{name: "affinity matchExpressions match",
			spec: v1.PodSpec{Affinity: affinity(exprTerm("zone", v1.NodeSelectorOpIn, "a", "b"))},
			node: newNode("n1", withLabels("zone", "b")), run: true, keep: true, reason: ReasonEligible},
		{name: "affinity matchExpressions mismatch",
			spec: v1.PodSpec{Affinity: affinity(exprTerm("zone", v1.NodeSelectorOpNotIn, "a"))},
			node: newNode("n1", withLabels("zone", "a")), reason: ReasonNodeAffinityMismatch, msgContain: "affinity"},
		{name: "affinity matchFields match",
			spec: v1.PodSpec{Affinity: affinity(fieldTerm("n1"))},
			node: newNode("n1"), run: true, keep: true, reason: ReasonEligible},
		{name: "affinity matchFields mismatch",
			spec: v1.PodSpec{Affinity: affinity(fieldTerm("n2"))},
			node: newNode("n1"), reason: ReasonNodeAffinityMismatch},
		{name: "affinity terms are ORed",
			spec: v1.PodSpec{Affinity: affinity(exprTerm("zone", v1.NodeSelectorOpIn, "x"), fieldTerm("n1"))},
			node: newNode("n1"), run: true, keep: true, reason: ReasonEligible},
		{name: "affinity expressions within a term are ANDed",
			spec: v1.PodSpec{Affinity: affinity(v1.NodeSelectorTerm{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}},
				MatchFields:      fieldTerm("n2").MatchFields,
			})},
			node: newNode("n1", withLabels("zone", "a")), reason: ReasonNodeAffinityMismatch},
		{name: "affinity with an unparsable term matches nothing",
			spec: v1.PodSpec{Affinity: affinity(exprTerm("zone", v1.NodeSelectorOpGt, "a"))},
			node: newNode("n1", withLabels("zone", "5")), reason: ReasonNodeAffinityMismatch},
		{name: "nodeSelector and affinity must both match",
			spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "a"}, Affinity: affinity(fieldTerm("n2"))},
			node: newNode("n1", withLabels("zone", "a")), reason: ReasonNodeAffinityMismatch},
		{name: "untolerated NoSchedule: no new pod, existing may stay",
			node: newNode("n1", withTaint("dedicated", v1.TaintEffectNoSchedule)),
			keep: true, reason: ReasonUntoleratedTaint, msgContain: "dedicated=x:NoSchedule"},
		{name: "untolerated NoExecute: no pod at all",
			node:   newNode("n1", withTaint("dedicated", v1.TaintEffectNoExecute)),
			reason: ReasonUntoleratedNoExecute, msgContain: "dedicated=x:NoExecute"},
		{name: "NoExecute wins over NoSchedule",
			node:   newNode("n1", withTaint("a", v1.TaintEffectNoSchedule), withTaint("b", v1.TaintEffectNoExecute)),
			reason: ReasonUntoleratedNoExecute, msgContain: "b=x:NoExecute"},
		{name: "PreferNoSchedule ignored",
			node: newNode("n1", withTaint("dedicated", v1.TaintEffectPreferNoSchedule)),
			run:  true, keep: true, reason: ReasonEligible},
		{name: "tolerated NoExecute",
			spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}},
			node: newNode("n1", withTaint("dedicated", v1.TaintEffectNoExecute)), run: true, keep: true, reason: ReasonEligible},
		{name: "toleration for another effect does not help",
			spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}},
			node: newNode("n1", withTaint("dedicated", v1.TaintEffectNoExecute)), reason: ReasonUntoleratedNoExecute},
		{name: "default toleration: not-ready NoExecute",
			node: newNode("n1", withTaint(v1.TaintNodeNotReady, v1.TaintEffectNoExecute)), run: true, keep: true, reason: ReasonEligible},
		{name: "default toleration: unreachable NoExecute",
			node: newNode("n1", withTaint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute)), run: true, keep: true, reason: ReasonEligible},
		{name: "default toleration: unschedulable NoSchedule",
			node: newNode("n1", withTaint(v1.TaintNodeUnschedulable, v1.TaintEffectNoSchedule)), run: true, keep: true, reason: ReasonEligible},
		{name: "default toleration: disk, memory and pid pressure NoSchedule",
			node: newNode("n1", withTaint(v1.TaintNodeDiskPressure, v1.TaintEffectNoSchedule),
				withTaint(v1.TaintNodeMemoryPressure, v1.TaintEffectNoSchedule), withTaint(v1.TaintNodePIDPressure, v1.TaintEffectNoSchedule)),
			run: true, keep: true, reason: ReasonEligible},
		{name: "not-ready NoSchedule is not a default toleration",
			node: newNode("n1", withTaint(v1.TaintNodeNotReady, v1.TaintEffectNoSchedule)),
			keep: true, reason: ReasonUntoleratedTaint, msgContain: v1.TaintNodeNotReady},
		{name: "network-unavailable untolerated without hostNetwork",
			node: newNode("n1", withTaint(v1.TaintNodeNetworkUnavailable, v1.TaintEffectNoSchedule)),
			keep: true, reason: ReasonUntoleratedTaint, msgContain: v1.TaintNodeNetworkUnavailable},
		{name: "network-unavailable tolerated with hostNetwork", spec: v1.PodSpec{HostNetwork: true},
			node: newNode("n1", withTaint(v1.TaintNodeNetworkUnavailable, v1.TaintEffectNoSchedule)),
			run:  true, keep: true, reason: ReasonEligible},
		{name: "nodeName checked before taints", spec: v1.PodSpec{NodeName: "n2"},
			node: newNode("n1", withTaint("dedicated", v1.TaintEffectNoSchedule)), reason: ReasonNodeNameMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewEligibility(&tt.spec).Check(tt.node)
			if v.Run != tt.run || v.KeepRunning != tt.keep || v.Reason != tt.reason {
				t.Fatalf("Check = {Run:%v KeepRunning:%v Reason:%s}, want {Run:%v KeepRunning:%v Reason:%s}",
					v.Run, v.KeepRunning, v.Reason, tt.run, tt.keep, tt.reason)
			}
			msg := v.Message()
			if !strings.Contains(msg, tt.node.Name) && v.Reason != ReasonNodeNameMismatch {
				t.Errorf("Message %q does not name node %s", msg, tt.node.Name)
			}
			if !strings.Contains(msg, tt.msgContain) {
				t.Errorf("Message %q does not mention %q", msg, tt.msgContain)
			}
			taint, isTaint := v.Taint()
			wantTaint := tt.reason == ReasonUntoleratedTaint || tt.reason == ReasonUntoleratedNoExecute
			if isTaint != wantTaint || (isTaint && !strings.Contains(msg, taint.Key)) {
				t.Errorf("Taint() = %v, %v; want a taint: %v", taint, isTaint, wantTaint)
			}
		})
	}
}

func TestVerdictMessageNodeGone(t *testing.T) {
	v := Verdict{node: "n9", Reason: ReasonNodeGone}
	if got := v.Message(); !strings.Contains(got, "n9") || !strings.Contains(got, "no longer exists") {
		t.Errorf("Message() = %q", got)
	}
}

func TestEligibilityDoesNotModifySpec(t *testing.T) {
	spec := v1.PodSpec{Tolerations: []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}}
	e := NewEligibility(&spec)
	if len(spec.Tolerations) != 1 {
		t.Fatalf("spec tolerations changed: %v", spec.Tolerations)
	}
	if len(e.Tolerations()) != 1+len(defaultTolerations) {
		t.Errorf("Tolerations() = %d entries, want template's plus %d defaults", len(e.Tolerations()), len(defaultTolerations))
	}
}

// The messages of a selector or affinity mismatch name what fails: each nodeSelector
// label the node lacks or differs on, and for each affinity term the first
// requirement the node fails.
func TestVerdictMessageNamesTheFailingRule(t *testing.T) {
	affinity := func(terms ...v1.NodeSelectorTerm) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	expr := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirement {
		return v1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	tests := []struct {
		name string
		spec v1.PodSpec
		node *v1.Node
		want []string
	}{
		{name: "selector: differing and missing labels",
			spec: v1.PodSpec{NodeSelector: map[string]string{"disk": "ssd", "gpu": "yes", "zone": "a"}},
			node: newNode("n1", withLabels("disk", "hdd", "zone", "a")),
			want: []string{"wants disk=ssd, the node has disk=hdd", "wants gpu=yes, the node has no gpu label"}},
		{name: "affinity: first failing requirement of each term",
			spec: v1.PodSpec{Affinity: affinity(
				v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
					expr("zone", v1.NodeSelectorOpIn, "a"), expr("disk", v1.NodeSelectorOpIn, "ssd")}},
				v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{expr("gpu", v1.NodeSelectorOpExists)}},
				v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{expr("metadata.name", v1.NodeSelectorOpIn, "n9")}},
			)},
			node: newNode("n1", withLabels("zone", "a", "disk", "hdd")),
			want: []string{"term 1 needs disk In [ssd] (the node has disk=hdd)", "term 2 needs gpu Exists (the node has no gpu label)",
				"term 3 needs field metadata.name In [n9]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewEligibility(&tt.spec).Check(tt.node)
			if v.Run {
				t.Fatalf("node is eligible; the test needs a mismatch")
			}
			msg := v.Message()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Message %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "zone In") || strings.Contains(msg, "zone=a,") {
				t.Errorf("Message %q names a requirement the node satisfies", msg)
			}
		})
	}
}
