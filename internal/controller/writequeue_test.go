package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/everynode/everynode/internal/daemon"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testCreate is a queued create for node of DaemonSet key, at rank r.
func testCreate(key, node string, r WriteRank) *podWrite {
	return &podWrite{key: key, node: node, rank: r, create: &daemon.PodCreate{Node: node, Reason: daemon.ReasonMissingPod}}
}

func testDelete(key, node string, r WriteRank) *podWrite {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: key + "-" + node, UID: types.UID(key + "/" + node)}}
	return &podWrite{key: key, node: node, rank: r, del: &daemon.PodDelete{Pod: pod}}
}

func (w *podWrite) String() string {
	kind := "create"
	if w.del != nil {
		kind = "delete"
	}
	return fmt.Sprintf("%s %s %s", kind, w.key, w.node)
}

func noExpect(prev, w *podWrite) {}

// drain pops every write that may go, answering each at once, and returns them in
// the order handed out.
func drain(q *writeQueue) []string {
	var out []string
	for {
		q.mu.Lock()
		w := q.popLocked()
		q.mu.Unlock()
		if w == nil {
			return out
		}
		out = append(out, w.String())
		q.answered(w, nil, false)
	}
}

func TestWriteQueue_Order(t *testing.T) {
	plain := WriteRank{Since: t0}
	critical := WriteRank{Priority: SystemNodeCriticalPriority, Since: t0}
	unblocks := WriteRank{Unblocks: true, Since: t0}
	later := WriteRank{Since: t0.Add(time.Minute)}
	for _, tc := range []struct {
		name string
		adds [][]*podWrite // each a sync's creates (or deletes) of one DaemonSet
		want []string
	}{
		{
			name: "a higher priority queued last goes first",
			adds: [][]*podWrite{
				{testCreate("ns/plain", "a", plain), testCreate("ns/plain", "b", plain)},
				{testCreate("ns/cni", "a", critical), testCreate("ns/cni", "b", critical)},
			},
			want: []string{"create ns/cni a", "create ns/cni b", "create ns/plain a", "create ns/plain b"},
		},
		{
			name: "same priority: pods that unblock nodes first",
			adds: [][]*podWrite{
				{testCreate("ns/plain", "a", plain)},
				{testCreate("ns/net", "a", unblocks)},
			},
			want: []string{"create ns/net a", "create ns/plain a"},
		},
		{
			name: "one level: DaemonSets in turn",
			adds: [][]*podWrite{
				{testCreate("ns/x", "a", plain), testCreate("ns/x", "b", plain), testCreate("ns/x", "c", plain)},
				{testCreate("ns/y", "a", plain), testCreate("ns/y", "b", plain)},
			},
			want: []string{"create ns/x a", "create ns/y a", "create ns/x b", "create ns/y b", "create ns/x c"},
		},
		{
			name: "within a DaemonSet: the node waiting longest, then by name",
			adds: [][]*podWrite{
				{testCreate("ns/x", "new", later), testCreate("ns/x", "old-b", plain), testCreate("ns/x", "old-a", plain)},
			},
			want: []string{"create ns/x old-a", "create ns/x old-b", "create ns/x new"},
		},
		{
			name: "within a DaemonSet and rank: the create queued first, even once decided again",
			adds: [][]*podWrite{
				{testCreate("ns/x", "b", plain)},
				{testCreate("ns/x", "a", plain), testCreate("ns/x", "b", plain), testCreate("ns/x", "c", plain)},
			},
			want: []string{"create ns/x b", "create ns/x a", "create ns/x c"},
		},
		{
			name: "within a DaemonSet and rank: the delete queued first",
			adds: [][]*podWrite{
				{testDelete("ns/x", "b", plain)},
				{testDelete("ns/x", "a", plain)},
			},
			want: []string{"delete ns/x b", "delete ns/x a"},
		},
		{
			name: "within a DaemonSet and level: the write queued first, create or delete",
			adds: [][]*podWrite{
				{testCreate("ns/x", "a", plain)},
				{testDelete("ns/x", "b", plain)},
				{testCreate("ns/x", "a", plain), testCreate("ns/x", "c", plain)},
			},
			want: []string{"create ns/x a", "delete ns/x b", "create ns/x c"},
		},
		{
			name: "within a DaemonSet and level: a delete before a create queued with it",
			adds: [][]*podWrite{
				{testDelete("ns/x", "b", plain)},
				{testCreate("ns/x", "a", plain)},
			},
			want: []string{"delete ns/x b", "create ns/x a"},
		},
		{
			name: "within a DaemonSet and level: the node waiting longest, create or delete",
			adds: [][]*podWrite{
				{testDelete("ns/x", "b", later)},
				{testCreate("ns/x", "a", plain)},
			},
			want: []string{"create ns/x a", "delete ns/x b"},
		},
		{
			name: "a critical delete before plain creates",
			adds: [][]*podWrite{
				{testCreate("ns/plain", "a", plain)},
				{testDelete("ns/cni", "a", critical)},
			},
			want: []string{"delete ns/cni a", "create ns/plain a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newWriteQueue()
			for _, writes := range tc.adds {
				if writes[0].create != nil {
					q.replaceCreates(writes[0].key, writes, noExpect)
				} else {
					q.add(writes[0].key, writes, noExpect)
				}
			}
			if got := drain(q); !slices.Equal(got, tc.want) {
				t.Errorf("order:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if n := q.len(); n != 0 {
				t.Errorf("%d writes left", n)
			}
		})
	}
}

// Creates go out in slow-start batches per DaemonSet: 1, then 2, then 4, each once
// the one before is answered; another DaemonSet's are not held by them.
func TestWriteQueue_SlowStartPerDaemonSet(t *testing.T) {
	q := newWriteQueue()
	var writes []*podWrite
	for i := range 7 {
		writes = append(writes, testCreate("ns/x", fmt.Sprintf("n%d", i), WriteRank{Priority: 1}))
	}
	q.replaceCreates("ns/x", writes, noExpect)
	q.replaceCreates("ns/y", []*podWrite{testCreate("ns/y", "a", WriteRank{}), testCreate("ns/y", "b", WriteRank{})}, noExpect)
	pop := func() []*podWrite {
		q.mu.Lock()
		defer q.mu.Unlock()
		var out []*podWrite
		for w := q.popLocked(); w != nil && w.key == "ns/x"; w = q.popLocked() {
			out = append(out, w)
		}
		return out
	}
	q.mu.Lock()
	ready := q.readyLocked()
	q.mu.Unlock()
	if ready != 2 {
		t.Errorf("ready = %d, want 2: one create of each DaemonSet", ready)
	}
	for _, want := range []int{1, 2, 4} {
		batch := pop() // ns/y's first create is handed out along the way
		if len(batch) != want {
			t.Fatalf("batch of %d creates, want %d", len(batch), want)
		}
		if more := pop(); len(more) != 0 {
			t.Fatalf("%d more creates before the batch was answered", len(more))
		}
		for _, w := range batch {
			q.answered(w, nil, false)
		}
	}
	if n := q.len(); n != 1 {
		t.Errorf("%d writes left, want ns/y's second", n)
	}
}

// A failed create ends its DaemonSet's batch: its other queued creates are dropped
// (for the sync its failure asks for), the error is kept for that sync, the next
// create starts a batch of 1 again; another DaemonSet's writes, and the DaemonSet's
// own deletes, go on.
func TestWriteQueue_FailedCreateStopsItsDaemonSetOnly(t *testing.T) {
	q := newWriteQueue()
	q.replaceCreates("ns/bad", []*podWrite{testCreate("ns/bad", "a", WriteRank{Priority: 9}), testCreate("ns/bad", "b", WriteRank{Priority: 9}), testCreate("ns/bad", "c", WriteRank{Priority: 9})}, noExpect)
	q.add("ns/bad", []*podWrite{testDelete("ns/bad", "z", WriteRank{})}, noExpect)
	q.replaceCreates("ns/good", []*podWrite{testCreate("ns/good", "a", WriteRank{}), testCreate("ns/good", "b", WriteRank{})}, noExpect)

	q.mu.Lock()
	first := q.popLocked()
	q.mu.Unlock()
	if first.String() != "create ns/bad a" {
		t.Fatalf("first = %s, want ns/bad's create on a", first)
	}
	dropped := q.answered(first, errors.New("quota exceeded"), false)
	if len(dropped) != 2 {
		t.Errorf("dropped %v, want ns/bad's other two creates", dropped)
	}
	if got, want := drain(q), []string{"delete ns/bad z", "create ns/good a", "create ns/good b"}; !slices.Equal(got, want) {
		t.Errorf("after the failure: %v, want %v", got, want)
	}
	if errs := q.takeErrors("ns/bad"); len(errs) != 1 {
		t.Errorf("errors of ns/bad = %v, want the one failure", errs)
	}
	if errs := q.takeErrors("ns/bad"); len(errs) != 0 {
		t.Errorf("errors taken twice: %v", errs)
	}
	if _, kept := q.byDS["ns/bad"]; kept {
		t.Error("an idle DaemonSet without errors is still held")
	}
}

// A DaemonSet's writes count as still failing from a failed answer until a write of
// it succeeds, or until it has nothing queued or unanswered and its errors are taken:
// a sync that only queues writes meanwhile must not end its back-off.
func TestWriteQueue_RetryingUntilAWriteSucceeds(t *testing.T) {
	q := newWriteQueue()
	pop := func() *podWrite {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.popLocked()
	}
	const key = "ns/bad"
	if q.retrying(key) {
		t.Fatal("retrying before any write")
	}
	q.replaceCreates(key, []*podWrite{testCreate(key, "a", WriteRank{}), testCreate(key, "b", WriteRank{})}, noExpect)
	if q.retrying(key) {
		t.Error("retrying with writes queued and none answered")
	}
	q.answered(pop(), errors.New("quota exceeded"), false)
	if !q.retrying(key) {
		t.Error("not retrying with a failure to report")
	}
	// The sync that reports the failure queues its creates again.
	q.replaceCreates(key, []*podWrite{testCreate(key, "a", WriteRank{}), testCreate(key, "b", WriteRank{})}, noExpect)
	if errs := q.takeErrors(key); len(errs) != 1 {
		t.Fatalf("errors = %v, want the one failure", errs)
	}
	if !q.retrying(key) {
		t.Error("not retrying while the creates after a failure are unanswered")
	}
	w := pop()
	if !q.retrying(key) {
		t.Error("not retrying while the create after a failure is out")
	}
	q.answered(w, nil, false)
	if q.retrying(key) {
		t.Error("retrying after a create succeeded")
	}

	// A failure whose DaemonSet then has nothing more to write ends with its report.
	q = newWriteQueue()
	q.replaceCreates(key, []*podWrite{testCreate(key, "a", WriteRank{})}, noExpect)
	q.answered(pop(), errors.New("node gone"), false)
	if !q.retrying(key) {
		t.Error("not retrying with a failure to report")
	}
	q.takeErrors(key)
	if q.retrying(key) {
		t.Error("retrying with nothing queued and the failure reported")
	}
}

// A sync notes the queued creates it decides again; its Plan replaces them: a create
// asked for again stays (in the Plan's version), one no longer asked for is dropped,
// one sent meanwhile is not queued again, only new ones are expected, and one queued
// again takes the place of its earlier version.
func TestWriteQueue_PlanReplacesQueuedCreates(t *testing.T) {
	q := newWriteQueue()
	r := WriteRank{}
	q.replaceCreates("ns/x", []*podWrite{testCreate("ns/x", "a", r), testCreate("ns/x", "b", r), testCreate("ns/x", "gone", r)}, noExpect)
	surge := testCreate("ns/x", "s", r)
	surge.create.Reason = daemon.ReasonSurge
	q.add("ns/x", []*podWrite{surge}, noExpect)

	q.begin("ns/x")
	again := q.decideAgain("ns/x", nil)
	if slices.Sort(again); !slices.Equal(again, []string{"a", "b", "gone"}) {
		t.Fatalf("decided again: %v, want the three creates for nodes without a pod, not the surge", again)
	}
	// While the sync decides, a dispatcher sends the create on a.
	q.mu.Lock()
	sent := q.popLocked()
	q.mu.Unlock()
	if sent.node != "a" {
		t.Fatalf("sent %s, want the create on a", sent)
	}
	// The Plan asks for a (not seen in flight), b with a new template, and c.
	template := &v1.PodTemplateSpec{}
	b := testCreate("ns/x", "b", r)
	b.template = template
	var expected, replaced []string
	dropped := q.replaceCreates("ns/x", []*podWrite{testCreate("ns/x", "a", r), b, testCreate("ns/x", "c", r)},
		func(prev, w *podWrite) {
			switch {
			case prev == nil:
				expected = append(expected, w.node)
			case prev.node == w.node && prev != w:
				replaced = append(replaced, w.node)
			default:
				t.Errorf("create on %s takes the place of %s", w.node, prev)
			}
		})
	if len(dropped) != 1 || dropped[0].node != "gone" {
		t.Errorf("dropped %v, want the create on gone", dropped)
	}
	if !slices.Equal(expected, []string{"c"}) {
		t.Errorf("expected %v, want only the new create on c", expected)
	}
	if !slices.Equal(replaced, []string{"b"}) {
		t.Errorf("replaced %v, want the create on b, queued before, in its new version", replaced)
	}
	q.answered(sent, nil, false)
	var got []*podWrite
	for {
		q.mu.Lock()
		w := q.popLocked()
		q.mu.Unlock()
		if w == nil {
			break
		}
		got = append(got, w)
		q.answered(w, nil, false)
	}
	var nodes []string
	for _, w := range got {
		nodes = append(nodes, w.node)
		if w.node == "b" && w.template != template {
			t.Error("the create on b went out in its old version")
		}
	}
	if !slices.Equal(nodes, []string{"b", "s", "c"}) {
		t.Errorf("then sent %v, want b (in its first place), the surge create s, then c, queued last (a went out once)", nodes)
	}
}

// gate is a rate limiter whose tokens the test hands out, or that lets everything
// pass while open.
type gate struct {
	tokens chan struct{}
	open   atomic.Bool
	waits  atomic.Int32
}

func newGate() *gate { return &gate{tokens: make(chan struct{}, 1<<16)} }

func (g *gate) release(n int) {
	for range n {
		g.tokens <- struct{}{}
	}
}

func (g *gate) Wait(ctx context.Context) error {
	g.waits.Add(1)
	for !g.open.Load() {
		select {
		case <-g.tokens:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
func (g *gate) TryAccept() bool { return false }
func (g *gate) Accept()         { _ = g.Wait(context.Background()) }
func (g *gate) Stop()           {}
func (g *gate) QPS() float32    { return 0 }

var _ flowcontrol.RateLimiter = &gate{}

// Dispatchers take a token only for a write that no other dispatcher holding one
// will take, and choose the write once they hold it: a write queued while they wait
// for their token, if higher, goes first.
func TestWriteQueue_NextTakesTokensOnlyForWrites(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := newWriteQueue()
	g := newGate()
	got := make(chan *podWrite, 4)
	for range 4 {
		go func() {
			if w, ok := q.next(ctx, g); ok {
				got <- w
			}
		}()
	}
	q.replaceCreates("ns/plain", []*podWrite{testCreate("ns/plain", "a", WriteRank{})}, noExpect)
	waitUntil(t, func() bool { return g.waits.Load() == 1 })
	q.replaceCreates("ns/cni", []*podWrite{testCreate("ns/cni", "a", WriteRank{Priority: 5})}, noExpect)
	waitUntil(t, func() bool { return g.waits.Load() == 2 })
	time.Sleep(20 * time.Millisecond)
	if n := g.waits.Load(); n != 2 {
		t.Errorf("%d dispatchers wait for a token for 2 writes", n)
	}
	g.release(1)
	if w := <-got; w.key != "ns/cni" {
		t.Errorf("the first token went to %s, want the critical create queued after it was asked for", w)
	}
	g.release(1)
	if w := <-got; w.key != "ns/plain" {
		t.Errorf("the second token went to %s", w)
	}
	q.close()
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// Many dispatchers, woken only as many as there are writes to claim: every write
// queued, while every dispatcher waits or while some are busy, by several
// DaemonSets, with creates held back by slow start and let go by answers, goes out
// exactly once, and no dispatcher is left waiting while a write is ready.
func TestWriteQueue_EveryWriteGoesOutWithManyDispatchers(t *testing.T) {
	q := newWriteQueue()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	sent := map[string]int{}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				w, ok := q.next(ctx, nil)
				if !ok {
					return
				}
				mu.Lock()
				sent[w.String()]++
				mu.Unlock()
				q.answered(w, nil, false)
			}
		})
	}
	// idle waits until every dispatcher waits for a write, so that the next
	// writes are sent only if they wake some.
	idle := func() {
		waitUntil(t, func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.waiting == 64
		})
	}
	want := 0
	for round := range 200 {
		if round%2 == 0 {
			idle()
		}
		key := fmt.Sprintf("ns/ds%d", round%7)
		var writes []*podWrite
		for i := range 1 + round%5 {
			writes = append(writes, testCreate(key, fmt.Sprintf("r%d-%d", round, i), WriteRank{Priority: int32(round % 3)}))
		}
		q.add(key, writes, noExpect)
		q.add(key, []*podWrite{testDelete(key, fmt.Sprintf("r%d", round), WriteRank{})}, noExpect)
		want += len(writes) + 1
	}
	waitUntil(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sent) == want
	})
	q.close()
	wg.Wait()
	for w, n := range sent {
		if n != 1 {
			t.Errorf("%s went out %d times", w, n)
		}
	}
}

