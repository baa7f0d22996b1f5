package rolloutplan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// steps writes a schedule as one line per step, "t+5s [wave] n01 n02 +n03 ~n04"
// (+: a first pod of the current revision, ~: of the stable one), then its end,
// "held t+10s PartitionHeld 2/3".
func steps(s *Schedule) []string {
	var out []string
	for _, st := range s.Steps {
		line := Offset(st.At)
		if s.WaveKey != "" {
			line += " [" + strings.Join(st.Waves, ",") + "]"
		}
		for _, n := range st.Nodes {
			line += " " + n
		}
		for _, p := range st.Placed {
			mark := "+"
			if p.Stable {
				mark = "~"
			}
			line += " " + mark + p.Node
		}
		out = append(out, line)
	}
	e := s.End
	return append(out, fmt.Sprintf("%s %s %s %d/%d", e.State, Offset(e.At), e.Reason, e.Updated, e.Desired))
}

// waits writes what each step waits for, by reason.
func waits(s *Schedule) []string {
	var out []string
	for _, st := range s.Steps {
		var rs []string
		for _, w := range st.Then {
			rs = append(rs, w.Reason)
		}
		out = append(out, strings.Join(rs, ","))
	}
	return out
}

func TestPlanPolicies(t *testing.T) {
	three := names("n", 3)
	zones := []string{"n01 zone=b", "n02 zone=a", "n03 zone=a", "n04 zone=b", "n05"}
	for _, tc := range []struct {
		name     string
		ds       *dsetup
		podStart time.Duration
		want     []string
		// wantWaits, when set, is what each step waits for, by reason.
		wantWaits []string
		cont      string // End.Continue, when set
		msg       string // in End.Message, when set
	}{{
		name: "maxUnavailable 1: one node at a time, each as soon as the last is Ready",
		ds:   setup(three),
		want: []string{"t+0s n01", "t+5s n02", "t+10s n03", "complete t+15s  3/3"},
	}, {
		name: "maxUnavailable 25% of 8: two nodes at a time",
		ds:   setup(names("n", 8), budget("", "25%")),
		want: []string{"t+0s n01 n02", "t+5s n03 n04", "t+10s n05 n06", "t+15s n07 n08", "complete t+20s  8/8"},
	}, {
		name: "minReadySeconds: the next node goes once the new pod is available",
		ds:   setup(names("n", 2), minReady(10)),
		want: []string{"t+0s n01", "t+15s n02", "complete t+30s  2/2"},
	}, {
		name:      "maxSurge 1: a new pod beside the old one, the next node once it is available",
		ds:        setup(three, budget("1", "0")),
		want:      []string{"t+0s n01", "t+5s n02", "t+10s n03", "complete t+15s  3/3"},
		wantWaits: []string{"NewPodNotAvailable", "NewPodNotAvailable", "NewPodNotAvailable"},
	}, {
		name: "OnDelete with max-unavailable: rolled out like a RollingUpdate",
		ds:   setup(three, onDelete(), annotate("max-unavailable", "2")),
		want: []string{"t+0s n01 n02", "t+5s n03", "complete t+10s NewRevisionAvailable 3/3"},
	}, {
		name: "in place: each old pod is updated in place, one at a time",
		ds:   setup(three, annotate("in-place", "true")),
		want: []string{"t+0s n01", "t+5s n02", "t+10s n03", "complete t+15s NewRevisionAvailable 3/3"},
	}, {
		name: "plain OnDelete: nothing is replaced until someone deletes the pods",
		ds:   setup(three, onDelete()),
		want: []string{"held t+0s OnDelete 0/3"},
	}, {
		name: "partition 1: the node with the largest name stays on the old revision",
		ds:   setup(three, annotate("partition", "1")),
		want: []string{"t+0s n01", "t+5s n02", "held t+10s PartitionHeld 2/3"},
		cont: "lower rollout.everynode.dev/partition, or run `everynode rollout promote agent`",
	}, {
		name: "canary: the canary nodes, then it waits for promote",
		ds:   setup([]string{"n01", "n02 canary=true", "n03", "n04 canary=true"}, annotate("canary", "canary=true")),
		want: []string{"t+0s n02", "t+5s n04", "held t+10s WaitingForPromotion 2/4"},
		cont: "everynode rollout promote agent",
	}, {
		name: "canary that no node matches: held at once",
		ds:   setup(three, annotate("canary", "canary=true")),
		want: []string{"held t+0s WaitingForPromotion 0/3"},
		msg:  `no node that should run the pod matches the canary selector "canary=true"`,
	}, {
		name: "waves by zone, wave-order b, a 1m pause between waves, unlabelled nodes last",
		ds: setup(zones, budget("", "2"),
			annotate("waves", "zone", "wave-order", "b", "wave-pause", "1m")),
		want: []string{"t+0s [b] n01 n04", "t+1m5s [a] n02 n03", "t+2m10s [] n05",
			"complete t+2m15s NewRevisionAvailable 5/5"},
		wantWaits: []string{"NewPodNotAvailable,WaitingForWave", "NewPodNotAvailable,WaitingForWave", "NewPodNotAvailable"},
	}, {
		name: "waves without a pause: the next wave as soon as the last is available",
		ds:   setup(zones, annotate("waves", "zone")),
		want: []string{"t+0s [a] n02", "t+5s [a] n03", "t+10s [b] n01", "t+15s [b] n04", "t+20s [] n05",
			"complete t+25s NewRevisionAvailable 5/5"},
	}, {
		name:      "min-healthy 30s: a new pod frees the budget only after the bake",
		ds:        setup(names("n", 2), annotate("min-healthy", "30s")),
		want:      []string{"t+0s n01", "t+35s n02", "complete t+1m10s NewRevisionAvailable 2/2"},
		wantWaits: []string{"NewPodNotAvailable,NewPodBaking", "NewPodNotAvailable,NewPodBaking"},
	}, {
		name: "paused: nothing moves",
		ds:   setup(three, annotate("paused", "true")),
		want: []string{"held t+0s Paused 0/3"},
		cont: "everynode rollout resume agent",
	}, {
		name: "paused, new-nodes stable: a node without a pod gets the old revision",
		ds:   setup(three, annotate("paused", "true", "new-nodes", "stable")).bare("n03"),
		want: []string{"t+0s ~n03", "held t+5s Paused 0/3"},
	}, {
		name: "paused, new-nodes update: a node without a pod gets the new revision",
		ds:   setup(three, annotate("paused", "true")).bare("n03"),
		want: []string{"t+0s +n03", "held t+5s Paused 1/3"},
	}, {
		name:     "progress deadline shorter than the pods take: rolled back",
		ds:       setup(three, annotate("progress-deadline", "30s", "on-failure", "rollback")),
		podStart: time.Minute,
		want:     []string{"t+0s n01", "failed t+30s RolledBack 0/3"},
	}, {
		name:     "progress deadline, on-failure pause: the rollout holds as failed",
		ds:       setup(three, annotate("progress-deadline", "30s")),
		podStart: time.Minute,
		want:     []string{"t+0s n01", "failed t+30s ProgressDeadlineExceeded 0/3"},
		cont:     "fix the template, or run `everynode rollout resume agent` to try again",
	}, {
		name: "invalid annotation: the rollout holds until it is fixed",
		ds:   setup(three, annotate("partition", "abc")),
		want: []string{"held t+0s InvalidAnnotation 0/3"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			podStart := tc.podStart
			if podStart == 0 {
				podStart = 5 * time.Second
			}
			s, err := Plan(tc.ds.input(), Options{Start: t0, PodStart: podStart})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, steps(s)); diff != "" {
				t.Errorf("schedule (-want +got):\n%s", diff)
			}
			if tc.wantWaits != nil {
				if diff := cmp.Diff(tc.wantWaits, waits(s)); diff != "" {
					t.Errorf("waits (-want +got):\n%s", diff)
				}
			}
			if !strings.Contains(s.End.Message, tc.msg) {
				t.Errorf("ends saying %q, want it to say %q", s.End.Message, tc.msg)
			}
			if tc.cont != "" && s.End.Continue != tc.cont {
				t.Errorf("continue with %q, want %q", s.End.Continue, tc.cont)
			}
		})
	}
}

