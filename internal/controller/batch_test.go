package controller

import (
	"testing"
	"time"
)

// Ten pods turning unready within about 200ms: with a batch period that spans them,
// one sync handles them all and writes the status once; without one, the flips make
// syncs (and status writes) of their own. Either way the status ends up counting
// every pod unready.
func TestController_PodEventsOfOneMomentMakeOneSync(t *testing.T) {
	for _, tc := range []struct {
		name     string
		batch    time.Duration
		min, max int32
	}{
		{name: "batched", batch: 700 * time.Millisecond, min: 1, max: 2},
		{name: "unbatched", batch: -1, min: 3, max: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{batch: tc.batch})
			nodes := h.createNodes("node", 10, nil)
			ds := h.createDaemonSet(newDaemonSet("agent"))
			h.waitFor("one pod per node", func() bool { return h.converged("agent", nodes) })
			time.Sleep(max(tc.batch, 0) + 100*time.Millisecond) // past the last batch

			writes := h.countStatusWrites()
			flipped := h.makeUnready(ds, 20*time.Millisecond)
			h.waitFor("the status to count every pod unready", func() bool {
				return h.daemonSet("agent").Status.NumberReady == 0
			})
			if n := writes.Load(); n < tc.min || n > tc.max {
				t.Errorf("%d flips made %d status writes, want %d to %d", flipped, n, tc.min, tc.max)
			}
		})
	}
}