// A request outside the queue (the node gate's) takes the next token a dispatcher
// gets, ahead of the writes queued before it; with no write queued, an idle
// dispatcher takes a token for it alone; a closed queue sends it to the limiter.
func TestWriteQueue_TakeTokenGoesFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := newWriteQueue()
	g := newGate()
	got := make(chan string, 16)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				w, ok := q.next(ctx, g)
				if !ok {
					return
				}
				got <- w.String()
				q.answered(w, nil, false)
			}
		})
	}
	var writes []*podWrite
	for _, n := range []string{"a", "b", "c", "d"} {
		writes = append(writes, testDelete("ns/plain", n, WriteRank{}))
	}
	q.add("ns/plain", writes, noExpect)
	waitUntil(t, func() bool { return g.waits.Load() == 3 }) // every dispatcher waits for a token
	taken := make(chan bool, 1)
	go func() { taken <- q.takeToken() }()
	waitUntil(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.urgent == 1 })
	g.release(1)
	if ok := <-taken; !ok {
		t.Fatal("the urgent request did not get the first token")
	}
	if len(got) != 0 {
		t.Errorf("a queued write went out with the token the urgent request asked for: %s", <-got)
	}
	g.release(4)
	for range 4 {
		<-got
	}

	// Nothing queued: an idle dispatcher takes a token for the request alone.
	waitUntil(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.waiting == 3 })
	go func() { taken <- q.takeToken() }()
	waitUntil(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.urgent == 1 && q.claimants == 1 })
	g.release(1)
	if ok := <-taken; !ok {
		t.Fatal("with the queue idle, the urgent request got no token")
	}
	q.close()
	if q.takeToken() {
		t.Error("a closed queue handed out a token")
	}
	wg.Wait()
}

