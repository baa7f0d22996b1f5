package bench

import (
	"fmt"
	"time"
)

// progressEvery is how often a long wait says how far it is.
const progressEvery = 15 * time.Second

// reportProgress says, every progressEvery until the returned stop is called, how
// far the DaemonSets of wants are: those converged, and the pods updated and
// available against those wanted (as their status shows; for the floor controller,
// which writes no status, the first DaemonSet still short, as its pods show it).
func (r *runCtx) reportProgress(what string, wants map[string]dsWant) (stop func()) {
	return r.every(func(waited time.Duration) string {
		if r.ctrl != nil && r.ctrl.Name == Floor {
			if short := r.w.podsShort(wants); len(short) > 0 {
				return fmt.Sprintf("%s, %v: %s", what, waited, short[0])
			}
			return ""
		}
		p := r.w.progress(wants)
		return fmt.Sprintf("%s, %v: %d of %d DaemonSets converged; pods updated %d, available %d, of %d", what, waited,
			p.converged, len(wants), p.updated, p.available, p.wanted)
	})
}

// every logs what says, given the time waited so far, every progressEvery until the
// returned stop is called; an empty string logs nothing.
func (r *runCtx) every(says func(waited time.Duration) string) (stop func()) {
	done := make(chan struct{})
	go func() {
		start := time.Now()
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-r.ctx.Done():
				return
			case <-tick.C:
			}
			if msg := says(time.Since(start).Round(time.Second)); msg != "" {
				r.logf("%s", msg)
			}
		}
	}()
	return func() { close(done) }
}

// convergence is how far the DaemonSets of a wait are, summed over them.
type convergence struct {
	converged                  int
	updated, available, wanted int64
}

// progress reads how far the DaemonSets of wants are from their status.
func (w *watcher) progress(wants map[string]dsWant) convergence {
	var c convergence
	for name, want := range wants {
		c.wanted += int64(want.Available)
		ds, err := w.ds.DaemonSets(Namespace).Get(name)
		if err != nil {
			continue
		}
		if dsConverged(ds, want) {
			c.converged++
		}
		c.updated += int64(min(ds.Status.UpdatedNumberScheduled, want.Desired))
		c.available += int64(min(ds.Status.NumberAvailable, want.Available))
	}
	return c
}
