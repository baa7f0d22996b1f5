package daemon

import (
	"reflect"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCount(t *testing.T) {
	ds := newDS("ds", withNodeSelector("role", "agent"), withMinReady(60))
	agent := func(name string, opts ...nodeOpt) *v1.Node {
		return newNode(name, append([]nodeOpt{withLabels("role", "agent")}, opts...)...)
	}
	recent := readySince(t0.Add(-20 * time.Second))
	tests := []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		want  counts
		wait  time.Duration
	}{
		{name: "desired: eligible node without pod", nodes: []*v1.Node{agent("n1")}, want: counts{desired: 1}},
		{name: "ineligible node without pod counts nowhere", nodes: []*v1.Node{newNode("n1")}},
		{name: "current, ready, available, updated", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n1")}, want: counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1}},
		{name: "old revision: not updated", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n1", old())}, want: counts{desired: 1, current: 1, ready: 1, available: 1}},
		{name: "not Ready: current only", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n1", notReady())}, want: counts{desired: 1, current: 1, updated: 1}},
		{name: "Ready within minReadySeconds: ready, not available, look again", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n1", recent)}, want: counts{desired: 1, current: 1, ready: 1, updated: 1},
			wait: 40*time.Second + time.Millisecond},
		{name: "the soonest wait wins", nodes: []*v1.Node{agent("n1"), agent("n2")},
			pods: []*v1.Pod{newPod(ds, "p1", "n1", recent), newPod(ds, "p2", "n2", readySince(t0.Add(-50*time.Second)))},
			want: counts{desired: 2, current: 2, ready: 2, updated: 2}, wait: 10*time.Second + time.Millisecond},
		{name: "misscheduled: pod on a node not selected", nodes: []*v1.Node{newNode("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n1")}, want: counts{misscheduled: 1}},
		{name: "misscheduled: pod kept on a NoSchedule-tainted node", nodes: []*v1.Node{agent("n1", withTaint("k", v1.TaintEffectNoSchedule))},
			pods: []*v1.Pod{newPod(ds, "p", "n1")}, want: counts{misscheduled: 1}},
		{name: "pod on a node that no longer exists counts nowhere", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n9")}, want: counts{desired: 1}},
		{name: "several pods: the oldest bound one is counted", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{
				newPod(ds, "a", "n1", notReady(), createdAt(t0.Add(-time.Minute))),
				newPod(ds, "b", "n1", old(), createdAt(t0.Add(-time.Hour))),
				newPod(ds, "c", "n1", unbound(), createdAt(t0.Add(-2*time.Hour))),
			},
			want: counts{desired: 1, current: 1, ready: 1, available: 1}},
		{name: "a younger pod becoming available is waited for too", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{
				newPod(ds, "old", "n1", old(), createdAt(t0.Add(-time.Hour))),
				newPod(ds, "new", "n1", recent, createdAt(t0.Add(-time.Minute))),
			},
			want: counts{desired: 1, current: 1, ready: 1, available: 1}, wait: 40*time.Second + time.Millisecond},
		{name: "terminating pod still counts", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n1", terminating())}, want: counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1}},
		{name: "finished and terminating pod does not count", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n1", failed(), terminating())}, want: counts{desired: 1}},
		{name: "unbound pod counts for its pinned node", nodes: []*v1.Node{agent("n1")},
			pods: []*v1.Pod{newPod(ds, "p", "n1", unbound(), notReady())}, want: counts{desired: 1, current: 1, updated: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snap(ds, tt.nodes, tt.pods...)
			pl := arrange(s, NewEligibility(&ds.Spec.Template.Spec), hashOf(ds), nil, tt.pods)
			got, wait := pl.counts, time.Duration(pl.countRecheck)
			if got != tt.want || wait != tt.wait {
				t.Errorf("count = %+v, wait %v; want %+v, wait %v", got, wait, tt.want, tt.wait)
			}
		})
	}
}

func TestNextStatus(t *testing.T) {
	c := counts{desired: 5, current: 4, misscheduled: 1, ready: 3, available: 2, updated: 3}
	stored := apps.DaemonSetStatus{
		DesiredNumberScheduled: 5, CurrentNumberScheduled: 4, NumberMisscheduled: 1, NumberReady: 3,
		NumberAvailable: 2, NumberUnavailable: 3, UpdatedNumberScheduled: 3, ObservedGeneration: 2,
		Conditions: []apps.DaemonSetCondition{{Type: "Custom", Status: v1.ConditionTrue, Reason: "Kept"}},
	}
	one, two := int32(1), int32(2)
	tests := []struct {
		name      string
		gen       int64
		status    func(*apps.DaemonSetStatus)
		counts    func(*counts)
		observed  bool
		collision *int32
		want      func(*apps.DaemonSetStatus) // applied to stored; nil: no write
	}{
		{name: "nothing changed: nil", gen: 2, observed: true},
		{name: "nothing changed, not observed: nil", gen: 2},
		{name: "desired changed", gen: 2, observed: true, counts: func(c *counts) { c.desired = 6 },
			want: func(s *apps.DaemonSetStatus) { s.DesiredNumberScheduled, s.NumberUnavailable = 6, 4 }},
		{name: "current changed", gen: 2, observed: true, counts: func(c *counts) { c.current = 5 },
			want: func(s *apps.DaemonSetStatus) { s.CurrentNumberScheduled = 5 }},
		{name: "misscheduled changed", gen: 2, observed: true, counts: func(c *counts) { c.misscheduled = 0 },
			want: func(s *apps.DaemonSetStatus) { s.NumberMisscheduled = 0 }},
		{name: "ready changed", gen: 2, observed: true, counts: func(c *counts) { c.ready = 4 },
			want: func(s *apps.DaemonSetStatus) { s.NumberReady = 4 }},
		{name: "available and unavailable changed", gen: 2, observed: true, counts: func(c *counts) { c.available = 5 },
			want: func(s *apps.DaemonSetStatus) { s.NumberAvailable, s.NumberUnavailable = 5, 0 }},
		{name: "updated changed", gen: 2, observed: true, counts: func(c *counts) { c.updated = 5 },
			want: func(s *apps.DaemonSetStatus) { s.UpdatedNumberScheduled = 5 }},
		{name: "unavailable corrected", gen: 2, observed: true, status: func(s *apps.DaemonSetStatus) { s.NumberUnavailable = 0 },
			want: func(s *apps.DaemonSetStatus) { s.NumberUnavailable = 3 }},
		{name: "new generation observed", gen: 3, observed: true,
			want: func(s *apps.DaemonSetStatus) { s.ObservedGeneration = 3 }},
		{name: "new generation not observed while writes are in flight: nil", gen: 3},
		{name: "counts change while in flight: generation kept", gen: 3, counts: func(c *counts) { c.ready = 5 },
			want: func(s *apps.DaemonSetStatus) { s.NumberReady = 5 }},
		{name: "observedGeneration never lowered", gen: 1, observed: true},
		{name: "collisionCount recorded", gen: 2, observed: true, collision: &one,
			want: func(s *apps.DaemonSetStatus) { s.CollisionCount = &one }},
		{name: "collisionCount unchanged", gen: 2, observed: true, collision: &two,
			status: func(s *apps.DaemonSetStatus) { s.CollisionCount = &two }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds")
			ds.Generation = tt.gen
			ds.Status = *stored.DeepCopy()
			if tt.status != nil {
				tt.status(&ds.Status)
			}
			cc := c
			if tt.counts != nil {
				tt.counts(&cc)
			}
			before := ds.DeepCopy()
			got := nextStatus(ds, cc, tt.observed, tt.collision)
			if tt.want == nil {
				if got != nil {
					t.Fatalf("want no write, got %+v", got)
				}
			} else {
				want := ds.Status.DeepCopy()
				tt.want(want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("status =\n%+v\nwant\n%+v", got, want)
				}
			}
			if !reflect.DeepEqual(before, ds) {
				t.Error("DaemonSet modified")
			}
		})
	}
}

func TestDecideStatus(t *testing.T) {
	ds := newDS("ds", withMinReady(30))
	ds.Generation = 4
	ds.Status.ObservedGeneration = 3
	cc := int32(2)
	ds.Status.CollisionCount = &cc
	ds.Status.Conditions = []apps.DaemonSetCondition{{Type: "Custom", Status: v1.ConditionTrue}}
	s := snap(ds, nodes("n1", "n2", "n3"),
		newPod(ds, "p1", "n1"), newPod(ds, "p2", "n2", readySince(t0.Add(-10*time.Second))))

	p := Decide(s)
	want := apps.DaemonSetStatus{
		ObservedGeneration: 4, DesiredNumberScheduled: 3, CurrentNumberScheduled: 2, NumberReady: 2,
		NumberAvailable: 1, NumberUnavailable: 2, UpdatedNumberScheduled: 2, CollisionCount: &cc,
		Conditions: ds.Status.Conditions,
	}
	if p.Status == nil || !reflect.DeepEqual(*p.Status, want) {
		t.Fatalf("status = %+v\nwant %+v", p.Status, want)
	}
	if p.Status.CollisionCount == ds.Status.CollisionCount || &p.Status.Conditions[0] == &ds.Status.Conditions[0] {
		t.Error("the status to write shares memory with the DaemonSet")
	}
	if p.RequeueAfter != 20*time.Second+time.Millisecond {
		t.Errorf("RequeueAfter = %v, want the moment p2 becomes available", p.RequeueAfter)
	}

	s.InFlight.Creates = map[string]bool{"n3": true}
	if p := Decide(s); p.Status == nil || p.Status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration raised while writes are in flight: %+v", p.Status)
	}
	s.InFlight = InFlight{Deletes: map[types.UID]bool{"x": true}}
	if p := Decide(s); p.Status == nil || p.Status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration raised while deletes are in flight: %+v", p.Status)
	}

	ds.Status = *want.DeepCopy()
	s.InFlight = InFlight{}
	if p := Decide(s); p.Status != nil {
		t.Errorf("status rewritten although unchanged: %+v", p.Status)
	}
}