// A sync that decides again only the nodes whose objects changed replaces only their
// queued creates: the others stay queued as they were, in their places, and a create
// that left the queue while the sync decided is not queued again.
func TestWriteQueue_SyncDecidesSomeNodesAgain(t *testing.T) {
	q := newWriteQueue()
	r := WriteRank{}
	q.replaceCreates("ns/x", []*podWrite{testCreate("ns/x", "a", r), testCreate("ns/x", "b", r), testCreate("ns/x", "c", r), testCreate("ns/x", "d", r)}, noExpect)

	q.begin("ns/x")
	q.mu.Lock()
	sent := q.popLocked() // a goes out while the sync reads its caches
	q.mu.Unlock()
	again := q.decideAgain("ns/x", map[string]bool{"a": true, "b": true, "e": true})
	if slices.Sort(again); !slices.Equal(again, []string{"a", "b"}) {
		t.Fatalf("decided again: %v, want a (sent since the sync began) and b, queued, of the changed nodes", again)
	}
	// b's node no longer runs the pod; e joined; a, decided again, is asked for again.
	var expected []string
	dropped := q.replaceCreates("ns/x", []*podWrite{testCreate("ns/x", "a", r), testCreate("ns/x", "e", r)},
		func(prev, w *podWrite) { expected = append(expected, w.node) })
	if len(dropped) != 1 || dropped[0].node != "b" {
		t.Errorf("dropped %v, want b's create alone", dropped)
	}
	if !slices.Equal(expected, []string{"e"}) {
		t.Errorf("expected %v, want e's create alone (a went out already)", expected)
	}
	q.answered(sent, nil, false)
	if got, want := drain(q), []string{"create ns/x c", "create ns/x d", "create ns/x e"}; !slices.Equal(got, want) {
		t.Errorf("then sent %v, want %v: c and d as they were queued, then e", got, want)
	}
}

