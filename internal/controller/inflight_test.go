package controller

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/everynode/everynode/internal/daemon"
)

func newTestInflight() (*inflight, *testingclock.FakeClock) {
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return newInflight(clock, newStates()), clock
}

// queueCreate records a create for node queued, as the writeQueue does.
func queueCreate(f *inflight, key, node string) *podWrite {
	w := testCreate(key, node, WriteRank{})
	f.expect(nil, w)
	return w
}

// queueDelete records a delete of the pod with uid queued.
func queueDelete(f *inflight, key string, uid types.UID) *podWrite {
	w := &podWrite{key: key, del: &daemon.PodDelete{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), UID: uid}}}}
	f.expect(nil, w)
	return w
}

func TestInflight_CreateIsOutstandingUntilDone(t *testing.T) {
	f, _ := newTestInflight()
	queueCreate(f, "ns/a", "node-0")
	queueCreate(f, "ns/a", "node-1")
	queueCreate(f, "ns/b", "node-0")
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
	f, _ := newTestInflight()
	queueDelete(f, "ns/a", "pod-1")
	queueDelete(f, "ns/a", "pod-2")
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
	f, clock := newTestInflight()
	c0 := queueCreate(f, "ns/a", "node-0")
	d1 := queueDelete(f, "ns/a", "pod-1")
	c1 := queueCreate(f, "ns/a", "node-1")
	clock.Step(2 * inflightTTL) // queued writes wait as long as they are queued
	if v := f.view("ns/a"); len(v.Creates) != 2 || len(v.Deletes) != 1 {
		t.Fatalf("queued for twice the TTL: view = %+v, want every write outstanding", v)
	}
	if !f.sending(c0) || !f.sending(d1) {
		t.Fatal("sending a queued write: not expected any more")
	}
	clock.Step(inflightTTL / 2)
	f.sending(c1) // sent later: expires later
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
	if f.sending(c0) || f.sending(d1) || f.sending(testCreate("ns/b", "node-0", WriteRank{})) {
		t.Error("sending a write no longer expected (expired, or never queued): want false")
	}
}

func TestInflight_ViewIsACopyAndForgetDropsAll(t *testing.T) {
	f, _ := newTestInflight()
	queueCreate(f, "ns/a", "node-0")
	queueDelete(f, "ns/a", "pod-1")
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
	f, clock := newTestInflight()
	c0 := queueCreate(f, "ns/a", "node-0")
	c1 := queueCreate(f, "ns/a", "node-1")
	d1 := queueDelete(f, "ns/a", "pod-1")
	f.unknown(c0)
	f.unknown(d1)
	// A create observed before its error came back stays done.
	f.createDone("ns/a", "node-1")
	f.unknown(c1)
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

// A write has one record, and only that record settles it: a create queued again in
// a new version takes its earlier version's place, and the answer of an older
// record never settles a newer one for the same node or pod.
func TestInflight_OneRecordPerWrite(t *testing.T) {
	f, clock := newTestInflight()
	old := queueCreate(f, "ns/a", "node-0")
	again := testCreate("ns/a", "node-0", WriteRank{})
	f.expect(old, again)
	if f.sending(old) {
		t.Error("the create's earlier version, replaced in the queue, may still be sent")
	}
	f.settle(old)
	if v := f.view("ns/a"); !v.Creates["node-0"] {
		t.Fatalf("settling the earlier version forgot the create queued in its place: %+v", v)
	}
	if !f.sending(again) {
		t.Fatal("the create queued in the earlier version's place is not expected")
	}

	// A create seen while queued: its new version is not in flight either.
	seen := queueCreate(f, "ns/a", "node-1")
	f.createDone("ns/a", "node-1")
	next := testCreate("ns/a", "node-1", WriteRank{})
	f.expect(seen, next)
	if f.sending(next) {
		t.Error("a create whose pod the cache showed while it was queued is sent in its new version")
	}

	// A delete that lapsed and was queued again is not settled by the first one's
	// late answer.
	first := queueDelete(f, "ns/a", "pod-1")
	f.sending(first)
	clock.Step(inflightTTL + time.Nanosecond)
	f.view("ns/a")
	second := queueDelete(f, "ns/a", "pod-1")
	f.settle(first)
	if v := f.view("ns/a"); !v.Deletes["pod-1"] {
		t.Errorf("the first delete's answer settled the second: %+v", v)
	}
	f.settle(second)
	if v := f.view("ns/a"); v.Deletes["pod-1"] {
		t.Errorf("the second delete, settled, is still in flight: %+v", v)
	}
}
