package controller

import (
	"github.com/everynode/everynode/internal/daemon"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func priorityClass(name string, value int32, globalDefault bool) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: globalDefault}
}

func TestPriorities_Of(t *testing.T) {
	classes := []*schedulingv1.PriorityClass{priorityClass("high", 1000, false), priorityClass("low", -5, false)}
	withDefault := append(classes, priorityClass("default-a", 300, true), priorityClass("default-b", 200, true))
	for _, tc := range []struct {
		name    string
		classes []*schedulingv1.PriorityClass
		spec    v1.PodSpec
		want    int32
	}{
		{name: "no class, no global default: zero", classes: classes, want: 0},
		{name: "no class: the global default's value, the lowest of several", classes: withDefault, want: 200},
		{name: "a class: its value", classes: classes, spec: v1.PodSpec{PriorityClassName: "high"}, want: 1000},
		{name: "a class of negative value", classes: classes, spec: v1.PodSpec{PriorityClassName: "low"}, want: -5},
		{name: "a class that does not exist: zero, even with a global default", classes: withDefault, spec: v1.PodSpec{PriorityClassName: "gone"}, want: 0},
		{name: "system-node-critical without its object", spec: v1.PodSpec{PriorityClassName: SystemNodeCritical}, want: 2000001000},
		{name: "system-cluster-critical without its object", spec: v1.PodSpec{PriorityClassName: SystemClusterCritical}, want: 2000000000},
		{name: "a priority in the spec, as admitted, wins over its class", classes: classes, spec: v1.PodSpec{PriorityClassName: "high", Priority: ptr.To[int32](7)}, want: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewPriorities(tc.classes).Of(&tc.spec); got != tc.want {
				t.Errorf("Of = %d, want %d", got, tc.want)
			}
		})
	}
	if got := (Priorities{}).Of(&v1.PodSpec{PriorityClassName: SystemNodeCritical}); got != SystemNodeCriticalPriority {
		t.Errorf("the zero Priorities: system-node-critical = %d, want %d", got, SystemNodeCriticalPriority)
	}
}

