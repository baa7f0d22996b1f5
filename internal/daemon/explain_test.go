package daemon

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeReport picks one node's answer from a Report.
func nodeReport(t *testing.T, r Report, node string) NodeReport {
	t.Helper()
	for _, n := range r.Nodes {
		if n.Node == node {
			return n
		}
	}
	t.Fatalf("no report for node %s in %+v", node, r.Nodes)
	return NodeReport{}
}

// A waves rollout: the report says, node by node, the wave, the pods, what the next
// sync does and what each node waits for, as Decide decides.
func TestExplainWaves(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationWaves, "zone"), withBudget("", "1"))
	s := policyCluster(ds)
	zones(s)
	updated(ds, s, "n1")
	r := Explain(s)

	if r.Revision != 2 || r.Hash != hashOf(ds) || !r.Settled || r.Problems != nil {
		t.Errorf("report revision %d, hash %q, settled %v, problems %v", r.Revision, r.Hash, r.Settled, r.Problems)
	}
	if c := r.Progressing; c == nil || Reason(c.Reason) != ReasonRollingOut {
		t.Errorf("Progressing = %+v, want RollingOut", c)
	}
	var names []string
	for _, n := range r.Nodes {
		names = append(names, n.Node)
	}
	if !slices.Equal(names, []string{"n1", "n2", "n3", "n4", "n5"}) {
		t.Errorf("nodes %v, want them in name order", names)
	}
	tests := []struct {
		node    string
		wave    string
		waiting Reason
		next    []string
		pods    []PodReport
	}{
		{node: "n1", wave: "a", pods: []PodReport{{Name: "new-n1", Hash: hashOf(ds), Updated: true, Phase: v1.PodRunning, Ready: true, Available: true}}},
		{node: "n2", wave: "b", waiting: ReasonLaterWave, pods: []PodReport{{Name: "old-n2", Hash: "old", Phase: v1.PodRunning, Ready: true, Available: true}}},
		{node: "n3", wave: "a", next: []string{"delete pod old-n3 (RollingUpdate)"}, pods: []PodReport{{Name: "old-n3", Hash: "old", Phase: v1.PodRunning, Ready: true, Available: true}}},
		{node: "n5", waiting: ReasonLaterWave},
	}
	for _, tt := range tests {
		n := nodeReport(t, r, tt.node)
		if n.Wave != tt.wave || n.Waiting != tt.waiting || !slices.Equal(n.Next, tt.next) || !n.Verdict.Run {
			t.Errorf("%s: wave %q, waiting %q, next %q, verdict %+v; want %q, %q, %q", tt.node, n.Wave, n.Waiting, n.Next, n.Verdict, tt.wave, tt.waiting, tt.next)
		}
		if tt.pods != nil && !reflect.DeepEqual(n.Pods, tt.pods) {
			t.Errorf("%s: pods %+v, want %+v", tt.node, n.Pods, tt.pods)
		}
	}
	if got := nodeReport(t, r, "n2").WaitMessage(); !strings.Contains(got, AnnotationWaves) {
		t.Errorf("n2 waits for %q", got)
	}
}

func TestExplainNext(t *testing.T) {
	tests := []struct {
		name    string
		ds      []dsOpt
		setup   func(*apps.DaemonSet, *Snapshot)
		node    string
		next    []string
		settled bool
	}{
		{name: "a surge pod", ds: []dsOpt{withBudget("1", "0")}, node: "n1", settled: true,
			next: []string{"create a pod of the current revision (RollingUpdateSurge)"}},
		{name: "a node that joins, on the current revision", ds: []dsOpt{withAnnotations(AnnotationPaused, "true")}, node: "n6",
			setup: func(_ *apps.DaemonSet, s *Snapshot) { s.Nodes = append(s.Nodes, newNode("n6")) },
			next:  []string{"create a pod of the current revision (MissingPod)"}},
		{name: "a node that joins, on the stable revision", ds: []dsOpt{withAnnotations(AnnotationPaused, "true", AnnotationNewNodes, "stable")}, node: "n6",
			setup: func(_ *apps.DaemonSet, s *Snapshot) { s.Nodes = append(s.Nodes, newNode("n6")) },
			next:  []string{"create a pod of the stable revision old (MissingPod)"}},
		{name: "an excess pod", node: "n3",
			setup: func(ds *apps.DaemonSet, s *Snapshot) { s.Pods = append(s.Pods, newPod(ds, "z-dup", "n3", old())) },
			next:  []string{"delete pod z-dup (ExcessPod)"}},
		{name: "writes in flight: nothing assessed", ds: []dsOpt{withBudget("", "5")}, node: "n1",
			setup: func(_ *apps.DaemonSet, s *Snapshot) { s.InFlight.Creates = map[string]bool{"elsewhere": true} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", tt.ds...)
			s := policyCluster(ds)
			if tt.setup != nil {
				tt.setup(ds, s)
			}
			r := Explain(s)
			if n := nodeReport(t, r, tt.node); !slices.Equal(n.Next, tt.next) {
				t.Errorf("next %q, want %q", n.Next, tt.next)
			}
			if r.Settled != tt.settled {
				t.Errorf("settled %v, want %v", r.Settled, tt.settled)
			}
		})
	}
}