// A sync that decides a few nodes of a long queue again drops the creates of those
// nodes alone that its Plan does not ask for again.
func TestWriteQueue_SyncDecidesFewNodesOfALongQueueAgain(t *testing.T) {
	q := newWriteQueue()
	r := WriteRank{}
	var queued []*podWrite
	for _, node := range []string{"a", "b", "c", "d", "e", "f"} {
		queued = append(queued, testCreate("ns/x", node, r))
	}
	q.replaceCreates("ns/x", queued, noExpect)

	q.begin("ns/x")
	again := q.decideAgain("ns/x", map[string]bool{"b": true, "d": true, "g": true})
	if slices.Sort(again); !slices.Equal(again, []string{"b", "d"}) {
		t.Fatalf("decided again: %v, want b and d, queued, of the changed nodes", again)
	}
	// b's node no longer runs the pod; d is asked for again; g joined.
	dropped := q.replaceCreates("ns/x", []*podWrite{testCreate("ns/x", "d", r), testCreate("ns/x", "g", r)}, noExpect)
	if len(dropped) != 1 || dropped[0].node != "b" {
		t.Errorf("dropped %v, want b's create alone", dropped)
	}
	if got, want := drain(q), []string{"create ns/x a", "create ns/x c", "create ns/x d", "create ns/x e", "create ns/x f", "create ns/x g"}; !slices.Equal(got, want) {
		t.Errorf("then sent %v, want %v: the others as they were queued, d in its place, then g", got, want)
	}
}

