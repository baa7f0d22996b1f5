package daemon

import (
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func failed() podOpt    { return func(p *v1.Pod) { withPhase(v1.PodFailed)(p); notReady()(p) } }
func succeeded() podOpt { return func(p *v1.Pod) { withPhase(v1.PodSucceeded)(p); notReady()(p) } }

func TestManage(t *testing.T) {
	surge := []dsOpt{withBudget("1", "0")}
	tainted := func(effect v1.TaintEffect) []*v1.Node {
		return []*v1.Node{newNode("n1", withTaint("dedicated", effect))}
	}
	n1 := nodes("n1")

	tests := []struct {
		name    string
		ds      []dsOpt
		nodes   []*v1.Node
		pods    func(ds *apps.DaemonSet) []*v1.Pod
		setup   func(*Snapshot)
		creates []string
		deletes map[string]Reason // pod name -> reason
		events  []string
		failed  []string // FailedPodNodes
		requeue time.Duration
	}{
		{name: "eligible node without pod: create", nodes: n1,
			creates: []string{"n1"}},
		{name: "pod being created: no second create", nodes: n1,
			setup: func(s *Snapshot) { s.InFlight.Creates = map[string]bool{"n1": true} }},
		{name: "node not matching the selector: no create", ds: []dsOpt{withNodeSelector("zone", "a")}, nodes: n1},
		{name: "untolerated NoSchedule: no create", nodes: tainted(v1.TaintEffectNoSchedule)},
		{name: "running pod: nothing to do", nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1")} }},
		{name: "failed pod: deleted with FailedDaemonPod, backoff grows", nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", failed())} },
			deletes: map[string]Reason{"p": ReasonFailedPod}, events: []string{EventFailedDaemonPod}, failed: []string{"n1"}},
		{name: "failed pod held by backoff: kept, look again when it ends", nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", failed())} },
			setup:   func(s *Snapshot) { s.Backoff = map[string]time.Time{"n1": t0.Add(42 * time.Second)} },
			requeue: 42 * time.Second},
		{name: "failed pod after backoff ended: deleted", nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", failed())} },
			setup:   func(s *Snapshot) { s.Backoff = map[string]time.Time{"n1": t0} },
			deletes: map[string]Reason{"p": ReasonFailedPod}, events: []string{EventFailedDaemonPod}, failed: []string{"n1"}},
		{name: "backoff of another node does not hold", nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", failed())} },
			setup:   func(s *Snapshot) { s.Backoff = map[string]time.Time{"n2": t0.Add(time.Hour)} },
			deletes: map[string]Reason{"p": ReasonFailedPod}, events: []string{EventFailedDaemonPod}, failed: []string{"n1"}},
		{name: "succeeded pod: deleted with SucceededDaemonPod", nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", succeeded())} },
			deletes: map[string]Reason{"p": ReasonSucceededPod}, events: []string{EventSucceededDaemonPod}},
		{name: "duplicate pods: the oldest bound one is kept", nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{
					newPod(ds, "a-unbound-oldest", "n1", unbound(), createdAt(t0.Add(-3*time.Hour))),
					newPod(ds, "b-bound-young", "n1", createdAt(t0.Add(-time.Hour))),
					newPod(ds, "c-bound-old", "n1", createdAt(t0.Add(-2*time.Hour))),
				}
			},
			deletes: map[string]Reason{"a-unbound-oldest": ReasonExcessPod, "b-bound-young": ReasonExcessPod}},
		{name: "duplicate pods: finished ones go for their own reason", nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "a", "n1", failed(), createdAt(t0.Add(-3*time.Hour))), newPod(ds, "b", "n1")}
			},
			deletes: map[string]Reason{"a": ReasonFailedPod}, events: []string{EventFailedDaemonPod}, failed: []string{"n1"}},
		{name: "untolerated NoExecute: pod deleted", nodes: tainted(v1.TaintEffectNoExecute),
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1")} },
			deletes: map[string]Reason{"p": ReasonUntoleratedNoExecute}},
		{name: "node no longer selected: pod deleted", ds: []dsOpt{withNodeSelector("zone", "a")}, nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1")} },
			deletes: map[string]Reason{"p": ReasonNodeSelectorMismatch}},
		{name: "ineligible node: finished pods deleted without events", ds: []dsOpt{withNodeSelector("zone", "a")}, nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", failed())} },
			deletes: map[string]Reason{"p": ReasonNodeSelectorMismatch}},
		{name: "untolerated NoSchedule: running pod kept", nodes: tainted(v1.TaintEffectNoSchedule),
			pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1")} }},
		{name: "terminating pod not deleted again", nodes: tainted(v1.TaintEffectNoExecute),
			pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", terminating())} }},
		{name: "pod already deleted by us not deleted again", nodes: tainted(v1.TaintEffectNoExecute),
			pods:  func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1")} },
			setup: func(s *Snapshot) { s.InFlight.Deletes = map[types.UID]bool{"uid-p": true} }},
		{name: "terminating duplicate not deleted again", nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "a", "n1", createdAt(t0.Add(-2*time.Hour))), newPod(ds, "b", "n1", terminating())}
			}},
		{name: "terminating pod still occupies its node", nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", terminating())} }},
		{name: "finished and terminating pod no longer counts: create", nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", failed(), terminating())} },
			creates: []string{"n1"}},
		{name: "unbound pod pinned to a missing node: deleted", nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "p1", "n1"), newPod(ds, "gone", "n9", unbound())}
			},
			deletes: map[string]Reason{"gone": ReasonNodeGone}},
		{name: "bound pod on a missing node: the pod GC's", nodes: n1, ds: []dsOpt{withOnDelete()},
			pods: func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p1", "n1"), newPod(ds, "gone", "n9")} }},
		{name: "terminating unbound pod on a missing node: not deleted again", nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "p1", "n1"), newPod(ds, "gone", "n9", unbound(), terminating())}
			}},
		{name: "pod pinned to no node: ignored", nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "")} },
			creates: []string{"n1"}},
		{name: "surge: only terminating pods, create beside them", ds: surge, nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", terminating())} },
			creates: []string{"n1"}},
		{name: "surge: failed pod replaced in the same plan", ds: surge, nodes: n1,
			pods:    func(ds *apps.DaemonSet) []*v1.Pod { return []*v1.Pod{newPod(ds, "p", "n1", failed())} },
			creates: []string{"n1"}, deletes: map[string]Reason{"p": ReasonFailedPod}, events: []string{EventFailedDaemonPod}, failed: []string{"n1"}},
		{name: "surge: old Ready and new not yet available: both kept", ds: surge, nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "old", "n1", old()), newPod(ds, "new", "n1", notReady())}
			}},
		{name: "surge: new available: old deleted", ds: surge, nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "old", "n1", old()), newPod(ds, "new", "n1")}
			},
			deletes: map[string]Reason{"old": ReasonSurgeDone}},
		{name: "surge: old not Ready: deleted at once", ds: surge, nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{newPod(ds, "old", "n1", old(), notReady()), newPod(ds, "new", "n1", notReady())}
			},
			deletes: map[string]Reason{"old": ReasonSurgeDone}},
		{name: "surge: new Ready within minReadySeconds: old kept", ds: append(surge, withMinReady(60)), nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{
					newPod(ds, "old", "n1", old(), createdAt(t0.Add(-time.Hour))),
					newPod(ds, "new", "n1", readySince(t0.Add(-30*time.Second)), createdAt(t0.Add(-time.Minute))),
				}
			},
			requeue: 30*time.Second + time.Millisecond},
		{name: "surge: beyond one old and one new, the younger go", ds: surge, nodes: n1,
			pods: func(ds *apps.DaemonSet) []*v1.Pod {
				return []*v1.Pod{
					newPod(ds, "old1", "n1", old(), createdAt(t0.Add(-4*time.Hour))), newPod(ds, "old2", "n1", old()),
					newPod(ds, "new1", "n1", notReady(), createdAt(t0.Add(-2*time.Hour))), newPod(ds, "new2", "n1", notReady()),
				}
			},
			deletes: map[string]Reason{"old2": ReasonExcessPod, "new2": ReasonExcessPod}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("ds", tt.ds...)
			var pods []*v1.Pod
			if tt.pods != nil {
				pods = tt.pods(ds)
			}
			s := snap(ds, tt.nodes, pods...)
			if tt.setup != nil {
				tt.setup(s)
			}
			p := Decide(s)
			if got := createdOn(p); !slices.Equal(got, tt.creates) {
				t.Errorf("creates on %v, want %v", got, tt.creates)
			}
			gotDeletes := map[string]Reason{}
			for _, d := range p.Deletes {
				gotDeletes[d.Pod.Name] = d.Reason
			}
			if !maps.Equal(gotDeletes, tt.deletes) {
				t.Errorf("deletes = %v, want %v", gotDeletes, tt.deletes)
			}
			if got := eventReasons(p); !slices.Equal(got, tt.events) {
				t.Errorf("events = %v, want %v", got, tt.events)
			}
			if !slices.Equal(p.FailedPodNodes, tt.failed) {
				t.Errorf("FailedPodNodes = %v, want %v", p.FailedPodNodes, tt.failed)
			}
			if p.RequeueAfter != tt.requeue {
				t.Errorf("RequeueAfter = %v, want %v", p.RequeueAfter, tt.requeue)
			}
		})
	}
}

func TestManageEventMessages(t *testing.T) {
	ds := newDS("ds")
	p := Decide(snap(ds, nodes("n1", "n2"), newPod(ds, "f", "n1", failed()), newPod(ds, "s", "n2", succeeded())))
	want := []Event{
		{Type: v1.EventTypeWarning, Reason: EventFailedDaemonPod, Message: "Found failed daemon pod default/f on node n1, will try to kill it"},
		{Type: v1.EventTypeNormal, Reason: EventSucceededDaemonPod, Message: "Found succeeded daemon pod default/s on node n2, will try to delete it"},
	}
	if !reflect.DeepEqual(p.Events, want) {
		t.Errorf("events = %+v\nwant %+v", p.Events, want)
	}
}
