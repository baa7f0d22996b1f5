package controller

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

func TestStatusPace(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cur := &apps.DaemonSetStatus{ObservedGeneration: 2, NumberReady: 5}
	counters := &apps.DaemonSetStatus{ObservedGeneration: 2, NumberReady: 4}
	newGen := &apps.DaemonSetStatus{ObservedGeneration: 3, NumberReady: 5}
	condition := &apps.DaemonSetStatus{ObservedGeneration: 2, NumberReady: 5,
		Conditions: []apps.DaemonSetCondition{{Type: "Progressing", Status: v1.ConditionTrue}}}

	idle := func() bool { return false }
	p := newStatusPace(time.Second, 0, newStates())
	if w := p.wait("ns/a", cur, counters, now, idle); w != 0 {
		t.Errorf("first write waits %v, want none", w)
	}
	p.wrote("ns/a", now)
	if w := p.wait("ns/a", cur, counters, now.Add(300*time.Millisecond), idle); w != 700*time.Millisecond {
		t.Errorf("counters 300ms after a write wait %v, want 700ms", w)
	}
	if w := p.wait("ns/a", cur, newGen, now.Add(300*time.Millisecond), idle); w != 0 {
		t.Errorf("a new observedGeneration waits %v, want none", w)
	}
	if w := p.wait("ns/a", cur, condition, now.Add(300*time.Millisecond), idle); w != 0 {
		t.Errorf("a condition change waits %v, want none", w)
	}
	if w := p.wait("ns/b", cur, counters, now.Add(300*time.Millisecond), idle); w != 0 {
		t.Errorf("another DaemonSet waits %v, want none", w)
	}
	if w := p.wait("ns/a", cur, counters, now.Add(time.Second), idle); w != 0 {
		t.Errorf("after the interval: wait %v, want none", w)
	}
	if w := newStatusPace(0, time.Minute, newStates()).wait("ns/a", cur, counters, now, idle); w != 0 {
		t.Errorf("no interval: wait %v, want none", w)
	}
}

// While the DaemonSet's pod writes are busy, a counters-only write waits up to the
// hold after the last write, and the drain of the pod writes reports it once; a new
// observedGeneration or condition is never held; without the pod writes, or after
// the hold, the write goes out.
func TestStatusPaceHoldsCountersWhilePodWritesAreBusy(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cur := &apps.DaemonSetStatus{ObservedGeneration: 2, CurrentNumberScheduled: 5}
	counters := &apps.DaemonSetStatus{ObservedGeneration: 2, CurrentNumberScheduled: 6}
	newGen := &apps.DaemonSetStatus{ObservedGeneration: 3, CurrentNumberScheduled: 5}
	condition := &apps.DaemonSetStatus{ObservedGeneration: 2, CurrentNumberScheduled: 5,
		Conditions: []apps.DaemonSetCondition{{Type: "Progressing", Status: v1.ConditionTrue}}}
	busy := func() bool { return true }
	idle := func() bool { return false }

	p := newStatusPace(time.Second, 30*time.Second, newStates())
	p.wrote("ns/a", now)
	at := now.Add(2 * time.Second)
	if w := p.wait("ns/a", cur, counters, at, busy); w != 28*time.Second {
		t.Errorf("counters while busy, 2s after a write: wait %v, want the 28s left of the hold", w)
	}
	if !p.drained("ns/a") {
		t.Error("the drain does not report the held write")
	}
	if p.drained("ns/a") {
		t.Error("the drain reports the held write twice")
	}
	if w := p.wait("ns/a", cur, newGen, at, busy); w != 0 {
		t.Errorf("a new observedGeneration while busy waits %v, want none", w)
	}
	if w := p.wait("ns/a", cur, condition, at, busy); w != 0 {
		t.Errorf("a condition change while busy waits %v, want none", w)
	}
	if p.drained("ns/a") {
		t.Error("a write not held is reported by the drain")
	}
	if w := p.wait("ns/a", cur, counters, at, idle); w != 0 {
		t.Errorf("counters with no pod writes busy: wait %v, want none", w)
	}
	if p.drained("ns/a") {
		t.Error("a write that went out is reported by the drain")
	}
	if w := p.wait("ns/a", cur, counters, now.Add(30*time.Second), busy); w != 0 {
		t.Errorf("counters while busy after the hold: wait %v, want none", w)
	}
	if w := p.wait("ns/a", cur, counters, now.Add(300*time.Millisecond), busy); w != 700*time.Millisecond {
		t.Errorf("counters while busy within the interval: wait %v, want the interval's 700ms", w)
	}
	p.wait("ns/a", cur, counters, at, busy)
	p.wrote("ns/a", at)
	if p.drained("ns/a") {
		t.Error("a held write, written since, is reported by the drain")
	}
	if w := newStatusPace(time.Second, 0, newStates()).wait("ns/a", cur, counters, now.Add(2*time.Second), busy); w != 0 {
		t.Errorf("no hold: wait %v while busy, want none", w)
	}
}

// Pods that become unready one after another within the interval are written in a
// few status writes, and the status ends up counting all of them.
func TestController_StatusWritesPacedDuringReadinessFlips(t *testing.T) {
	h := newHarness(t, harnessOptions{statusInterval: 500 * time.Millisecond})
	nodes := h.createNodes("node", 10, nil)
	ds := h.createDaemonSet(newDaemonSet("agent"))
	h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
	time.Sleep(600 * time.Millisecond) // out of the interval of the last write

	writes := h.countStatusWrites()
	flipped := h.makeUnready(ds, 40*time.Millisecond)
	h.waitFor("the status to count every pod unready", func() bool {
		return h.daemonSet("agent").Status.NumberReady == 0
	})
	// Ten flips over about 400ms: the first write at once, the rest together when
	// the interval ends, and at most one more if the last flips fell after that.
	if n := writes.Load(); n < 1 || n > 3 {
		t.Errorf("%d flips made %d status writes, want 1 to 3", flipped, n)
	}
}