func TestUnblocksNodes(t *testing.T) {
	exists := func(key string, effect v1.TaintEffect) v1.Toleration {
		return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: effect}
	}
	for _, tc := range []struct {
		name string
		spec v1.PodSpec
		want bool
	}{
		{name: "the daemon defaults alone: waits for Ready", want: false},
		{name: "tolerates everything", spec: v1.PodSpec{Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}}, want: true},
		{name: "tolerates both taints by key", spec: v1.PodSpec{Tolerations: []v1.Toleration{
			exists(v1.TaintNodeNotReady, ""), exists(v1.TaintNodeNetworkUnavailable, v1.TaintEffectNoSchedule)}}, want: true},
		{name: "host network brings network-unavailable; not-ready NoSchedule added", spec: v1.PodSpec{HostNetwork: true,
			Tolerations: []v1.Toleration{exists(v1.TaintNodeNotReady, v1.TaintEffectNoSchedule)}}, want: true},
		{name: "host network alone: still waits for not-ready", spec: v1.PodSpec{HostNetwork: true}, want: false},
		{name: "not-ready only for NoExecute", spec: v1.PodSpec{HostNetwork: true,
			Tolerations: []v1.Toleration{exists(v1.TaintNodeNotReady, v1.TaintEffectNoExecute)}}, want: false},
		{name: "not-ready without network-unavailable", spec: v1.PodSpec{
			Tolerations: []v1.Toleration{exists(v1.TaintNodeNotReady, v1.TaintEffectNoSchedule)}}, want: false},
		{name: "every NoSchedule taint", spec: v1.PodSpec{Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UnblocksNodes(&tc.spec); got != tc.want {
				t.Errorf("UnblocksNodes = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestWriteRank(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	ds := &apps.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", CreationTimestamp: at(time.Hour)}}
	oldNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: at(0)}}
	newNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new", CreationTimestamp: at(2 * time.Hour)}}
	cni := &v1.PodTemplateSpec{Spec: v1.PodSpec{PriorityClassName: SystemNodeCritical, Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}}}
	plain := &v1.PodTemplateSpec{}
	prio := NewPriorities(nil)

	if got := Rank(prio, ds, plain, oldNode).Since; !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("a node older than the DaemonSet waits since the DaemonSet's creation, got %v", got)
	}
	if got := Rank(prio, ds, plain, newNode).Since; !got.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("a node that joined later waits since it joined, got %v", got)
	}
	if got := Rank(prio, ds, plain, nil).Since; !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("a node the cache lost waits since the DaemonSet's creation, got %v", got)
	}

	gating := ds.DeepCopy()
	gating.Annotations = map[string]string{daemon.AnnotationNodeGate: "example.com/agents"}
	gatedNode := newNode.DeepCopy()
	gatedNode.Spec.Taints = []v1.Taint{{Key: "example.com/agents", Effect: v1.TaintEffectNoSchedule}}
	tolerant := &v1.PodTemplateSpec{Spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: "example.com/agents", Operator: v1.TolerationOpExists}}}}
	if !Rank(prio, gating, tolerant, gatedNode).Gates {
		t.Errorf("a DaemonSet's pod for a node its gate holds does not rank as gating the node")
	}
	if Rank(prio, gating, tolerant, newNode).Gates || Rank(prio, ds, tolerant, gatedNode).Gates {
		t.Errorf("a pod ranks as gating a node no gate of its DaemonSet holds")
	}

	for _, tc := range []struct {
		name string
		a, b WriteRank
		want int // the sign of CompareRank(a, b)
	}{
		{name: "higher priority first", a: Rank(prio, ds, cni, newNode), b: Rank(prio, ds, plain, oldNode), want: -1},
		{name: "higher priority first, even if it does not unblock", a: WriteRank{Priority: 10}, b: WriteRank{Priority: 9, Unblocks: true}, want: -1},
		{name: "same priority: the one that unblocks nodes first", a: WriteRank{Unblocks: true, Since: t0.Add(time.Hour)}, b: WriteRank{Since: t0}, want: -1},
		{name: "same priority: the pod a node's gate waits for first, before those that unblock nodes", a: WriteRank{Gates: true, Since: t0.Add(time.Hour)}, b: WriteRank{Unblocks: true, Since: t0}, want: -1},
		{name: "higher priority first, even if the other gates its node", a: WriteRank{Priority: 1}, b: WriteRank{Gates: true}, want: -1},
		{name: "same level: the node waiting longest first", a: WriteRank{Since: t0}, b: WriteRank{Since: t0.Add(time.Second)}, want: -1},
		{name: "negative priority after none", a: WriteRank{Priority: -1}, b: WriteRank{}, want: 1},
		{name: "equal", a: WriteRank{Priority: 3, Since: t0}, b: WriteRank{Priority: 3, Since: t0}, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sign(CompareRank(tc.a, tc.b)); got != tc.want {
				t.Errorf("CompareRank(%+v, %+v) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := sign(CompareRank(tc.b, tc.a)); got != -tc.want {
				t.Errorf("CompareRank reversed = %d, want %d", got, -tc.want)
			}
		})
	}
	if CompareLevel(WriteRank{Since: t0}, WriteRank{Since: t0.Add(time.Hour)}) != 0 {
		t.Errorf("CompareLevel must not look at Since")
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// One ranker ranks a DaemonSet's writes as Rank does, through changes of template.
func TestRankerRanksAsRank(t *testing.T) {
	ds := &apps.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}
	cni := &v1.PodTemplateSpec{Spec: v1.PodSpec{PriorityClassName: SystemNodeCritical, Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}}}
	plain := &v1.PodTemplateSpec{}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))}}
	prio := NewPriorities(nil)
	r := newRanker(prio, ds)
	for i, template := range []*v1.PodTemplateSpec{cni, cni, plain, cni, plain, plain} {
		for _, n := range []*v1.Node{node, nil} {
			if got, want := r.rank(template, n), Rank(prio, ds, template, n); got != want {
				t.Errorf("write %d: ranker gave %+v, Rank %+v", i, got, want)
			}
		}
	}
}
