package controller

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	recordutil "k8s.io/client-go/tools/record/util"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// An event the API server cannot take is tried this many times, this far apart
// (the first wait a random part of it), as client-go's recorder tries.
const (
	eventTries      = 12
	eventRetryAfter = 10 * time.Second
)

// eventSink writes the events a broadcaster hands it to the API server, correlated
// by eventCorrelator: what client-go's StartRecordingToSink does, with the same
// writes, retries and logs, at the cost of only the events it sends.
type eventSink struct {
	sink       record.EventSink
	correlator *eventCorrelator
	retryAfter time.Duration
}

// startEventSink makes b send its events to sink until ctx ends or b shuts down.
func startEventSink(ctx context.Context, b record.EventBroadcaster, sink record.EventSink, clk clock.PassiveClock) {
	s := &eventSink{sink: sink, correlator: newEventCorrelator(clk), retryAfter: eventRetryAfter}
	b.StartEventWatcher(func(e *v1.Event) { s.record(ctx, e) })
}

// record sends one event, if the correlator lets it through, trying again while
// the API server cannot be reached.
func (s *eventSink) record(ctx context.Context, e *v1.Event) {
	ev, patch, send, err := s.correlator.correlate(e)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Event correlation failed")
	}
	if !send {
		return
	}
	for try := 1; !s.write(ctx, ev, patch); try++ {
		if try == eventTries {
			klog.FromContext(ctx).Error(nil, "Unable to write event (retry limit exceeded!)", "event", e)
			return
		}
		wait := s.retryAfter
		if try == 1 { // so that recorders cut off together do not come back together
			wait = time.Duration(rand.Float64() * float64(wait))
		}
		select {
		case <-ctx.Done():
			klog.FromContext(ctx).Error(nil, "Unable to write event (broadcaster is shut down)", "event", e)
			return
		case <-time.After(wait):
		}
	}
}

// write sends ev once: a patch of the stored event when it is a repeat (a create
// if that event is gone), otherwise a create. It reports whether ev is done with,
// sent or refused for good; false means try again.
func (s *eventSink) write(ctx context.Context, ev *v1.Event, patch []byte) bool {
	var stored *v1.Event
	var err error
	repeat := ev.Count > 1
	if repeat {
		stored, err = s.sink.Patch(ev, patch)
	}
	if !repeat || recordutil.IsKeyNotFoundError(err) {
		ev.ResourceVersion = ""
		stored, err = s.sink.Create(ev)
	}
	if err == nil {
		s.correlator.stored(stored)
		return true
	}
	logger := klog.FromContext(ctx)
	var construct *rest.RequestConstructionError
	var status *apierrors.StatusError
	switch {
	case errors.As(err, &construct):
		logger.Error(err, "Unable to construct event (will not retry!)", "event", ev)
		return true
	case errors.As(err, &status):
		if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			logger.V(5).Info("Server rejected event (will not retry!)", "event", ev, "err", err)
		} else {
			logger.Error(err, "Server rejected event (will not retry!)", "event", ev)
		}
		return true
	}
	logger.Error(err, "Unable to write event (may retry after sleeping)", "event", ev)
	return false
}
