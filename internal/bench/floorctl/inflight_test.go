package floorctl

import (
	"testing"
	"time"
)

func TestFlights(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	never := func() bool { return false }
	f := newFlights()
	f.created("n1", "p1", "ds1", t0, never)
	f.deleted("n1", "p0", t0, never)
	f.created("n1", "p2", "ds2", t0, func() bool { return true }) // the cache had it already
	got := f.of("n1", t0)
	if len(got.created) != 1 || got.created["p1"] != "ds1" || !got.deleted["p0"] {
		t.Fatalf("in flight after the writes: %+v", got)
	}
	f.seen("n1", "p1", false)
	if got := f.of("n1", t0); len(got.created) != 0 || !got.deleted["p0"] {
		t.Errorf("the create is still in flight once seen: %+v", got)
	}
	f.seen("n1", "p0", false)
	if got := f.of("n1", t0); !got.deleted["p0"] {
		t.Error("the delete is forgotten while the pod is seen not going")
	}
	f.seen("n1", "p0", true)
	if got := f.of("n1", t0); len(got.deleted) != 0 {
		t.Errorf("the delete is still in flight once the pod is seen going: %+v", got)
	}
	f.created("n1", "p3", "ds1", t0, never)
	if got := f.of("n1", t0.Add(flightExpiry+time.Second)); len(got.created) != 0 {
		t.Errorf("a create the cache never showed is not forgotten after %v: %+v", flightExpiry, got)
	}
}
