package daemon

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		// want changes the Policy of a DaemonSet with some rollout annotation and
		// nothing else: Set, no restart limit.
		want   func(*Policy)
		canary string // the canary selector, printed
		// problems: one entry per problem, each a list of words it must contain.
		problems [][]string
	}{
		{name: "paused", ann: map[string]string{AnnotationPaused: "true"}, want: func(p *Policy) { p.Paused = true }},
		{name: "paused false", ann: map[string]string{AnnotationPaused: "false"}},
		{name: "paused with spaces around", ann: map[string]string{AnnotationPaused: " true "}, want: func(p *Policy) { p.Paused = true }},
		{name: "paused not a boolean", ann: map[string]string{AnnotationPaused: "yes"},
			problems: [][]string{{AnnotationPaused, `"yes"`, `"true" or "false"`}}},
		{name: "partition as a number", ann: map[string]string{AnnotationPartition: "3"},
			want: func(p *Policy) { v := intstr.FromInt32(3); p.Partition = &v }},
		{name: "partition as a percentage", ann: map[string]string{AnnotationPartition: "10%"},
			want: func(p *Policy) { v := intstr.FromString("10%"); p.Partition = &v }},
		{name: "partition 0", ann: map[string]string{AnnotationPartition: "0"},
			want: func(p *Policy) { v := intstr.FromInt32(0); p.Partition = &v }},
		{name: "partition negative", ann: map[string]string{AnnotationPartition: "-1"},
			problems: [][]string{{AnnotationPartition, "number of nodes", "percentage"}}},
		{name: "partition over 100%", ann: map[string]string{AnnotationPartition: "150%"},
			problems: [][]string{{AnnotationPartition}}},
		{name: "partition not a number", ann: map[string]string{AnnotationPartition: "half"},
			problems: [][]string{{AnnotationPartition, `"half"`}}},
		{name: "max-unavailable as a number", ann: map[string]string{AnnotationMaxUnavailable: "2"},
			want: func(p *Policy) { v := intstr.FromInt32(2); p.MaxUnavailable = &v }},
		{name: "max-unavailable as a percentage", ann: map[string]string{AnnotationMaxUnavailable: "25%"},
			want: func(p *Policy) { v := intstr.FromString("25%"); p.MaxUnavailable = &v }},
		{name: "max-unavailable 0 could never start", ann: map[string]string{AnnotationMaxUnavailable: "0"},
			problems: [][]string{{AnnotationMaxUnavailable, "more than zero"}}},
		{name: "max-unavailable 0%", ann: map[string]string{AnnotationMaxUnavailable: "0%"},
			problems: [][]string{{AnnotationMaxUnavailable, "between 1% and 100%"}}},
		{name: "max-unavailable over 100%", ann: map[string]string{AnnotationMaxUnavailable: "101%"},
			problems: [][]string{{AnnotationMaxUnavailable, "between 1% and 100%"}}},
		{name: "max-unavailable negative", ann: map[string]string{AnnotationMaxUnavailable: "-1"},
			problems: [][]string{{AnnotationMaxUnavailable, "number of nodes"}}},
		{name: "max-unavailable not a number", ann: map[string]string{AnnotationMaxUnavailable: "one"},
			problems: [][]string{{AnnotationMaxUnavailable, `"one"`, "percentage"}}},
		{name: "max-unavailable fractional percentage", ann: map[string]string{AnnotationMaxUnavailable: "2.5%"},
			problems: [][]string{{AnnotationMaxUnavailable}}},
		{name: "canary selector", ann: map[string]string{AnnotationCanary: "canary=true"}, canary: "canary=true"},
		{name: "canary set-based selector", ann: map[string]string{AnnotationCanary: "tier in (edge),!gpu"}, canary: "!gpu,tier in (edge)"},
		{name: "canary empty", ann: map[string]string{AnnotationCanary: ""},
			problems: [][]string{{AnnotationCanary, "label selector", "canary=true"}}},
		{name: "canary not a selector", ann: map[string]string{AnnotationCanary: "a=b=c"},
			problems: [][]string{{AnnotationCanary, "label selector"}}},
		{name: "waves", ann: map[string]string{AnnotationWaves: "topology.kubernetes.io/zone"},
			want: func(p *Policy) { p.WaveKey = "topology.kubernetes.io/zone" }},
		{name: "waves empty", ann: map[string]string{AnnotationWaves: " "},
			problems: [][]string{{AnnotationWaves, "node label key"}}},
		{name: "wave-order trimmed, empty entries dropped", ann: map[string]string{AnnotationWaves: "zone", AnnotationWaveOrder: " b, a,,c "},
			want: func(p *Policy) { p.WaveKey, p.WaveOrder = "zone", []string{"b", "a", "c"} }},
		{name: "wave-order without waves", ann: map[string]string{AnnotationWaveOrder: "a,b"},
			want:     func(p *Policy) { p.WaveOrder = []string{"a", "b"} },
			problems: [][]string{{AnnotationWaveOrder, AnnotationWaves}}},
		{name: "wave-pause", ann: map[string]string{AnnotationWavePause: "90s"}, want: func(p *Policy) { p.WavePause = 90 * time.Second }},
		{name: "wave-pause zero", ann: map[string]string{AnnotationWavePause: "0s"},
			problems: [][]string{{AnnotationWavePause, "positive duration"}}},
		{name: "wave-pause without a unit", ann: map[string]string{AnnotationWavePause: "10"},
			problems: [][]string{{AnnotationWavePause, "positive duration"}}},
		{name: "new-nodes stable", ann: map[string]string{AnnotationNewNodes: "stable"}, want: func(p *Policy) { p.StableNewNodes = true }},
		{name: "new-nodes update", ann: map[string]string{AnnotationNewNodes: "update"}},
		{name: "new-nodes other", ann: map[string]string{AnnotationNewNodes: "old"},
			problems: [][]string{{AnnotationNewNodes, `"update" or "stable"`}}},
		{name: "progress-deadline", ann: map[string]string{AnnotationProgressDeadline: "10m"}, want: func(p *Policy) { p.ProgressDeadline, p.MinHealthy = 10*time.Minute, DefaultMinHealthy }},
		{name: "progress-deadline shorter than the default bake: half of it", ann: map[string]string{AnnotationProgressDeadline: "6s"},
			want: func(p *Policy) { p.ProgressDeadline, p.MinHealthy = 6*time.Second, 3*time.Second }},
		{name: "min-healthy", ann: map[string]string{AnnotationMinHealthy: "30s"}, want: func(p *Policy) { p.MinHealthy = 30 * time.Second }},
		{name: "min-healthy 0s turns the default bake off", ann: map[string]string{AnnotationMinHealthy: "0s", AnnotationMaxRestarts: "1"},
			want: func(p *Policy) { p.MaxRestarts = 1 }},
		{name: "min-healthy negative", ann: map[string]string{AnnotationMinHealthy: "-1s"},
			problems: [][]string{{AnnotationMinHealthy, "duration"}}},
		{name: "min-healthy as long as the progress deadline", ann: map[string]string{AnnotationMinHealthy: "1m", AnnotationProgressDeadline: "1m"},
			want:     func(p *Policy) { p.MinHealthy, p.ProgressDeadline = time.Minute, time.Minute },
			problems: [][]string{{AnnotationMinHealthy, AnnotationProgressDeadline, "shorter"}}},
		{name: "progress-deadline negative", ann: map[string]string{AnnotationProgressDeadline: "-10m"},
			problems: [][]string{{AnnotationProgressDeadline, "positive duration"}}},
		{name: "max-restarts", ann: map[string]string{AnnotationMaxRestarts: "5"}, want: func(p *Policy) { p.MaxRestarts, p.MinHealthy = 5, DefaultMinHealthy }},
		{name: "max-restarts 0", ann: map[string]string{AnnotationMaxRestarts: "0"}, want: func(p *Policy) { p.MaxRestarts, p.MinHealthy = 0, DefaultMinHealthy }},
		{name: "max-restarts negative", ann: map[string]string{AnnotationMaxRestarts: "-1"},
			problems: [][]string{{AnnotationMaxRestarts, "0 or more"}}},
		{name: "max-restarts not a number", ann: map[string]string{AnnotationMaxRestarts: "many"},
			problems: [][]string{{AnnotationMaxRestarts}}},
		{name: "on-failure rollback", ann: map[string]string{AnnotationOnFailure: "rollback"}, want: func(p *Policy) { p.Rollback, p.MinHealthy = true, DefaultMinHealthy }},
		{name: "on-failure pause", ann: map[string]string{AnnotationOnFailure: "pause"}, want: func(p *Policy) { p.MinHealthy = DefaultMinHealthy }},
		{name: "on-failure other", ann: map[string]string{AnnotationOnFailure: "retry"},
			want:     func(p *Policy) { p.MinHealthy = DefaultMinHealthy },
			problems: [][]string{{AnnotationOnFailure, `"pause" or "rollback"`}}},
		{name: "unknown rollout annotation", ann: map[string]string{RolloutPrefix + "paused-until": "tomorrow"},
			problems: [][]string{{RolloutPrefix + "paused-until", "unknown"}}},
		{name: "each invalid annotation is a problem, in key order; the valid ones still apply",
			ann:      map[string]string{AnnotationPaused: "true", AnnotationWavePause: "soon", AnnotationMaxRestarts: "x", AnnotationOnFailure: "rollback"},
			want:     func(p *Policy) { p.Paused, p.Rollback, p.MinHealthy = true, true, DefaultMinHealthy },
			problems: [][]string{{AnnotationMaxRestarts}, {AnnotationWavePause}}},
		{name: "every annotation at once",
			ann: map[string]string{AnnotationPaused: "false", AnnotationPartition: "25%", AnnotationCanary: "canary=true",
				AnnotationWaves: "zone", AnnotationWaveOrder: "b", AnnotationWavePause: "1h", AnnotationNewNodes: "stable",
				AnnotationProgressDeadline: "15m", AnnotationMaxRestarts: "3", AnnotationOnFailure: "rollback"},
			want: func(p *Policy) {
				v := intstr.FromString("25%")
				p.Partition, p.WaveKey, p.WaveOrder, p.WavePause = &v, "zone", []string{"b"}, time.Hour
				p.MinHealthy = DefaultMinHealthy
				p.StableNewNodes, p.ProgressDeadline, p.MaxRestarts, p.Rollback = true, 15*time.Minute, 3, true
			},
			canary: "canary=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParsePolicy(tt.ann)
			want := Policy{Set: true, MaxRestarts: -1}
			if tt.want != nil {
				tt.want(&want)
			}
			canary := ""
			if got.Canary != nil {
				canary = got.Canary.String()
			}
			if canary != tt.canary {
				t.Errorf("canary %q, want %q", canary, tt.canary)
			}
			problems := got.Problems
			got.Canary, got.Problems = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ParsePolicy = %+v, want %+v", got, want)
			}
			if len(problems) != len(tt.problems) {
				t.Fatalf("problems %q, want %d", problems, len(tt.problems))
			}
			for i, words := range tt.problems {
				for _, w := range words {
					if !strings.Contains(problems[i], w) {
						t.Errorf("problem %q does not say %q", problems[i], w)
					}
				}
				if strings.Contains(problems[i], "<nil>") {
					t.Errorf("problem %q", problems[i])
				}
			}
		})
	}
}

