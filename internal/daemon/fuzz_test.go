package daemon

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// FuzzParsePolicy: any rollout annotation, any value. Parsing never panics, is
// deterministic, and every Problem names the annotation it is about; a
// max-unavailable it accepts scales to at least one node and at most all of them.
func FuzzParsePolicy(f *testing.F) {
	for _, seed := range [][2]string{
		{"paused", "true"}, {"partition", "10%"}, {"canary", "zone in (a,b),!gpu"}, {"waves", "topology.kubernetes.io/zone"},
		{"wave-order", "b,,a"}, {"wave-pause", "1m30s"}, {"new-nodes", "stable"}, {"progress-deadline", "-1s"},
		{"max-restarts", "99999999999"}, {"on-failure", "rollback"}, {"max-unavailable", "0%"}, {"max-unavailable", "3"},
		{"surge-fallback", "delete-first"}, {"surge-fallback", "Delete-First"}, {"unknown", ""},
		{"sick-nodes", "exempt"}, {"sick-nodes", "Exempt"}, {"sick-node-grace", "-1s"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		key := RolloutPrefix + name
		ann := map[string]string{key: value}
		p := ParsePolicy(ann)
		if !p.Set {
			t.Fatalf("%s=%q: a rollout annotation left the policy unset", key, value)
		}
		if again := ParsePolicy(ann); !reflect.DeepEqual(p, again) {
			t.Fatalf("%s=%q: parsing is not deterministic", key, value)
		}
		for _, problem := range p.Problems {
			if !strings.Contains(problem, key) {
				t.Fatalf("%s=%q: problem %q does not name the annotation", key, value, problem)
			}
		}
		if p.MaxUnavailable != nil {
			for _, desired := range []int{1, 7, 100} {
				n, err := scaled(p.MaxUnavailable, desired)
				if err != nil || n < 1 || n > desired && p.MaxUnavailable.Type == intstr.String {
					t.Fatalf("%s=%q over %d nodes scales to %d (%v)", key, value, desired, n, err)
				}
			}
		}
	})
}

// FuzzDecide: random clusters (from a seed) under random rollout annotations, in
// both modes. Neither decision panics or changes its input; the full decision keeps
// the property tests' invariants and the policy's promises; the companion decision
// writes nothing that is the other controller's and deletes only pods it controls.
func FuzzDecide(f *testing.F) {
	f.Add(uint64(1), uint16(0), false)
	f.Add(uint64(7), uint16(0xffff), false)
	f.Add(uint64(42), uint16(0x0421), true)
	f.Add(uint64(1234), uint16(0x8002), true)
	f.Fuzz(func(t *testing.T, seed uint64, policy uint16, companion bool) {
		r := rand.New(rand.NewPCG(seed, 0xf022))
		s := randomSnapshot(r, seed%2 == 0)
		ds := s.DaemonSet
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		for i, kv := range [][2]string{
			{AnnotationPaused, "true"}, {AnnotationPartition, "2"}, {AnnotationCanary, "zone=a"}, {AnnotationWaves, "zone"},
			{AnnotationWaveOrder, "b"}, {AnnotationWavePause, "1m"}, {AnnotationNewNodes, NewNodesStable},
			{AnnotationProgressDeadline, "1m"}, {AnnotationMaxRestarts, "0"}, {AnnotationOnFailure, OnFailureRollback},
			{AnnotationPartition, "50%"}, {AnnotationPaused, "later"}, {AnnotationMaxUnavailable, "1"},
			{AnnotationMaxUnavailable, "40%"}, {AnnotationMaxUnavailable, "0"},
		} {
			if policy&(1<<i) != 0 {
				ds.Annotations[kv[0]] = kv[1]
			}
		}
		if seed%3 == 0 {
			ds.Annotations[AnnotationSickNodes] = SickNodesExempt
			ds.Annotations[AnnotationSickNodeGrace] = "30s"
		}
		if companion {
			ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
		}
		before := deepCopySnapshot(s)
		full := Decide(s)
		update := DecideUpdate(s)
		if !reflect.DeepEqual(before, deepCopySnapshot(s)) {
			t.Fatal("a decision modified its snapshot")
		}
		if err := checkPlan(s, full); err != nil {
			t.Fatalf("%v: %v", ds.Annotations, err)
		}
		if err := checkPolicy(s, full); err != nil {
			t.Fatalf("%v: %v", ds.Annotations, err)
		}
		if err := checkCompanionPlan(s, update); err != nil {
			t.Fatalf("%v: %v", ds.Annotations, err)
		}
	})
}

// checkCompanionPlan checks what DecideUpdate may plan: pod deletes of pods the
// DaemonSet controls, each once; marks, a rollback and the condition; nothing else.
func checkCompanionPlan(s *Snapshot, p Plan) error {
	if !CompanionManages(s.DaemonSet) && !reflect.DeepEqual(p, Plan{}) {
		return fmt.Errorf("companion mode planned %+v for a DaemonSet it does not manage", p)
	}
	if len(p.Creates) > 0 || p.Status != nil || p.CreateRevision != nil || p.RenumberRevision != nil ||
		len(p.Adopt)+len(p.Release)+len(p.AdoptRevisions)+len(p.ReleaseRevisions)+len(p.LabelRevisions)+
			len(p.Relabel)+len(p.DedupRevisions)+len(p.PruneRevisions) > 0 {
		return fmt.Errorf("companion mode planned a write that is the other controller's: %+v", p)
	}
	deleted := map[string]bool{}
	for _, d := range p.Deletes {
		if deleted[d.Pod.Name] {
			return fmt.Errorf("pod %s deleted twice", d.Pod.Name)
		}
		deleted[d.Pod.Name] = true
		ref := d.Pod.OwnerReferences
		if len(ref) == 0 || ref[0].UID != s.DaemonSet.UID {
			return fmt.Errorf("companion mode deletes pod %s, which the DaemonSet does not control", d.Pod.Name)
		}
	}
	return nil
}
