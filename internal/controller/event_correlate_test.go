package controller

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestEventCorrelator_SameAsClientGo records random histories of DaemonSet events
// through eventCorrelator and through client-go's record.EventCorrelator at its
// defaults, side by side on one fake clock, storing each sent event as an API
// server would: every event is dropped or sent alike, and every sent one is the
// same event with the same patch. The histories mix creates, deletes and failures
// of a few DaemonSets, repeat a failure's message, cross the aggregation's ten
// similar events, spend the spam filter's burst and wait long enough for its refill
// and for the aggregation to lapse. Each pod is named once: once ten messages are
// merged, client-go forgets an arbitrary one of them (a set's PopAny), so whether a
// message repeated after that is merged differs from one of its runs to the next.
func TestEventCorrelator_SameAsClientGo(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		theirs := record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: clk})
		ours := newEventCorrelator(clk)
		server := &fakeEventStore{}
		sent, dropped, patched, merged := 0, 0, 0, 0
		for i := range 600 {
			clk.Step(historyStep(rng))
			e := randomDaemonSetEvent(rng, i, clk.Now())
			want, err := theirs.EventCorrelate(e.DeepCopy())
			if err != nil {
				t.Fatalf("seed %d event %d: client-go: %v", seed, i, err)
			}
			got, patch, send, err := ours.correlate(e.DeepCopy())
			if err != nil {
				t.Fatalf("seed %d event %d: %v", seed, i, err)
			}
			if send == want.Skip {
				t.Fatalf("seed %d event %d (%s %q): sent %v, client-go sent %v", seed, i, e.Reason, e.Message, send, !want.Skip)
			}
			if !send {
				dropped++
				continue
			}
			sent++
			if d := cmp.Diff(want.Event, got); d != "" {
				t.Fatalf("seed %d event %d: event differs from client-go's (-client-go +ours):\n%s", seed, i, d)
			}
			if string(want.Patch) != string(patch) {
				t.Fatalf("seed %d event %d: patch %s, client-go's %s", seed, i, patch, want.Patch)
			}
			if patch != nil {
				patched++
			}
			if strings.HasPrefix(got.Message, "(combined from similar events)") {
				merged++
			}
			stored := server.store(got)
			theirs.UpdateState(stored.DeepCopy())
			ours.stored(stored.DeepCopy())
		}
		if sent == 0 || dropped == 0 || patched == 0 || merged == 0 {
			t.Fatalf("seed %d: %d sent (%d patches, %d merged), %d dropped: the history missed a case", seed, sent, patched, merged, dropped)
		}
	}
}

// TestEventCorrelator_CountsDroppedEvents: once the spam filter drops a DaemonSet's
// events, the aggregated event it sends next counts every one of them, as
// client-go's does, and is sent as a patch.
func TestEventCorrelator_CountsDroppedEvents(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	c := newEventCorrelator(clk)
	server := &fakeEventStore{}
	ds := v1.ObjectReference{Kind: "DaemonSet", Namespace: "default", Name: "agent", UID: "u1", APIVersion: "apps/v1"}
	var last *v1.Event
	var lastPatch []byte
	sent := 0
	for i := range 100 {
		clk.Step(time.Second)
		e := daemonSetEvent(ds, v1.EventTypeNormal, "SuccessfulCreate", fmt.Sprintf("Created pod: agent-%d", i), clk.Now())
		ev, patch, send, err := c.correlate(e)
		if err != nil {
			t.Fatal(err)
		}
		if send {
			sent++
			last, lastPatch = server.store(ev), patch
			c.stored(last.DeepCopy())
		}
	}
	if sent != eventSpamBurst {
		t.Fatalf("%d of 100 events sent at once, want the spam burst of %d", sent, eventSpamBurst)
	}
	// Five minutes on, the filter lets one more through: the aggregated event, counting
	// the 100 - 9 events merged into it so far, and this one.
	clk.Step(5 * time.Minute)
	ev, patch, send, err := c.correlate(daemonSetEvent(ds, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: agent-100", clk.Now()))
	if err != nil || !send {
		t.Fatalf("after five minutes: send %v, err %v; want the event sent", send, err)
	}
	if ev.Name != last.Name || ev.Count != 92 || patch == nil {
		t.Fatalf("sent %s count %d patch %s; want a patch of %s to count 92 (last sent with patch %s)", ev.Name, ev.Count, patch, last.Name, lastPatch)
	}
}

// historyStep is how far the clock moves before the next event: mostly not at all
// or a little, now and then past the spam filter's refill, rarely past the
// aggregation's ten minutes.
func historyStep(rng *rand.Rand) time.Duration {
	switch r := rng.IntN(100); {
	case r < 60:
		return 0
	case r < 95:
		return time.Duration(rng.IntN(3000)) * time.Millisecond
	case r < 99:
		return time.Duration(200+rng.IntN(200)) * time.Second
	default:
		return 11 * time.Minute
	}
}

// randomDaemonSetEvent is the i-th event of a history: a create or delete of pod i
// of one of three DaemonSets, or a failure whose message is always the same.
func randomDaemonSetEvent(rng *rand.Rand, i int, now time.Time) *v1.Event {
	n := rng.IntN(3)
	ds := v1.ObjectReference{Kind: "DaemonSet", Namespace: "default", Name: "ds-" + strconv.Itoa(n),
		UID: types.UID("uid-" + strconv.Itoa(n)), APIVersion: "apps/v1"}
	pod := fmt.Sprintf("ds-%d-%05d", n, i)
	switch r := rng.IntN(10); {
	case r < 6:
		return daemonSetEvent(ds, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+pod, now)
	case r < 9:
		return daemonSetEvent(ds, v1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: "+pod, now)
	default:
		return daemonSetEvent(ds, v1.EventTypeWarning, "FailedCreate", "Error creating: quota exceeded", now)
	}
}

// daemonSetEvent is the event a recorder hands its watchers.
func daemonSetEvent(ds v1.ObjectReference, kind, reason, message string, now time.Time) *v1.Event {
	t := metav1.NewTime(now)
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ds.Name, now.UnixNano()), Namespace: ds.Namespace},
		InvolvedObject: ds,
		Reason:         reason,
		Message:        message,
		Source:         v1.EventSource{Component: EventSource},
		FirstTimestamp: t,
		LastTimestamp:  t,
		Count:          1,
		Type:           kind,
	}
}

// fakeEventStore gives each stored event a resource version, as the API server does.
type fakeEventStore struct{ version int }

func (s *fakeEventStore) store(ev *v1.Event) *v1.Event {
	s.version++
	out := ev.DeepCopy()
	out.ResourceVersion = strconv.Itoa(s.version)
	return out
}
