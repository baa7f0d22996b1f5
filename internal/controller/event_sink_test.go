package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// scriptedSink is an event API whose answers a test sets: each call takes the next
// error of its method's script (none once the script runs out) and, when it
// succeeds, stores the event with a new resource version.
type scriptedSink struct {
	createErrs, patchErrs []error
	creates, patches      []*v1.Event
	patchBodies           []string
	version               fakeEventStore
}

func (s *scriptedSink) Create(e *v1.Event) (*v1.Event, error) {
	s.creates = append(s.creates, e.DeepCopy())
	if err := next(&s.createErrs); err != nil {
		return nil, err
	}
	return s.version.store(e), nil
}

func (s *scriptedSink) Update(e *v1.Event) (*v1.Event, error) {
	return nil, errors.New("the sink never updates")
}

func (s *scriptedSink) Patch(e *v1.Event, data []byte) (*v1.Event, error) {
	s.patches = append(s.patches, e.DeepCopy())
	s.patchBodies = append(s.patchBodies, string(data))
	if err := next(&s.patchErrs); err != nil {
		return nil, err
	}
	return s.version.store(e), nil
}

func next(script *[]error) error {
	if len(*script) == 0 {
		return nil
	}
	err := (*script)[0]
	*script = (*script)[1:]
	return err
}

var agentDS = v1.ObjectReference{Kind: "DaemonSet", Namespace: "default", Name: "agent", UID: "u1", APIVersion: "apps/v1"}

func newTestEventSink(sink *scriptedSink) *eventSink {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	return &eventSink{sink: sink, correlator: newEventCorrelator(clk), retryAfter: time.Millisecond}
}

// TestEventSink_RepeatPatchesTheStoredEvent: an event seen before is sent as a
// patch of the stored one, under the name and resource version the API server
// gave it; when that event is gone the sink creates it again, without a resource
// version.
func TestEventSink_RepeatPatchesTheStoredEvent(t *testing.T) {
	sink := &scriptedSink{}
	s := newTestEventSink(sink)
	ctx := context.Background()
	failed := func() *v1.Event {
		return daemonSetEvent(agentDS, v1.EventTypeWarning, "FailedCreate", "Error creating: quota exceeded", time.Now())
	}
	s.record(ctx, failed())
	if len(sink.creates) != 1 || len(sink.patches) != 0 {
		t.Fatalf("first event: %d creates, %d patches; want one create", len(sink.creates), len(sink.patches))
	}
	first := sink.creates[0]

	s.record(ctx, failed())
	if len(sink.patches) != 1 {
		t.Fatalf("repeat: %d patches; want one", len(sink.patches))
	}
	p := sink.patches[0]
	if p.Name != first.Name || p.ResourceVersion != "1" || p.Count != 2 {
		t.Fatalf("repeat patched %s at version %q, count %d; want %s at version 1, count 2", p.Name, p.ResourceVersion, p.Count, first.Name)
	}
	if sink.patchBodies[0] == "" || sink.patchBodies[0] == "{}" {
		t.Fatalf("repeat sent the empty patch %q", sink.patchBodies[0])
	}

	sink.patchErrs = []error{apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, first.Name)}
	s.record(ctx, failed())
	if len(sink.patches) != 2 || len(sink.creates) != 2 {
		t.Fatalf("repeat of a deleted event: %d patches, %d creates; want a patch, then a create", len(sink.patches), len(sink.creates))
	}
	if c := sink.creates[1]; c.ResourceVersion != "" || c.Count != 3 || c.Name != first.Name {
		t.Fatalf("recreated %s at version %q, count %d; want %s without a version, count 3", c.Name, c.ResourceVersion, c.Count, first.Name)
	}
}

// TestEventSink_Retries: an API server that cannot be reached is tried again, up
// to eventTries times; one that refuses the event, or a request that cannot be
// built, is not.
func TestEventSink_Retries(t *testing.T) {
	unreachable := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x", errors.New("no"))
	cases := []struct {
		name  string
		errs  []error
		calls int
	}{
		{"unreachable twice", []error{unreachable, unreachable}, 3},
		{"unreachable for good", repeatErr(unreachable, 2*eventTries), eventTries},
		{"refused", []error{forbidden, unreachable}, 1},
		{"not buildable", []error{&rest.RequestConstructionError{Err: errors.New("bad")}, unreachable}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sink := &scriptedSink{createErrs: tc.errs}
			s := newTestEventSink(sink)
			s.record(context.Background(), daemonSetEvent(agentDS, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: agent-x", time.Now()))
			if len(sink.creates) != tc.calls {
				t.Fatalf("%d creates, want %d", len(sink.creates), tc.calls)
			}
		})
	}
}

// TestEventSink_StopsWithItsContext: a sink waiting to try again gives up when its
// context ends.
func TestEventSink_StopsWithItsContext(t *testing.T) {
	sink := &scriptedSink{createErrs: repeatErr(errors.New("connection refused"), eventTries)}
	s := newTestEventSink(sink)
	s.retryAfter = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.record(ctx, daemonSetEvent(agentDS, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: agent-y", time.Now()))
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the sink kept waiting after its context ended")
	}
	if len(sink.creates) > 2 {
		t.Fatalf("%d creates after the context ended", len(sink.creates))
	}
}

func repeatErr(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
