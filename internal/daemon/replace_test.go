package daemon

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestRollingBudget(t *testing.T) {
	tests := []struct {
		name    string
		opt     dsOpt
		desired int
		want    budget
		wantErr bool
	}{
		{name: "maxUnavailable as an int", opt: withBudget("", "3"), desired: 10, want: budget{maxUnavailable: 3}},
		{name: "maxUnavailable percent rounds up", opt: withBudget("", "10%"), desired: 15, want: budget{maxUnavailable: 2}},
		{name: "maxSurge percent rounds up", opt: withBudget("25%", "0"), desired: 5, want: budget{maxSurge: 2}},
		{name: "both zero: one unavailable", opt: withBudget("0", "0"), desired: 4, want: budget{maxUnavailable: 1}},
		{name: "both zero percent: one unavailable", opt: withBudget("0%", "0%"), desired: 4, want: budget{maxUnavailable: 1}},
		{name: "both zero on an empty DaemonSet: zero", opt: withBudget("0", "0"), desired: 0, want: budget{}},
		{name: "percent of nothing is zero", opt: withBudget("", "50%"), desired: 0, want: budget{}},
		{name: "OnDelete has no budget", opt: withOnDelete(), desired: 4, want: budget{}},
		{name: "RollingUpdate without parameters: one unavailable", opt: func(ds *apps.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate = nil }, desired: 4, want: budget{maxUnavailable: 1}},
		{name: "invalid maxUnavailable", opt: withBudget("", "many"), desired: 4, wantErr: true},
		{name: "invalid maxSurge", opt: withBudget("x%", "1"), desired: 4, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rollingBudget(newDS("ds", tt.opt), tt.desired)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("rollingBudget = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestAllowsSurge(t *testing.T) {
	for opt, want := range map[string]bool{"1": true, "1%": true, "0": false, "": false, "bad": false} {
		if got := allowsSurge(newDS("ds", withBudget(opt, "0"))); got != want {
			t.Errorf("allowsSurge(maxSurge=%q) = %v, want %v", opt, got, want)
		}
	}
	if allowsSurge(newDS("ds", withOnDelete())) {
		t.Error("OnDelete allows surge")
	}
}

// rolloutCluster is five nodes n1..n5 (listed in reverse) each running an available
// pod of an older template.
func rolloutCluster(ds *apps.DaemonSet, names ...string) *Snapshot {
	if len(names) == 0 {
		names = []string{"n5", "n4", "n3", "n2", "n1"}
	}
	s := snap(ds, nodes(names...))
	for _, n := range names {
		s.Pods = append(s.Pods, newPod(ds, "old-"+n, n, old()))
	}
	return s
}

// replace puts pod in place of the pods on its node.
func replace(s *Snapshot, pods ...*v1.Pod) {
	for _, p := range pods {
		s.Pods = slices.DeleteFunc(s.Pods, func(q *v1.Pod) bool { return q.Spec.NodeName == p.Spec.NodeName })
	}
	s.Pods = append(s.Pods, pods...)
}

func TestRollOut(t *testing.T) {
	tests := []struct {
		name    string
		ds      []dsOpt
		setup   func(ds *apps.DaemonSet, s *Snapshot)
		creates []string
		deletes []string
		reasons []Reason // of creates then deletes, when checked
		requeue time.Duration
		events  []string
	}{
		{name: "maxUnavailable int: that many old pods, in node-name order", ds: []dsOpt{withBudget("", "2")},
			deletes: []string{"old-n1", "old-n2"}, reasons: []Reason{ReasonUpdate, ReasonUpdate}},
		{name: "maxUnavailable percent rounds up", ds: []dsOpt{withBudget("", "30%")},
			deletes: []string{"old-n1", "old-n2"}},
		{name: "both zero: one at a time", ds: []dsOpt{withBudget("0", "0")},
			deletes: []string{"old-n1"}},
		{name: "unavailable new pods use the budget", ds: []dsOpt{withBudget("", "2")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", notReady())) },
			deletes: []string{"old-n2"}},
		{name: "budget used up: nothing", ds: []dsOpt{withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) { replace(s, newPod(ds, "new-n1", "n1", notReady())) }},
		{name: "minReadySeconds: a new pod Ready too briefly is unavailable", ds: []dsOpt{withBudget("", "1"), withMinReady(60)},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "new-n1", "n1", readySince(t0.Add(-30*time.Second))))
			},
			requeue: 30*time.Second + time.Millisecond},
		{name: "minReadySeconds: available once it has passed", ds: []dsOpt{withBudget("", "1"), withMinReady(60)},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "new-n1", "n1", readySince(t0.Add(-30*time.Second))))
				s.Now = t0.Add(31 * time.Second)
			},
			deletes: []string{"old-n2"}},
		{name: "unavailable old pods are replaced whatever the budget", ds: []dsOpt{withBudget("", "1")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "old-n4", "n4", old(), notReady()), newPod(ds, "old-n5", "n5", old(), notReady()))
			},
			deletes: []string{"old-n4", "old-n5"}},
		{name: "legacy template generation counts as updated", ds: []dsOpt{withBudget("", "1"), func(ds *apps.DaemonSet) {
			ds.Annotations = map[string]string{TemplateGenerationAnnotation: "4"}
		}},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "gen-n1", "n1", old(), notReady(), func(p *v1.Pod) { p.Labels[TemplateGenerationLabel] = "4" }))
			}},
		{name: "OnDelete replaces nothing", ds: []dsOpt{withOnDelete()}},
		{name: "not while the placement rules create", ds: []dsOpt{withBudget("", "5")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { s.Nodes = append(s.Nodes, newNode("n6")) },
			creates: []string{"n6"}},
		{name: "not while the placement rules delete", ds: []dsOpt{withBudget("", "5")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { s.Pods = append(s.Pods, newPod(ds, "z-dup", "n3", old())) },
			deletes: []string{"z-dup"}},
		{name: "not while creates are in flight", ds: []dsOpt{withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) { s.InFlight.Creates = map[string]bool{"elsewhere": true} }},
		{name: "not while deletes are in flight", ds: []dsOpt{withBudget("", "5")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) { s.InFlight.Deletes = map[types.UID]bool{"gone": true} }},
		{name: "invalid budget: warning, nothing replaced", ds: []dsOpt{withBudget("", "lots")},
			events: []string{EventInvalidSpec}},
		{name: "surge: at most maxSurge creates, in node-name order", ds: []dsOpt{withBudget("2", "0")},
			creates: []string{"n1", "n2"}, reasons: []Reason{ReasonSurge, ReasonSurge}},
		{name: "surge percent rounds up", ds: []dsOpt{withBudget("21%", "0")},
			creates: []string{"n1", "n2"}},
		{name: "surge: nodes still surging use the budget", ds: []dsOpt{withBudget("2", "0")},
			setup:   func(ds *apps.DaemonSet, s *Snapshot) { s.Pods = append(s.Pods, newPod(ds, "new-n4", "n4", notReady())) },
			creates: []string{"n1"}},
		{name: "surge: unavailable old pod replaced whatever the budget", ds: []dsOpt{withBudget("1", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				replace(s, newPod(ds, "old-n4", "n4", old(), notReady()), newPod(ds, "old-n5", "n5", old(), notReady()))
			},
			creates: []string{"n1", "n4", "n5"}},
		{name: "surge: unavailable old pod on a node it may not start on is deleted", ds: []dsOpt{withBudget("1", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Nodes[0] = newNode("n5", withTaint("dedicated", v1.TaintEffectNoSchedule))
				replace(s, newPod(ds, "old-n5", "n5", old(), notReady()))
			},
			creates: []string{"n1"}, deletes: []string{"old-n5"}, reasons: []Reason{ReasonSurge, ReasonUntoleratedTaint}},
		{name: "surge: pod on a node it may not start on stays while availability is short", ds: []dsOpt{withBudget("1", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Nodes[0] = newNode("n5", withTaint("dedicated", v1.TaintEffectNoSchedule))
				for _, n := range []string{"n1", "n2", "n3"} {
					replace(s, newPod(ds, "new-"+n, n))
				}
				replace(s, newPod(ds, "new-n4", "n4", notReady()))
			}},
		{name: "surge: pod on a node it may not start on goes once more are available than desired", ds: []dsOpt{withBudget("1", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Nodes[0] = newNode("n5", withTaint("dedicated", v1.TaintEffectNoSchedule))
				for _, n := range []string{"n1", "n2", "n3", "n4"} {
					replace(s, newPod(ds, "new-"+n, n))
				}
			},
			deletes: []string{"old-n5"}, reasons: []Reason{ReasonUntoleratedTaint}},
		{name: "surge: a node that no longer exists does not break the plan", ds: []dsOpt{withBudget("1", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Nodes = s.Nodes[1:] // n5 is gone, its old pod is still bound there
			},
			creates: []string{"n1"}},
		{name: "surge: an unavailable pod on a node that no longer exists is left to the pod GC", ds: []dsOpt{withBudget("1", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				s.Nodes = s.Nodes[1:]
				replace(s, newPod(ds, "old-n5", "n5", old(), notReady()))
			},
			creates: []string{"n1"}},
		{name: "surge: pods on a node that no longer exists do not count as available", ds: []dsOpt{withBudget("1", "0")},
			setup: func(ds *apps.DaemonSet, s *Snapshot) {
				// n1..n3 updated, n4's new pod not Ready yet, n5 may no longer start
				// pods, n9 is gone: only four pods are really available, as desired.
				s.Nodes[0] = newNode("n5", withTaint("dedicated", v1.TaintEffectNoSchedule))
				for _, n := range []string{"n1", "n2", "n3"} {
					replace(s, newPod(ds, "new-"+n, n))
				}
				replace(s, newPod(ds, "new-n4", "n4", notReady()))
				s.Pods = append(s.Pods, newPod(ds, "old-n9", "n9", old()))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", tt.ds...)
			s := rolloutCluster(ds)
			if tt.setup != nil {
				tt.setup(ds, s)
			}
			p := Decide(s)
			if got := createdOn(p); !slices.Equal(got, tt.creates) {
				t.Errorf("creates on %v, want %v", got, tt.creates)
			}
			if got := deletedNames(p); !slices.Equal(got, tt.deletes) {
				t.Errorf("deletes %v, want %v", got, tt.deletes)
			}
			if tt.reasons != nil {
				var got []Reason
				for _, c := range p.Creates {
					got = append(got, c.Reason)
				}
				for _, d := range p.Deletes {
					got = append(got, d.Reason)
				}
				if !slices.Equal(got, tt.reasons) {
					t.Errorf("reasons %v, want %v", got, tt.reasons)
				}
			}
			if p.RequeueAfter != tt.requeue {
				t.Errorf("RequeueAfter = %v, want %v", p.RequeueAfter, tt.requeue)
			}
			if got := eventReasons(p); !slices.Equal(got, tt.events) {
				t.Errorf("events %v, want %v", got, tt.events)
			}
			if len(p.Creates) > 0 && (p.Template == nil || p.Template.Labels[HashLabel] != p.Hash) {
				t.Errorf("creates without a template of the current revision: %v", p.Template)
			}
		})
	}
}

// The same state yields the same plan whatever order the nodes and pods come in.
func TestRollOutDeterministic(t *testing.T) {
	for _, budget := range []dsOpt{withBudget("", "2"), withBudget("2", "0")} {
		ds := newDS("ds", budget)
		var names []string
		for i := 1; i <= 12; i++ {
			names = append(names, fmt.Sprintf("node-%02d", i))
		}
		forward := rolloutCluster(ds, names...)
		want := Decide(forward)
		if len(want.Creates)+len(want.Deletes) != 2 {
			t.Fatalf("plan changes %d pods, want 2", len(want.Creates)+len(want.Deletes))
		}
		for i := 0; i < 5; i++ {
			s := rolloutCluster(ds, names...)
			slices.Reverse(s.Nodes)
			s.Nodes[0], s.Nodes[i+3] = s.Nodes[i+3], s.Nodes[0]
			slices.Reverse(s.Pods)
			got := Decide(s)
			if !reflect.DeepEqual(createdOn(got), createdOn(want)) || !reflect.DeepEqual(deletedNames(got), deletedNames(want)) {
				t.Fatalf("order changed the plan: %v %v, want %v %v", createdOn(got), deletedNames(got), createdOn(want), deletedNames(want))
			}
		}
		if c, d := createdOn(want), deletedNames(want); !slices.Equal(c, []string{"node-01", "node-02"}) && !slices.Equal(d, []string{"old-node-01", "old-node-02"}) {
			t.Errorf("not the first nodes by name: %v %v", c, d)
		}
	}
}
