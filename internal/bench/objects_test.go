package bench

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseStatCPU(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
	stat := "4242 (every node) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 3 1 20 0 12 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3250*time.Millisecond {
		t.Errorf("parseStatCPU = %v, %v; want 3.25s", got, err)
	}
	if _, err := parseStatCPU("4242 (x) S 1"); err == nil {
		t.Error("parseStatCPU of a short line: no error")
	}
}

func TestStatusBytes(t *testing.T) {
	status := "Name:\teverynode\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nRssAnon:\t   51200 kB\n"
	for key, want := range map[string]int64{"VmHWM:": 200 << 20, "VmRSS:": 100 << 20, "RssAnon:": 50 << 20, "VmSwap:": 0} {
		if got := statusBytes(status, key); got != want {
			t.Errorf("statusBytes(%s) = %d, want %d", key, got, want)
		}
	}
}

func TestContainsInOrder(t *testing.T) {
	cmd := []string{"/bin/everynode", "component", "kube-apiserver", "--v=0", ""}
	if !containsInOrder(cmd, []string{"component", "kube-apiserver"}) {
		t.Error("component kube-apiserver not found")
	}
	if containsInOrder(cmd, []string{"kube-apiserver", "component"}) {
		t.Error("found out of order")
	}
	if containsInOrder(cmd, []string{"component", "kube-scheduler"}) {
		t.Error("found kube-scheduler")
	}
}

func TestPercentile(t *testing.T) {
	var values []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		values = append(values, time.Duration(i)*time.Second)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Second}, {99, 99 * time.Second}, {100, 100 * time.Second}, {1, time.Second}} {
		if got := percentile(values, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	three := []time.Duration{3, 1, 2}
	if got := percentile(three, 50); got != 2 {
		t.Errorf("p50 of 1,2,3 = %v", got)
	}
	if got := percentile(three, 99); got != 3 {
		t.Errorf("p99 of 1,2,3 = %v", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func TestDSConverged(t *testing.T) {
	settled := func() *apps.DaemonSet {
		return &apps.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: apps.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 10, CurrentNumberScheduled: 10,
				UpdatedNumberScheduled: 10, NumberReady: 10, NumberAvailable: 10},
		}
	}
	want := dsWant{MinGeneration: 2, Desired: 10, Available: 10}
	if !dsConverged(settled(), want) {
		t.Error("settled DaemonSet not converged")
	}
	for name, change := range map[string]func(*apps.DaemonSet){
		"older generation cached": func(ds *apps.DaemonSet) { ds.Generation, ds.Status.ObservedGeneration = 1, 1 },
		"generation not observed": func(ds *apps.DaemonSet) { ds.Status.ObservedGeneration = 1 },
		"desired short":           func(ds *apps.DaemonSet) { ds.Status.DesiredNumberScheduled = 9 },
		"not all updated":         func(ds *apps.DaemonSet) { ds.Status.UpdatedNumberScheduled = 9 },
		"not all available":       func(ds *apps.DaemonSet) { ds.Status.NumberAvailable = 9 },
		"not all ready":           func(ds *apps.DaemonSet) { ds.Status.NumberReady = 9 },
		"not all current":         func(ds *apps.DaemonSet) { ds.Status.CurrentNumberScheduled = 9 },
		"misscheduled":            func(ds *apps.DaemonSet) { ds.Status.NumberMisscheduled = 1 },
	} {
		ds := settled()
		change(ds)
		if dsConverged(ds, want) {
			t.Errorf("%s: converged", name)
		}
	}
	unready := settled()
	unready.Status.NumberReady, unready.Status.NumberAvailable = 7, 7
	if !dsConverged(unready, dsWant{MinGeneration: 2, Desired: 10, Available: 7}) {
		t.Error("three pods unready as wanted: not converged")
	}
}

func TestChurnPlacement(t *testing.T) {
	node := func(name, pool string, taints ...v1.Taint) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelPool: pool, labelRev: "7"}},
			Spec: v1.NodeSpec{Taints: taints}}
	}
	maintenance := v1.Taint{Key: taintMaintain, Value: "true", Effect: v1.TaintEffectNoSchedule}
	other := v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}
	nodes := []*v1.Node{
		node("a", "p0"), node("b", "p0", maintenance), node("c", "p1"), node("d", "p8"),
		node("e", "p9"), node("f", "p0", other),
	}
	daemonSets := churnDaemonSets(2, 10, true) // pool-0 on p0, pool-1 on p1, not-in outside p8 and p9
	got := map[string]int32{}
	for _, ds := range daemonSets {
		got[ds.Name] = expectedDesired(ds, nodes)
	}
	want := map[string]int32{"pool-0": 2, "pool-1": 1, "not-in": 3}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d nodes, want %d", name, got[name], n)
		}
	}
	if expr := daemonSets[2].Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions; len(expr) != 6 {
		t.Errorf("the NotIn DaemonSet has %d expressions, want 6", len(expr))
	}
}

func TestTargetNode(t *testing.T) {
	bound := &v1.Pod{Spec: v1.PodSpec{NodeName: "n1"}}
	pinned := &v1.Pod{Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n2"}}},
		}}},
	}}}}
	if got := targetNode(bound); got != "n1" {
		t.Errorf("bound pod: %q", got)
	}
	if got := targetNode(pinned); got != "n2" {
		t.Errorf("pinned pod: %q", got)
	}
	if got := targetNode(&v1.Pod{}); got != "" {
		t.Errorf("free pod: %q", got)
	}
}
