package nodesim

import (
	"fmt"
	"testing"
	"time"
)

func TestNextRenewal(t *testing.T) {
	const interval = 10 * time.Second
	buckets := make([]int, 10)
	for i := range 5000 {
		name := fmt.Sprintf("sim-node-%d", i)
		first := nextRenewal(name, t0, interval)
		if first < interval/2 || first >= interval+interval/2 {
			t.Fatalf("%s: first wait %v outside [%v, %v)", name, first, interval/2, interval+interval/2)
		}
		// Renewing on time, or a little late, keeps the node on its slot.
		at := t0.Add(first)
		for _, late := range []time.Duration{0, 3 * time.Millisecond, time.Second} {
			if got := nextRenewal(name, at.Add(late), interval); got != interval-late {
				t.Fatalf("%s: renewal %v late waits %v, want %v", name, late, got, interval-late)
			}
		}
		buckets[at.Sub(t0.Truncate(interval))%interval/time.Second]++
	}
	// The slots spread the nodes over the interval: no second holds twice its share.
	for s, n := range buckets {
		if n < 250 || n > 1000 {
			t.Errorf("second %d of the interval holds %d of 5000 renewals", s, n)
		}
	}
}
