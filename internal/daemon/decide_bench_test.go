package daemon

import (
	"fmt"
	"slices"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// exclusionAffinity is the shape of affinity cluster-wide agents often carry: one term
// of six NotIn expressions keeping them off special node classes.
func exclusionAffinity() *v1.Affinity {
	notIn := func(key string, values ...string) v1.NodeSelectorRequirement {
		return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpNotIn, Values: values}
	}
	return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
			notIn("example.com/gpu", "true"), notIn("example.com/edge", "true"), notIn("tier", "control"),
			notIn("pool", "system"), notIn("example.com/class", "storage", "batch", "spot"), notIn("example.com/os", "windows"),
		}}},
	}}}
}

// steadySnapshot is a DaemonSet settled on n nodes: one ready pod of the current
// revision on each, the revision recorded, the status up to date. Decide has
// nothing to do but confirm it, which is what most syncs of a large cluster are.
func steadySnapshot(b *testing.B, n int, affinity *v1.Affinity) *Snapshot {
	ds := newDS("agent")
	ds.Spec.Template.Spec.Affinity = affinity
	patch, err := TemplatePatch(&ds.Spec.Template)
	if err != nil {
		b.Fatal(err)
	}
	hash := hashOf(ds)
	rev := newRevision(ds, ds.Name+"-"+hash, hash, patch, 1)
	s := &Snapshot{DaemonSet: ds, Now: t0, Revisions: []*apps.ControllerRevision{rev}}
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		s.Nodes = append(s.Nodes, newNode(name, withLabels("kubernetes.io/hostname", name, "topology.kubernetes.io/zone", fmt.Sprintf("zone-%d", i%3))))
		s.Pods = append(s.Pods, newPod(ds, "agent-"+name, name))
	}
	s.Eligibility = NewEligibility(&ds.Spec.Template.Spec)
	first := Decide(s)
	if first.Status == nil || first.Writes() != 1 {
		b.Fatalf("setup: want only a status write, got %d writes", first.Writes())
	}
	ds.Status = *first.Status
	if p := Decide(s); p.Writes() != 0 {
		b.Fatalf("setup: steady state still writes %d times", p.Writes())
	}
	return s
}

type affinityCase struct {
	name     string
	affinity *v1.Affinity
}

// affinityCases are the templates the benchmarks decide for: without affinity, and
// with the six-expression NotIn affinity.
func affinityCases() []affinityCase {
	return []affinityCase{{"no-affinity", nil}, {"notin-affinity", exclusionAffinity()}}
}

// BenchmarkDecideSteadyState measures one full decision (claims, history, placement,
// update budget and status) for a settled DaemonSet.
func BenchmarkDecideSteadyState(b *testing.B) {
	for _, tc := range affinityCases() {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/nodes=%d", tc.name, n), func(b *testing.B) {
				s := steadySnapshot(b, n, tc.affinity)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					Decide(s)
				}
			})
		}
	}
}

// BenchmarkDecideRememberedVerdicts is BenchmarkDecideSteadyState with placement
// rules that remember their verdicts, as the controller's are: the full decision with
// no node changed since the last.
func BenchmarkDecideRememberedVerdicts(b *testing.B) {
	for _, tc := range affinityCases() {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/nodes=%d", tc.name, n), func(b *testing.B) {
				s := steadySnapshot(b, n, tc.affinity)
				s.Eligibility = s.Eligibility.RememberingVerdicts()
				Decide(s)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					Decide(s)
				}
			})
		}
	}
}

// BenchmarkDecideWithMemo measures the decision for the same settled DaemonSet when
// the previous decision's Memo is kept, as the controller does: with nothing changed
// since, with one pod's readiness flipping on every decision (the snapshot naming
// it or not), and with one node's NoExecute taint coming and going (its pod to
// delete, then to keep).
func BenchmarkDecideWithMemo(b *testing.B) {
	for _, tc := range affinityCases() {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/nodes=%d/unchanged", tc.name, n), func(b *testing.B) {
				s := steadySnapshot(b, n, tc.affinity)
				_, m := DecideWith(s, nil)
				if m == nil {
					b.Fatal("setup: a settled DaemonSet left no memo")
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, m = DecideWith(s, m); m == nil {
						b.Fatal("the memo was dropped")
					}
				}
			})
			// With the snapshot naming the pod that changed ("-named"), as the
			// controller's does, nothing else is compared.
			for _, named := range []bool{false, true} {
				name := fmt.Sprintf("%s/nodes=%d/one-pod-flips", tc.name, n)
				if named {
					name += "-named"
				}
				b.Run(name, func(b *testing.B) {
					s := steadySnapshot(b, n, tc.affinity)
					_, m := DecideWith(s, nil)
					ready := s.Pods[n/2]
					unready := ready.DeepCopy()
					notReady()(unready)
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; b.Loop(); i++ {
						pod := []*v1.Pod{unready, ready}[i%2]
						s.Pods[n/2] = pod
						if named {
							s.Changes = &Changes{From: s.At, Pods: map[types.UID]*v1.Pod{pod.UID: pod}}
							s.At.Pods++
						}
						var p Plan
						// The stored status counts every pod ready: only the unready
						// flip needs a new one.
						if p, m = DecideWith(s, m); m == nil || (p.Status != nil) != (i%2 == 0) {
							b.Fatal("the memo was dropped, or the flip not counted")
						}
					}
				})
			}
			b.Run(fmt.Sprintf("%s/nodes=%d/one-node-tainted", tc.name, n), func(b *testing.B) {
				s := steadySnapshot(b, n, tc.affinity)
				_, m := DecideWith(s, nil)
				i := slices.IndexFunc(s.Nodes, func(node *v1.Node) bool { return node.Name == s.Pods[n/2].Spec.NodeName })
				clean := s.Nodes[i]
				tainted := clean.DeepCopy()
				withTaint("maintenance", v1.TaintEffectNoExecute)(tainted)
				b.ReportAllocs()
				b.ResetTimer()
				for k := 0; b.Loop(); k++ {
					s.Nodes[i] = []*v1.Node{tainted, clean}[k%2]
					var p Plan
					if p, m = DecideWith(s, m); m == nil || len(p.Deletes) != 1-k%2 {
						b.Fatal("the memo was dropped, or the tainted node's pod not deleted")
					}
				}
			})
		}
	}
}
