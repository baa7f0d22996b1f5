package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

func TestInflight_CreateIsOutstandingUntilDone(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newInflight(clock, newStates())
	f.expectCreate("ns/a", "node-0")
	f.expectCreate("ns/a", "node-1")
	f.expectCreate("ns/b", "node-0")
	if v := f.view("ns/a"); !v.Creates["node-0"] || !v.Creates["node-1"] || len(v.Creates) != 2 || v.Empty() {
		t.Fatalf("view = %+v, want creates on node-0 and node-1", v)
	}
	f.createDone("ns/a", "node-0")
	if v := f.view("ns/a"); v.Creates["node-0"] || !v.Creates["node-1"] {
		t.Errorf("after createDone(node-0): view = %+v, want only node-1", v)
	}
	f.createDone("ns/a", "node-1")
	if v := f.view("ns/a"); !v.Empty() {
		t.Errorf("after every create was done: view = %+v, want empty", v)
	}
	if v := f.view("ns/b"); !v.Creates["node-0"] {
		t.Errorf("another DaemonSet's create was lost: %+v", v)
	}
	f.createDone("ns/unknown", "node-0") // unknown DaemonSet: nothing to forget
}

func TestInflight_DeleteDoneIsIdempotent(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newInflight(clock, newStates())
	f.expectDelete("ns/a", types.UID("pod-1"))
	f.expectDelete("ns/a", types.UID("pod-2"))
	if v := f.view("ns/a"); !v.Deletes["pod-1"] || !v.Deletes["pod-2"] {
		t.Fatalf("view = %+v, want deletes of pod-1 and pod-2", v)
	}
	// A graceful delete is observed twice: as a deletionTimestamp, then as removal.
	f.deleteDone("ns/a", "pod-1")
	f.deleteDone("ns/a", "pod-1")
	if v := f.view("ns/a"); v.Deletes["pod-1"] || !v.Deletes["pod-2"] || len(v.Deletes) != 1 {
		t.Errorf("view = %+v, want only pod-2 outstanding", v)
	}
	f.deleteDone("ns/a", "pod-2")
	f.deleteDone("ns/unknown", "pod-2")
	if v := f.view("ns/a"); !v.Empty() {
		t.Errorf("view = %+v, want empty", v)
	}
}

func TestInflight_UnobservedWritesExpireAfterTTL(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newInflight(clock, newStates())
	f.expectCreate("ns/a", "node-0")
	f.expectDelete("ns/a", "pod-1")
	f.expectCreate("ns/a", "node-1")
	clock.Step(2 * inflightTTL) // queued writes wait as long as they are queued
	if v := f.view("ns/a"); len(v.Creates) != 2 || len(v.Deletes) != 1 {
		t.Fatalf("queued for twice the TTL: view = %+v, want every write outstanding", v)
	}
	if !f.sendingCreate("ns/a", "node-0") || !f.sendingDelete("ns/a", "pod-1") {
		t.Fatal("sending a queued write: not expected any more")
	}
	clock.Step(inflightTTL / 2)
	f.sendingCreate("ns/a", "node-1") // sent later: expires later
	clock.Step(inflightTTL / 2)
	if v := f.view("ns/a"); !v.Creates["node-0"] || !v.Deletes["pod-1"] {
		t.Fatalf("at exactly the TTL: view = %+v, want the writes still outstanding", v)
	}
	clock.Step(time.Nanosecond)
	v := f.view("ns/a")
	if v.Creates["node-0"] || v.Deletes["pod-1"] {
		t.Errorf("past the TTL: view = %+v, want the first writes expired", v)
	}
	if !v.Creates["node-1"] {
		t.Errorf("past the first TTL: view = %+v, want the later create still outstanding", v)
	}
	clock.Step(inflightTTL)
	if v := f.view("ns/a"); !v.Empty() {
		t.Errorf("view = %+v, want every write expired", v)
	}
	if f.sendingCreate("ns/a", "node-0") || f.sendingDelete("ns/a", "pod-1") || f.sendingCreate("ns/b", "node-0") {
		t.Error("sending a write no longer expected (expired, or never queued): want false")
	}
}

func TestInflight_ViewIsACopyAndForgetDropsAll(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newInflight(clock, newStates())
	f.expectCreate("ns/a", "node-0")
	f.expectDelete("ns/a", "pod-1")
	v := f.view("ns/a")
	delete(v.Creates, "node-0")
	v.Deletes["pod-9"] = true
	if v := f.view("ns/a"); !v.Creates["node-0"] || v.Deletes["pod-9"] {
		t.Errorf("changing a view changed the tracker: %+v", v)
	}
	f.st.forget("ns/a")
	if v := f.view("ns/a"); !v.Empty() {
		t.Errorf("after forget: view = %+v, want empty", v)
	}
}

func TestInflight_UnknownOutcomeIsWaitedForBriefly(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newInflight(clock, newStates())
	f.expectCreate("ns/a", "node-0")
	f.expectCreate("ns/a", "node-1")
	f.expectDelete("ns/a", "pod-1")
	f.createUnknown("ns/a", "node-0")
	f.deleteUnknown("ns/a", "pod-1")
	// A create observed before its error came back stays done.
	f.createDone("ns/a", "node-1")
	f.createUnknown("ns/a", "node-1")
	if v := f.view("ns/a"); !v.Creates["node-0"] || v.Creates["node-1"] || !v.Deletes["pod-1"] {
		t.Fatalf("view = %+v, want the create on node-0 and the delete of pod-1 outstanding", v)
	}
	clock.Step(unknownOutcomeTTL)
	if v := f.view("ns/a"); !v.Creates["node-0"] || !v.Deletes["pod-1"] {
		t.Fatalf("at exactly the unknown-outcome TTL: view = %+v, want both still outstanding", v)
	}
	clock.Step(time.Nanosecond)
	if v := f.view("ns/a"); !v.Empty() {
		t.Errorf("past the unknown-outcome TTL, well before inflightTTL: view = %+v, want empty", v)
	}
}
