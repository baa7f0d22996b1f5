package daemon

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Explaining a placement mismatch in detail: which label of the nodeSelector, and
// which requirement of each affinity term, the node fails. This runs only when a
// message is asked for, never while deciding.

// selectorMismatch names the nodeSelector entries the node's labels fail.
func (v Verdict) selectorMismatch() string {
	if v.rules == nil {
		return "no detail"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(v.rules.nodeSelector)) {
		want := v.rules.nodeSelector[k]
		if got, ok := v.nodeL[k]; !ok {
			out = append(out, fmt.Sprintf("wants %s=%s, the node has no %s label", k, want, k))
		} else if got != want {
			out = append(out, fmt.Sprintf("wants %s=%s, the node has %s=%s", k, want, k, got))
		}
	}
	return strings.Join(out, "; ")
}

// affinityMismatch names, for each required affinity term, the first requirement the
// node fails.
func (v Verdict) affinityMismatch() string {
	if v.rules == nil {
		return "no detail"
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.node, Labels: v.nodeL}}
	var out []string
	for i, term := range v.rules.terms {
		reqs := make([]v1.NodeSelectorTerm, 0, len(term.MatchExpressions)+len(term.MatchFields))
		for _, r := range term.MatchExpressions {
			reqs = append(reqs, v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{r}})
		}
		for _, r := range term.MatchFields {
			reqs = append(reqs, v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{r}})
		}
		for _, one := range reqs {
			sel := nodeaffinity.NewLazyErrorNodeSelector(&v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{one}})
			if ok, _ := sel.Match(node); !ok {
				out = append(out, fmt.Sprintf("term %d needs %s", i+1, describeRequirement(one, v.nodeL)))
				break
			}
		}
	}
	return strings.Join(out, "; ")
}

func describeRequirement(t v1.NodeSelectorTerm, nodeLabels map[string]string) string {
	if len(t.MatchFields) > 0 {
		r := t.MatchFields[0]
		return fmt.Sprintf("field %s %s %v", r.Key, r.Operator, r.Values)
	}
	r := t.MatchExpressions[0]
	has := "the node has no " + r.Key + " label"
	if val, ok := nodeLabels[r.Key]; ok {
		has = fmt.Sprintf("the node has %s=%s", r.Key, val)
	}
	if len(r.Values) == 0 {
		return fmt.Sprintf("%s %s (%s)", r.Key, r.Operator, has)
	}
	return fmt.Sprintf("%s %s %v (%s)", r.Key, r.Operator, r.Values, has)
}