// Without rollout annotations the policy is upstream's RollingUpdate.
func TestParsePolicyNone(t *testing.T) {
	for _, ann := range []map[string]string{nil, {}, {"example.com/paused": "true", "rollout.everynode.dev": "x", TemplateGenerationAnnotation: "3"}} {
		if got := ParsePolicy(ann); !reflect.DeepEqual(got, Policy{MaxRestarts: -1}) {
			t.Errorf("ParsePolicy(%v) = %+v, want the zero policy", ann, got)
		}
	}
}

func TestPolicyReadsNodeLabels(t *testing.T) {
	tests := []struct {
		ann  map[string]string
		want bool
	}{
		{ann: nil},
		{ann: map[string]string{AnnotationPaused: "true", AnnotationPartition: "2", AnnotationNewNodes: "stable"}},
		{ann: map[string]string{AnnotationCanary: "canary=true"}, want: true},
		{ann: map[string]string{AnnotationWaves: "zone"}, want: true},
		{ann: map[string]string{AnnotationWaves: ""}, want: true}, // invalid, yet fixing a label may matter
	}
	for _, tt := range tests {
		if got := PolicyReadsNodeLabels(tt.ann); got != tt.want {
			t.Errorf("PolicyReadsNodeLabels(%v) = %v, want %v", tt.ann, got, tt.want)
		}
	}
}