func TestExplainWaits(t *testing.T) {
	t.Run("invalid annotation", func(t *testing.T) {
		ds := newDS("ds", withAnnotations(AnnotationPartition, "many"))
		r := Explain(policyCluster(ds))
		if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], AnnotationPartition) {
			t.Errorf("problems %q", r.Problems)
		}
		if c := r.Progressing; c == nil || Reason(c.Reason) != ReasonInvalidAnnotation {
			t.Errorf("Progressing = %+v", c)
		}
		for _, n := range r.Nodes {
			if n.Waiting != ReasonInvalidAnnotation || !strings.Contains(n.WaitMessage(), "annotation") {
				t.Errorf("%s waits for %q: %q", n.Node, n.Waiting, n.WaitMessage())
			}
		}
	})
	t.Run("failed pod backing off", func(t *testing.T) {
		ds := newDS("ds")
		s := snap(ds, nodes("n1"), newPod(ds, "p", "n1", failed()))
		s.Backoff = map[string]time.Time{"n1": t0.Add(30 * time.Second)}
		n := nodeReport(t, Explain(s), "n1")
		if n.Waiting != ReasonFailedPodBackoff || !n.Until.Equal(t0.Add(30*time.Second)) || n.Next != nil {
			t.Errorf("n1 waits for %q until %v, next %q", n.Waiting, n.Until, n.Next)
		}
		if len(n.Pods) != 1 || n.Pods[0].Phase != v1.PodFailed || n.Pods[0].Ready {
			t.Errorf("pods %+v", n.Pods)
		}
	})
	t.Run("budget full and new pod not available", func(t *testing.T) {
		ds := newDS("ds", withBudget("", "1"))
		s := policyCluster(ds)
		replace(s, newPod(ds, "new-n1", "n1", notReady()))
		r := Explain(s)
		if n := nodeReport(t, r, "n1"); n.Waiting != ReasonNewPodUnavailable || n.Pods[0].Available || !n.Pods[0].Updated {
			t.Errorf("n1: %+v", n)
		}
		if n := nodeReport(t, r, "n2"); n.Waiting != ReasonBudgetFull {
			t.Errorf("n2 waits for %q", n.Waiting)
		}
		if r.Progressing != nil {
			t.Errorf("Progressing = %+v without rollout annotations", r.Progressing)
		}
	})
}

func TestExplainVerdicts(t *testing.T) {
	ds := newDS("ds")
	s := snap(ds, []*v1.Node{newNode("n1"), newNode("n2", withTaint("dedicated", v1.TaintEffectNoSchedule))},
		newPod(ds, "p1", "n1"), newPod(ds, "p9", "n9"))
	r := Explain(s)
	if n := nodeReport(t, r, "n2"); n.Verdict.Run || n.Verdict.Reason != ReasonUntoleratedTaint || n.Pods != nil {
		t.Errorf("n2: %+v", n)
	}
	if n := nodeReport(t, r, "n9"); n.Verdict.Run || n.Verdict.Reason != ReasonNodeGone || len(n.Pods) != 1 {
		t.Errorf("n9, gone: %+v", n)
	}
	if r.Revision != 0 || r.Hash != hashOf(ds) {
		t.Errorf("revision %d, hash %q: the revision is not recorded yet", r.Revision, r.Hash)
	}
}

// Explain decides as Decide does, and changes nothing.
func TestExplainAgreesWithDecide(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationCanary, "canary=true"), withBudget("2", "0"))
	s := policyCluster(ds)
	label(s, []string{"canary", "true"}, "n2")
	before := deepCopySnapshot(s)
	r := Explain(s)
	p := Decide(s)
	if !reflect.DeepEqual(before, deepCopySnapshot(s)) {
		t.Error("Explain modified its snapshot")
	}
	if !reflect.DeepEqual(r.Events, p.Events) || !reflect.DeepEqual(r.Progressing, Progressing(p.Status)) {
		t.Errorf("report events %v, condition %+v; plan %v, %+v", r.Events, r.Progressing, p.Events, Progressing(p.Status))
	}
	var next []string
	for _, n := range r.Nodes {
		if len(n.Next) > 0 {
			next = append(next, n.Node)
		}
	}
	if !slices.Equal(next, createdOn(p)) || !slices.Equal(createdOn(p), []string{"n2"}) {
		t.Errorf("report changes %v, plan creates on %v", next, createdOn(p))
	}
}

func TestExplainDaemonSetBeingDeleted(t *testing.T) {
	ds := newDS("ds", withAnnotations(AnnotationPaused, "true"))
	ds.DeletionTimestamp = &metav1.Time{Time: t0}
	r := Explain(policyCluster(ds))
	if r.Nodes != nil || r.Settled || r.Progressing != nil {
		t.Errorf("report %+v, want nothing decided", r)
	}
}

func TestWaitMessage(t *testing.T) {
	tests := map[Reason]string{
		"":                             "",
		ReasonBudgetFull:               "maxUnavailable/maxSurge",
		ReasonNewPodUnavailable:        "new pod",
		ReasonPaused:                   AnnotationPaused,
		ReasonPartitionHeld:            AnnotationPartition,
		ReasonCanaryHeld:               AnnotationCanary,
		ReasonLaterWave:                AnnotationWaves,
		ReasonWavePause:                AnnotationWavePause,
		ReasonInvalidAnnotation:        "annotation",
		ReasonFailedPodBackoff:         "back-off",
		ReasonProgressDeadlineExceeded: string(ReasonProgressDeadlineExceeded),
		ReasonRestartLimitExceeded:     string(ReasonRestartLimitExceeded),
		ReasonContainerFailing:         string(ReasonContainerFailing),
		"SomethingElse":                "SomethingElse",
	}
	for reason, want := range tests {
		got := NodeReport{Waiting: reason}.WaitMessage()
		if !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("WaitMessage(%q) = %q, want it to say %q", reason, got, want)
		}
	}
}