// dsetup is a test cluster: nodes, the DaemonSet's options, nodes without a pod.
type dsetup struct {
	nodes  []string
	opts   []dsOpt
	noPods []string
}

func setup(nodes []string, opts ...dsOpt) *dsetup { return &dsetup{nodes: nodes, opts: opts} }

func (d *dsetup) bare(nodes ...string) *dsetup { d.noPods = nodes; return d }

func (d *dsetup) input() Input { return input(newDS(d.opts...), d.nodes, d.noPods...) }

// With pods Ready the moment they are created, the budget still paces the rollout,
// step by step, all at t+0.
func TestPlanInstantPods(t *testing.T) {
	s, err := Plan(setup(names("n", 3)).input(), Options{Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"t+0s n01 n02 n03", "complete t+0s  3/3"}
	if diff := cmp.Diff(want, steps(s)); diff != "" {
		t.Errorf("schedule (-want +got):\n%s", diff)
	}
}

func TestPlanNothingToDo(t *testing.T) {
	in := setup(names("n", 2)).input()
	in.Pods = nil
	in.Nodes = nil
	s, err := Plan(in, Options{Start: t0, PodStart: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := s.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if s.End.State != Complete || !strings.Contains(out.String(), "No node should run the DaemonSet's pod: nothing to roll out.") {
		t.Errorf("no nodes: %+v\n%s", s.End, out.String())
	}
	if _, err := Plan(in, Options{PodStart: -time.Second}); err == nil {
		t.Errorf("a negative pod start is accepted")
	}
}
