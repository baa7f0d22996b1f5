package daemon

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestFailedPodDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{0: 0, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		10: 512 * time.Second, 11: FailedPodBackoffMax, 60: FailedPodBackoffMax} {
		if got := FailedPodDelay(n); got != want {
			t.Errorf("FailedPodDelay(%d) = %v, want %v", n, got, want)
		}
	}
}

// failedAfter makes the pod a failed one created ago, that recorded before
// failures on its node before it.
func failedAfter(before string, ago time.Duration) podOpt {
	return func(p *v1.Pod) {
		failed()(p)
		p.CreationTimestamp.Time = t0.Add(-ago)
		p.Annotations = map[string]string{AnnotationFailedBefore: before}
	}
}

// The back-off is read from the failed pod's own record when the controller has
// none (everynode explain, or a controller that restarted), and the next pod
// records the count.
func TestFailedPodBackoffFromTheCluster(t *testing.T) {
	withGen := func(gen string) dsOpt {
		return withAnnotations("deprecated.daemonset.template.generation", gen)
	}
	tests := []struct {
		name     string
		ds       []dsOpt
		pod      []podOpt
		failures map[string]int // Snapshot.Failures
		held     time.Time      // zero: the failed pod is deleted
		count    int            // failed pods on n1, as reported
	}{
		{name: "the fourth failure, 2s into its 4s: held", pod: []podOpt{failedAfter("3", 2*time.Second)}, held: t0.Add(2 * time.Second), count: 4},
		{name: "past its back-off: deleted", pod: []podOpt{failedAfter("3", 5*time.Second)}, count: 4},
		{name: "the first failure: deleted at once", pod: []podOpt{failed()}, count: 1},
		{name: "an unreadable record counts as none", pod: []podOpt{failedAfter("many", time.Second)}, count: 1},
		{name: "a pod of an older template generation started over", ds: []dsOpt{withGen("2")},
			pod: []podOpt{failedAfter("3", time.Second), func(p *v1.Pod) { p.Labels[TemplateGenerationLabel] = "1" }}, count: 1},
		{name: "of this generation: held", ds: []dsOpt{withGen("2")},
			pod: []podOpt{failedAfter("3", time.Second), func(p *v1.Pod) { p.Labels[TemplateGenerationLabel] = "2" }}, held: t0.Add(3 * time.Second), count: 4},
		{name: "the controller's count is more: it is reported", pod: []podOpt{failedAfter("1", time.Hour)}, failures: map[string]int{"n1": 6}, count: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", tt.ds...)
			s := snap(ds, nodes("n1"), newPod(ds, "p", "n1", tt.pod...))
			s.Failures = tt.failures
			p := Decide(s)
			deleted := slices.Contains(deletedNames(p), "p")
			if deleted != tt.held.IsZero() {
				t.Fatalf("deleted = %v, want the pod held until %v", deleted, tt.held)
			}
			if !tt.held.IsZero() && p.RequeueAfter != tt.held.Sub(t0) {
				t.Errorf("RequeueAfter = %v, want %v", p.RequeueAfter, tt.held.Sub(t0))
			}
			n := nodeReport(t, Explain(s), "n1")
			if n.Failures != tt.count {
				t.Errorf("reported %d failed pods, want %d", n.Failures, tt.count)
			}
			if !tt.held.IsZero() && (n.Waiting != ReasonFailedPodBackoff || !n.Until.Equal(tt.held) || !strings.Contains(n.WaitMessage(), "failed pods here so far")) {
				t.Errorf("n1 waits for %q until %v: %q", n.Waiting, n.Until, n.WaitMessage())
			}
		})
	}
}

func TestNewPodRecordsTheFailuresBefore(t *testing.T) {
	ds := newDS("ds")
	s := snap(ds, nodes("n1", "n2"))
	s.Failures = map[string]int{"n1": 3}
	p := Decide(s)
	got := map[string]int{}
	for _, c := range p.Creates {
		got[c.Node] = c.FailedBefore
	}
	if len(got) != 2 || got["n1"] != 3 || got["n2"] != 0 {
		t.Errorf("creates record %v, want n1: 3 and n2: 0", got)
	}
	pod := PodForNode(ds, PodTemplate(ds, "h"), "n1")
	SetFailedBefore(pod, 3)
	if FailedBefore(pod) != 3 || pod.Annotations[AnnotationFailedBefore] != "3" {
		t.Errorf("annotations = %v", pod.Annotations)
	}
}
