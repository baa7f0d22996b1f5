package controller

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/everynode/everynode/internal/daemon"
)

func TestFailedBackoff_DoublesFromOneSecondUpToFifteenMinutes(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := newFailedBackoff(clock, newStates())
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for d := 16 * time.Second; d < daemon.FailedPodBackoffMax; d *= 2 {
		want = append(want, d)
	}
	want = append(want, daemon.FailedPodBackoffMax, daemon.FailedPodBackoffMax)
	for i, d := range want {
		b.next("ns/a", 1, "node-0", 0)
		until, ok := b.view("ns/a", 1)["node-0"]
		if !ok || until.Sub(clock.Now()) != d {
			t.Fatalf("failure %d: held until %v (%v from now), want %v", i+1, until, until.Sub(clock.Now()), d)
		}
		// The next failed pod is found once the backoff is over.
		clock.SetTime(until)
		if held := b.view("ns/a", 1); len(held) != 0 {
			t.Fatalf("failure %d: still held at the end of the backoff: %v", i+1, held)
		}
	}
}

func TestFailedBackoff_ViewReturnsWhenEachNodeIsReleased(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()
	b := newFailedBackoff(clock, newStates())
	b.next("ns/a", 1, "node-0", 0)
	b.next("ns/a", 1, "node-0", 0) // 2s from start
	b.next("ns/a", 1, "node-1", 0) // 1s from start
	b.next("ns/b", 1, "node-1", 0) // another DaemonSet: independent
	clock.Step(400 * time.Millisecond)
	held := b.view("ns/a", 1)
	if len(held) != 2 || !held["node-0"].Equal(start.Add(2*time.Second)) || !held["node-1"].Equal(start.Add(time.Second)) {
		t.Fatalf("view = %v, want node-0 until start+2s and node-1 until start+1s", held)
	}
	if remaining := held["node-1"].Sub(clock.Now()); remaining != 600*time.Millisecond {
		t.Errorf("node-1 has %v left, want 600ms", remaining)
	}
	clock.Step(time.Second)
	if held := b.view("ns/a", 1); len(held) != 1 || !held["node-0"].Equal(start.Add(2*time.Second)) {
		t.Errorf("view = %v, want only node-0 held", held)
	}
}

func TestFailedBackoff_GenerationChangeStartsOver(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := newFailedBackoff(clock, newStates())
	for range 3 {
		b.next("ns/a", 1, "node-0", 0) // 1s, 2s, 4s
	}
	if held := b.view("ns/a", 2); held != nil {
		t.Errorf("a new generation sees the old backoff: %v", held)
	}
	b.next("ns/a", 2, "node-0", 0)
	if until := b.view("ns/a", 2)["node-0"]; until.Sub(clock.Now()) != time.Second {
		t.Errorf("after a spec change: held %v, want 1s", until.Sub(clock.Now()))
	}
	if held := b.view("ns/a", 1); held != nil {
		t.Errorf("the old generation's backoff survived the new one: %v", held)
	}
}

func TestFailedBackoff_ExpiresAfterTwiceTheLongestDelay(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := newFailedBackoff(clock, newStates())
	b.next("ns/a", 1, "node-0", 0)
	b.next("ns/a", 1, "node-0", 0) // 2s
	clock.Step(2*time.Second + 2*daemon.FailedPodBackoffMax)
	b.next("ns/a", 1, "node-0", 0) // exactly 2*daemon.FailedPodBackoffMax after the end: still remembered
	if d := b.view("ns/a", 1)["node-0"].Sub(clock.Now()); d != 4*time.Second {
		t.Errorf("held %v, want 4s", d)
	}
	clock.Step(4*time.Second + 2*daemon.FailedPodBackoffMax + time.Nanosecond)
	b.next("ns/a", 1, "node-0", 0) // past it: forgotten, starts over
	if d := b.view("ns/a", 1)["node-0"].Sub(clock.Now()); d != time.Second {
		t.Errorf("held %v, want 1s after the entry expired", d)
	}

	clock.Step(time.Second + 2*daemon.FailedPodBackoffMax)
	b.gc()
	if n := b.tracked(); n != 1 {
		t.Errorf("gc dropped an entry not yet expired: %d DaemonSets with entries", n)
	}
	clock.Step(time.Nanosecond)
	b.gc()
	if n := b.tracked(); n != 0 {
		t.Errorf("gc kept expired entries: %d DaemonSets with entries", n)
	}
	b.next("ns/a", 1, "node-0", 0)
	b.st.forget("ns/a")
	if held := b.view("ns/a", 1); held != nil {
		t.Errorf("after forget: %v", held)
	}
}

// A failed pod's record of the failures before it takes the count up where it was,
// as after a restart of the controller; the counts are what new pods record.
func TestFailedBackoff_TakesUpTheCountAFailedPodRecorded(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := newFailedBackoff(clock, newStates())
	b.next("ns/a", 1, "node-0", 3) // the fourth failure: 8s
	if d := b.view("ns/a", 1)["node-0"].Sub(clock.Now()); d != 8*time.Second {
		t.Errorf("held %v, want 8s", d)
	}
	b.next("ns/a", 1, "node-0", 1) // an older record does not lower the count
	if got := b.failures("ns/a", 1); got["node-0"] != 5 {
		t.Errorf("failures = %v, want node-0: 5", got)
	}
	if got := b.failures("ns/a", 2); got != nil {
		t.Errorf("failures of another generation = %v", got)
	}
}
