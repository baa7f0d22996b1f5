package daemon

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The seam between the stages: placement reads no rollout policy, and the update
// stage leaves the Placement as placement made it. Over random clusters, the same
// snapshot decided without rollout annotations and with random ones must yield the
// same Placement — its nodes' verdicts, pods, back-offs and surge pairs, what the
// rules planned, the counters and when to look again — while the update stages
// that ran over it differ.
func TestPlacementIsTheSameWhateverTheRolloutPolicy(t *testing.T) {
	annotations := [][2]string{
		{AnnotationPaused, "true"}, {AnnotationPartition, "1"}, {AnnotationCanary, "zone=a"},
		{AnnotationWaves, "zone"}, {AnnotationWavePause, "1m"}, {AnnotationNewNodes, NewNodesStable},
		{AnnotationProgressDeadline, "1m"}, {AnnotationMaxRestarts, "0"}, {AnnotationOnFailure, OnFailureRollback},
		{AnnotationMinHealthy, "30s"}, {AnnotationSurgeFallback, SurgeDeleteFirst}, {AnnotationInPlace, "true"},
	}
	differed := 0
	for seed := uint64(1); seed <= propertyRuns/3; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5ea1))
		s := randomSnapshot(r, seed%2 == 0)
		plainPlan, plain := decide(s)
		held := deepCopySnapshot(s)
		if held.DaemonSet.Annotations == nil {
			held.DaemonSet.Annotations = map[string]string{}
		}
		for _, kv := range annotations {
			if r.IntN(3) == 0 {
				held.DaemonSet.Annotations[kv[0]] = kv[1]
			}
		}
		if r.IntN(2) == 0 {
			withProgressing(ReasonRollingOut, v1.ConditionTrue, t0.Add(-time.Duration(r.IntN(5))*time.Minute))(held.DaemonSet)
		}
		heldPlan, policy := decide(held)
		if plain == nil || policy == nil {
			t.Fatalf("seed %d: a random cluster made no decision", seed)
		}
		if err := samePlacement(plain.placement, policy.placement); err != nil {
			t.Fatalf("seed %d, annotations %v: %v", seed, held.DaemonSet.Annotations, err)
		}
		if !reflect.DeepEqual(plainPlan.Waiting, heldPlan.Waiting) || !reflect.DeepEqual(plainPlan.Deletes, heldPlan.Deletes) {
			differed++
		}
	}
	if differed == 0 {
		t.Fatal("the rollout annotations changed no decision: the test compares nothing the update stage does")
	}
}

// samePlacement compares what two Placements say, node by node.
func samePlacement(a, b *Placement) error {
	if len(a.nodes) != len(b.nodes) {
		return fmt.Errorf("%d nodes against %d", len(a.nodes), len(b.nodes))
	}
	for i := range a.nodes {
		x, y := *a.nodes[i], *b.nodes[i]
		x.verdict.rules, y.verdict.rules = nil, nil // each decision parses its own template
		x.pods, y.pods = append([]*v1.Pod(nil), x.pods...), append([]*v1.Pod(nil), y.pods...)
		x.one, y.one = [1]*v1.Pod{}, [1]*v1.Pod{}
		if !reflect.DeepEqual(x, y) {
			return fmt.Errorf("node %s: %+v against %+v", x.name, x, y)
		}
	}
	if !reflect.DeepEqual(a.placed, b.placed) {
		return fmt.Errorf("placement planned %+v against %+v", a.placed, b.placed)
	}
	if a.counts != b.counts || a.countRecheck != b.countRecheck {
		return fmt.Errorf("counted %+v (recheck %v) against %+v (recheck %v)", a.counts, a.countRecheck, b.counts, b.countRecheck)
	}
	return nil
}