// mergeWrites must give what a stable sort of the queued writes followed by the new
// ones gives: the lane's order, the queued write first among equals. The cases mix
// new writes that all go last (appended) with new writes that go between queued ones
// (a replaced create keeps its place, a node that waited longer goes first), and
// queued slices with room to append into.
func TestMergeWritesIsAStableMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	write := func(maxQueued uint64) *podWrite {
		w := testCreate("ns/ds", fmt.Sprintf("n%d", rng.IntN(4)), WriteRank{Since: t0.Add(time.Duration(rng.IntN(3)) * time.Second)})
		w.queuedAt = rng.Uint64N(maxQueued)
		return w
	}
	for c := range 2000 {
		queued := make([]*podWrite, rng.IntN(12), 12+rng.IntN(12))
		for i := range queued {
			queued[i] = write(6)
		}
		added := make([]*podWrite, rng.IntN(6))
		last := c%2 == 0 // every new write numbered after the queued ones
		for i := range added {
			if last {
				added[i] = write(3)
				added[i].queuedAt += 6
				added[i].rank.Since = t0.Add(2 * time.Second)
			} else {
				added[i] = write(9)
			}
		}
		slices.SortStableFunc(queued, compareWrites)
		slices.SortStableFunc(added, compareWrites)
		want := slices.SortedStableFunc(slices.Values(slices.Concat(queued, added)), compareWrites)
		// The queued writes with room to append into; compared by identity, so ties
		// must keep the queued write first.
		got := mergeWrites(append(make([]*podWrite, 0, cap(queued)), queued...), added)
		if !slices.Equal(got, want) {
			t.Fatalf("case %d: merging %v into %v gave %v, want %v", c, added, queued, got, want)
		}
	}
}

// A write handed out leaves no reference in the lane's array, which later merges
// append to.
func TestPopFrontClearsTheSlot(t *testing.T) {
	a, b := testCreate("ns/ds", "a", WriteRank{}), testCreate("ns/ds", "b", WriteRank{})
	lane := []*podWrite{a, b}
	arr := lane
	w, rest := popFront(lane)
	if w != a || len(rest) != 1 || rest[0] != b || arr[0] != nil {
		t.Fatalf("popFront gave %v and %v, array now %v; want a, [b], and a's slot cleared", w, rest, arr)
	}
}
