package nodesim

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestUsable(t *testing.T) {
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue}
	notReady := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse}
	taint := func(key string) []v1.Taint { return []v1.Taint{{Key: key, Effect: v1.TaintEffectNoSchedule}} }
	tests := []struct {
		name  string
		conds []v1.NodeCondition
		taint []v1.Taint
		want  bool
	}{
		{name: "ready and untainted", conds: []v1.NodeCondition{ready}, want: true},
		{name: "ready but still tainted not-ready", conds: []v1.NodeCondition{ready}, taint: taint(v1.TaintNodeNotReady)},
		{name: "ready but tainted unreachable", conds: []v1.NodeCondition{ready}, taint: taint(v1.TaintNodeUnreachable)},
		{name: "other taints do not matter", conds: []v1.NodeCondition{ready}, taint: taint("dedicated"), want: true},
		{name: "not ready", conds: []v1.NodeCondition{notReady}},
		{name: "no status yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &v1.Node{Spec: v1.NodeSpec{Taints: tt.taint}, Status: v1.NodeStatus{Conditions: tt.conds}}
			if got := Usable(node); got != tt.want {
				t.Errorf("Usable = %v, want %v", got, tt.want)
			}
		})
	}
}
