package controller

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestSyncBatcher(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Now())
	b := newSyncBatcher(100*time.Millisecond, clock, newStates())
	steps := []struct {
		do      func()
		advance time.Duration
		want    time.Duration
	}{
		{want: 0}, // never synced: at once
		{do: func() { b.started("ns/a") }, want: 100 * time.Millisecond},
		{advance: 30 * time.Millisecond, want: 70 * time.Millisecond},
		{advance: 70 * time.Millisecond, want: 0}, // the period is over
		{advance: time.Hour, want: 0},
		{do: func() { b.started("ns/a") }, advance: 99 * time.Millisecond, want: time.Millisecond},
		{do: func() { b.st.forget("ns/a") }, want: 0},
	}
	for i, s := range steps {
		if s.do != nil {
			s.do()
		}
		clock.SetTime(clock.Now().Add(s.advance))
		if got := b.delay("ns/a"); got != s.want {
			t.Errorf("step %d: delay = %v, want %v", i, got, s.want)
		}
	}
	if got := b.delay("ns/other"); got != 0 {
		t.Errorf("another DaemonSet waits %v, want 0", got)
	}
	off := newSyncBatcher(0, clock, newStates())
	off.started("ns/a")
	if got := off.delay("ns/a"); got != 0 {
		t.Errorf("with no period: delay = %v, want 0", got)
	}
}

// Ten pods turning unready one after another: with a batch period that spans them
// (20ms apart), the first flip syncs at once and one more sync handles the rest, so
// the status is written about twice; without one, the flips make syncs (and status
// writes) of their own. They are 60ms apart then, longer than a sync takes even under
// the race detector on a loaded machine, so that the workqueue does not merge them.
// Either way the status ends up counting every pod unready.
func TestController_PodEventsOfOneMomentMakeOneSync(t *testing.T) {
	for _, tc := range []struct {
		name     string
		batch    time.Duration
		spacing  time.Duration
		min, max int32
	}{
		{name: "batched", batch: 700 * time.Millisecond, spacing: 20 * time.Millisecond, min: 1, max: 3},
		{name: "unbatched", batch: -1, spacing: 60 * time.Millisecond, min: 5, max: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{batch: tc.batch})
			nodes := h.createNodes("node", 10, nil)
			ds := h.createDaemonSet(newDaemonSet("agent"))
			h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
			time.Sleep(max(tc.batch, 0) + 100*time.Millisecond) // past the last batch

			writes := h.countStatusWrites()
			flipped := h.makeUnready(ds, tc.spacing)
			h.waitFor("the status to count every pod unready", func() bool {
				return h.daemonSet("agent").Status.NumberReady == 0
			})
			if n := writes.Load(); n < tc.min || n > tc.max {
				t.Errorf("%d flips made %d status writes, want %d to %d", flipped, n, tc.min, tc.max)
			}
		})
	}
}
