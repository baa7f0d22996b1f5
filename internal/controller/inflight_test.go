package controller

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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

func TestInflight_HiddenCreatesComeBackAndForgetDropsAll(t *testing.T) {
	f, _ := newTestInflight()
	queueCreate(f, "ns/a", "node-0")
	queueCreate(f, "ns/a", "node-1")
	queueDelete(f, "ns/a", "pod-1")
	f.view("ns/a")
	v := f.view("ns/a")
	f.hideCreates("ns/a", &v, []string{"node-0"})
	if v.Creates["node-0"] || !v.Creates["node-1"] || v.Changes == nil || !slices.Contains(v.Changes.Creates, "node-0") {
		t.Fatalf("after hiding node-0: view = %+v, changes %+v; want node-1 alone, node-0 named", v, v.Changes)
	}
	if v := f.view("ns/a"); !v.Creates["node-0"] || !v.Deletes["pod-1"] || v.Changes == nil || !slices.Contains(v.Changes.Creates, "node-0") {
		t.Errorf("the next view: %+v, changes %+v; want node-0's create back, and named", v, v.Changes)
	}
	f.st.forget("ns/a")
	if v := f.view("ns/a"); !v.Empty() {
		t.Errorf("after forget: view = %+v, want empty", v)
	}
}

// Over random histories of one DaemonSet's writes, every view shows exactly the
// writes in flight the tables hold, none of them lapsed, and names every node and pod
// whose write started or ended since the view before (as that view was left, nodes
// hidden included): what a Memo relies on to look at nothing else.
func TestInflight_ViewsNameEveryChange(t *testing.T) {
	const key = "ns/a"
	views, named := 0, 0
	for seed := uint64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		f, clock := newTestInflight()
		var writes []*podWrite
		var last daemon.InFlight // as the last view was left, copied
		some := func() *podWrite { return writes[r.IntN(len(writes))] }
		for step := range 400 {
			switch k := r.IntN(12); {
			case k == 0:
				writes = append(writes, queueCreate(f, key, fmt.Sprintf("node-%d", r.IntN(12))))
			case k == 1:
				writes = append(writes, queueDelete(f, key, types.UID(fmt.Sprintf("pod-%d", r.IntN(12)))))
			case k == 2 && len(writes) > 0:
				if prev := some(); prev.create != nil { // decided again: a new record takes its place
					w := testCreate(key, prev.node, WriteRank{})
					f.expect(prev, w)
					writes = append(writes, w)
				}
			case k == 3 && len(writes) > 0:
				f.sending(some())
			case k == 4 && len(writes) > 0:
				f.unknown(some())
			case k == 5 && len(writes) > 0:
				f.settle(some())
			case k == 6:
				f.createDone(key, fmt.Sprintf("node-%d", r.IntN(12)))
			case k == 7:
				f.deleteDone(key, types.UID(fmt.Sprintf("pod-%d", r.IntN(12))))
			case k == 8:
				clock.Step(time.Duration(r.IntN(120)) * time.Second)
			case k >= 9:
				v := f.view(key)
				views++
				checkView(t, f, key, v, last, fmt.Sprintf("seed %d step %d", seed, step))
				if v.Changes != nil {
					named += len(v.Changes.Creates) + len(v.Changes.Deletes)
				}
				if r.IntN(3) == 0 && len(v.Creates) > 0 {
					nodes := slices.Collect(maps.Keys(v.Creates))
					f.hideCreates(key, &v, nodes[:1+r.IntN(len(nodes))])
				}
				last = daemon.InFlight{Creates: maps.Clone(v.Creates), Deletes: maps.Clone(v.Deletes), At: v.At}
			}
		}
	}
	if views < 1000 || named < views {
		t.Errorf("%d views naming %d changes: the histories no longer exercise the views", views, named)
	}
}

// checkView checks v, the view that follows last, against f's tables.
func checkView(t *testing.T, f *inflight, key string, v, last daemon.InFlight, at string) {
	t.Helper()
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	e := f.peek(key)
	if e == nil { // nothing written yet
		if !v.Empty() || v.At != 0 {
			t.Fatalf("%s: a view of no writes: %+v", at, v)
		}
		return
	}
	now := f.clock.Now()
	want := daemon.InFlight{Creates: map[string]bool{}, Deletes: map[types.UID]bool{}}
	for node, w := range e.creates {
		if lapsed(w, now) {
			t.Fatalf("%s: the create on %s lapsed and is still held", at, node)
		}
		want.Creates[node] = true
	}
	for uid, w := range e.deletes {
		if lapsed(w, now) {
			t.Fatalf("%s: the delete of %s lapsed and is still held", at, uid)
		}
		want.Deletes[uid] = true
	}
	if !maps.Equal(v.Creates, want.Creates) || !maps.Equal(v.Deletes, want.Deletes) {
		t.Fatalf("%s: view %v %v, tables %v %v", at, v.Creates, v.Deletes, want.Creates, want.Deletes)
	}
	if last.At == 0 {
		return
	}
	if v.Changes == nil || v.Changes.Since != last.At {
		t.Fatalf("%s: view %d names no changes since view %d: %+v", at, v.At, last.At, v.Changes)
	}
	for node := range symmetricDifference(last.Creates, v.Creates) {
		if !slices.Contains(v.Changes.Creates, node) {
			t.Fatalf("%s: the create on %s started or ended unnamed (named: %v)", at, node, v.Changes.Creates)
		}
	}
	for uid := range symmetricDifference(last.Deletes, v.Deletes) {
		if !slices.Contains(v.Changes.Deletes, uid) {
			t.Fatalf("%s: the delete of %s started or ended unnamed (named: %v)", at, uid, v.Changes.Deletes)
		}
	}
}

func symmetricDifference[K comparable](a, b map[K]bool) map[K]bool {
	out := map[K]bool{}
	for k := range a {
		if !b[k] {
			out[k] = true
		}
	}
	for k := range b {
		if !a[k] {
			out[k] = true
		}
	}
	return out
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
