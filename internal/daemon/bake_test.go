package daemon

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// restartedAt gives the pod a container that (re)started at the given time.
func restartedAt(at time.Time) podOpt {
	return func(p *v1.Pod) {
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: 1,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}
	}
}

func TestHealthyTimeBake(t *testing.T) {
	bake := withAnnotations(AnnotationMinHealthy, "30s")
	tests := []struct {
		name    string
		ds      []dsOpt
		setup   func(s *Snapshot)
		deletes []string
		creates []string
		wait    Reason // on n1
		requeue time.Duration
	}{
		{name: "a new pod Ready for less than min-healthy holds its slot", ds: []dsOpt{withBudget("", "1"), bake},
			setup: func(s *Snapshot) {
				replace(s, newPod(s.DaemonSet, "new-n1", "n1", readySince(t0.Add(-10*time.Second))))
			},
			wait: ReasonNewPodBaking, requeue: 20*time.Second + time.Millisecond},
		{name: "once it has been healthy for min-healthy the update moves on", ds: []dsOpt{withBudget("", "1"), bake},
			setup: func(s *Snapshot) {
				replace(s, newPod(s.DaemonSet, "new-n1", "n1", readySince(t0.Add(-31*time.Second))))
			},
			deletes: []string{"old-n2"}},
		{name: "a container restart starts the bake again", ds: []dsOpt{withBudget("", "1"), bake},
			setup: func(s *Snapshot) {
				replace(s, newPod(s.DaemonSet, "new-n1", "n1", readySince(t0.Add(-time.Hour)), restartedAt(t0.Add(-5*time.Second))))
			},
			wait: ReasonNewPodBaking, requeue: 25*time.Second + time.Millisecond},
		{name: "no rollout annotations: no bake, as upstream", ds: []dsOpt{withBudget("", "1")},
			setup:   func(s *Snapshot) { replace(s, newPod(s.DaemonSet, "new-n1", "n1", readySince(t0.Add(-time.Second)))) },
			deletes: []string{"old-n2"}},
		{name: "max-restarts brings the default bake", ds: []dsOpt{withBudget("", "1"), withAnnotations(AnnotationMaxRestarts, "2")},
			setup: func(s *Snapshot) { replace(s, newPod(s.DaemonSet, "new-n1", "n1", readySince(t0.Add(-time.Second)))) },
			wait:  ReasonNewPodBaking, requeue: DefaultMinHealthy - time.Second + time.Millisecond},
		{name: "min-healthy 0s: no bake despite max-restarts", ds: []dsOpt{withBudget("", "1"), withAnnotations(AnnotationMaxRestarts, "2", AnnotationMinHealthy, "0s")},
			setup:   func(s *Snapshot) { replace(s, newPod(s.DaemonSet, "new-n1", "n1", readySince(t0.Add(-time.Second)))) },
			deletes: []string{"old-n2"}},
		{name: "surge: the old pod stays beside a baking new one", ds: []dsOpt{withBudget("1", "0"), bake},
			setup: func(s *Snapshot) {
				s.Pods = append(s.Pods, newPod(s.DaemonSet, "new-n1", "n1", readySince(t0.Add(-10*time.Second)), createdAt(t0)))
			},
			wait: ReasonNewPodBaking, requeue: 20*time.Second + time.Millisecond},
		{name: "surge: the old pod goes once the new one is healthy", ds: []dsOpt{withBudget("1", "0"), bake},
			setup: func(s *Snapshot) {
				s.Pods = append(s.Pods, newPod(s.DaemonSet, "new-n1", "n1", readySince(t0.Add(-31*time.Second)), createdAt(t0)))
			},
			deletes: []string{"old-n1"}}, // the next surge waits for this delete to be seen
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", tt.ds...)
			s := rolloutCluster(ds)
			tt.setup(s)
			p, d := decide(s)
			if got := deletedNames(p); !slices.Equal(got, tt.deletes) {
				t.Errorf("deletes = %v, want %v", got, tt.deletes)
			}
			if got := createdOn(p); !slices.Equal(got, tt.creates) {
				t.Errorf("creates = %v, want %v", got, tt.creates)
			}
			if tt.requeue != 0 && p.RequeueAfter != tt.requeue {
				t.Errorf("RequeueAfter = %v, want %v", p.RequeueAfter, tt.requeue)
			}
			for i, n := range d.placement.nodes {
				if wait, _ := d.waitOf(i); n.name == "n1" && wait != tt.wait {
					t.Errorf("n1 waits for %q, want %q", wait, tt.wait)
				}
			}
			// The counters stay upstream's: a Ready pod past minReadySeconds is available.
			if st := p.Status; st != nil && st.NumberAvailable != 5 {
				t.Errorf("numberAvailable = %d, want all 5 (the bake paces the update only)", st.NumberAvailable)
			}
		})
	}
}

// explain says a node waits for its new pod's bake, and until when.
func TestExplainShowsTheBake(t *testing.T) {
	ds := newDS("ds", withBudget("", "1"), withAnnotations(AnnotationMinHealthy, "30s"))
	s := rolloutCluster(ds)
	replace(s, newPod(ds, "new-n1", "n1", readySince(t0.Add(-10*time.Second))))
	for _, n := range Explain(s).Nodes {
		if n.Node != "n1" {
			continue
		}
		if n.Waiting != ReasonNewPodBaking || !n.Until.Equal(t0.Add(20*time.Second)) {
			t.Errorf("n1 waits for %q until %v, want %q until %v", n.Waiting, n.Until, ReasonNewPodBaking, t0.Add(20*time.Second))
		}
		if msg := n.WaitMessage(); msg == "" || msg == string(ReasonNewPodBaking) {
			t.Errorf("wait message %q says nothing for people", msg)
		}
	}
}
