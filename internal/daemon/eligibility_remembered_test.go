package daemon

import (
	"math/rand/v2"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Remembered verdicts answer as the rules do, through a history of node objects
// replaced on each change (as an informer's cache replaces them), with the previous
// object of a node asked about again now and then (as an update handler does), and
// nodes deleted and created again under the same name.
func TestRememberedVerdictsMatchTheRules(t *testing.T) {
	spec := &v1.PodSpec{
		NodeSelector: map[string]string{"pool": "a"},
		Affinity: affinity(v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
			{Key: "zone", Operator: v1.NodeSelectorOpNotIn, Values: []string{"z2"}},
			{Key: "tier", Operator: v1.NodeSelectorOpNotIn, Values: []string{"gpu", "storage"}},
		}}),
		Tolerations: []v1.Toleration{{Key: "tolerated", Operator: v1.TolerationOpExists}},
	}
	rules := NewEligibility(spec)
	remembering := rules.RememberingVerdicts()
	rng := rand.New(rand.NewPCG(7, 11))
	const names = 20
	current := make([]*v1.Node, names)
	previous := make([]*v1.Node, names)
	for i := range current {
		current[i] = newNode("n" + strconv.Itoa(i))
	}
	mismatches, rechecked := 0, 0
	for step := range 20000 {
		i := rng.IntN(names)
		node := current[i]
		switch rng.IntN(8) {
		case 0: // no change: the same object again
		case 1:
			if previous[i] != nil {
				node = previous[i]
				rechecked++
			}
		case 2: // deleted, then created again under its name
			remembering.Forget(node.Name)
			previous[i], current[i] = nil, newNode(node.Name)
			node = current[i]
		default:
			next := node.DeepCopy()
			if next.Labels == nil {
				next.Labels = map[string]string{}
			}
			switch rng.IntN(4) {
			case 0:
				next.Labels["pool"] = []string{"a", "b"}[rng.IntN(2)]
			case 1:
				next.Labels["zone"] = []string{"z1", "z2"}[rng.IntN(2)]
			case 2:
				next.Labels["tier"] = []string{"web", "gpu"}[rng.IntN(2)]
			default:
				next.Spec.Taints = nil
				for _, key := range []string{"tolerated", "blocking"} {
					if rng.IntN(2) == 0 {
						next.Spec.Taints = append(next.Spec.Taints, v1.Taint{Key: key, Effect: []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute}[rng.IntN(2)]})
					}
				}
			}
			previous[i], current[i] = node, next
			node = next
		}
		got, want := remembering.Check(node), rules.Check(node)
		if got.Run != want.Run || got.KeepRunning != want.KeepRunning || got.Reason != want.Reason || got.Message() != want.Message() {
			mismatches++
			if mismatches <= 3 {
				t.Errorf("step %d, node %s: remembered verdict %s (%s), the rules say %s (%s)", step, node.Name, got.Reason, got.Message(), want.Reason, want.Message())
			}
		}
	}
	if mismatches > 0 {
		t.Errorf("%d of 20000 remembered verdicts differ from the rules", mismatches)
	}
	if rechecked == 0 {
		t.Error("the history never asked about a previous node object again")
	}
}

func TestForgetDropsTheRememberedVerdict(t *testing.T) {
	remembering := NewEligibility(&v1.PodSpec{}).RememberingVerdicts()
	node := newNode("n1")
	remembering.Check(node)
	if n := len(remembering.remembered.byName); n != 1 {
		t.Fatalf("after one check the rules remember %d nodes, want 1", n)
	}
	remembering.Forget("n1")
	if n := len(remembering.remembered.byName); n != 0 {
		t.Errorf("after Forget the rules remember %d nodes, want 0", n)
	}
	NewEligibility(&v1.PodSpec{}).Forget("n1") // rules that remember nothing: no-op
}

// BenchmarkRememberedVerdicts checks 2,000 unchanged nodes against the 6-expression
// NotIn affinity, evaluating the rules and asking remembering rules.
func BenchmarkRememberedVerdicts(b *testing.B) {
	ds := newDS("ds")
	ds.Spec.Template.Spec.Affinity = exclusionAffinity()
	ns := make([]*v1.Node, 2000)
	for i := range ns {
		ns[i] = newNode("node-"+strconv.Itoa(i), withLabels("pool", "p"+strconv.Itoa(i%10)))
	}
	for _, remember := range []bool{false, true} {
		rules := NewEligibility(&ds.Spec.Template.Spec)
		name := "evaluated"
		if remember {
			rules, name = rules.RememberingVerdicts(), "remembered"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for _, n := range ns {
					rules.Check(n)
				}
			}
		})
	}
}
