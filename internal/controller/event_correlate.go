package controller

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// The correlation rules of client-go's event recorder at its defaults, which
// kube-controller-manager's DaemonSet controller records with: up to 4096 remembered
// keys per cache; more than ten events of one object, type and reason within ten
// minutes that differ only in their message are merged into one aggregated event;
// an object's events of one type may be sent 25 at once, then one every five
// minutes.
const (
	eventCacheSize        = 4096
	eventAggregateAfter   = 10
	eventAggregateSeconds = 600
	eventSpamBurst        = 25
	eventSpamQPS          = 1.0 / 300
)

// eventCorrelator decides which recorded events reach the API server and in what
// form, with the same outcome as client-go's record.EventCorrelator: the same
// events sent, with the same names, counts, timestamps, messages and patches. It
// differs in cost only. client-go works out the patch of a repeated event before
// its spam filter drops it, and under churn a DaemonSet's events are nearly all
// dropped (25, then one every five minutes); this correlator counts a dropped
// event as that one does and works out a patch only for an event it sends.
//
// The aggregation and the spam filter are client-go's own; what is kept here is
// the count of each event already seen, which client-go keeps unexported.
type eventCorrelator struct {
	aggregator *record.EventAggregator
	spam       *record.EventSourceObjectSpamFilter

	mu   sync.Mutex
	seen *lru.Cache // eventKey → seenEvent
}

// seenEvent is what is remembered of an event sent or counted before: how often it
// happened, since when, and the name and resource version the API server gave it.
type seenEvent struct {
	count           int32
	first           metav1.Time
	name            string
	resourceVersion string
}

func newEventCorrelator(clk clock.PassiveClock) *eventCorrelator {
	return &eventCorrelator{
		aggregator: record.NewEventAggregator(eventCacheSize, record.EventAggregatorByReasonFunc,
			record.EventAggregatorByReasonMessageFunc, eventAggregateAfter, eventAggregateSeconds, clk),
		spam: record.NewEventSourceObjectSpamFilter(eventCacheSize, eventSpamBurst, eventSpamQPS, clk, eventSpamKey),
		seen: lru.New(eventCacheSize),
	}
}

// correlate returns the event to send for e, and, for an event seen before, the
// patch that brings the stored one up to it; send is false when the spam filter
// drops it.
func (c *eventCorrelator) correlate(e *v1.Event) (out *v1.Event, patch []byte, send bool, err error) {
	merged, key := c.aggregator.EventAggregate(e)
	ev := *merged
	repeat := c.count(&ev, key)
	if c.spam.Filter(&ev) {
		return nil, nil, false, nil
	}
	if repeat {
		patch, err = repeatPatch(&ev)
	}
	return &ev, patch, true, err
}

// count records one more occurrence of the event under key and, when it was seen
// before, makes ev the next occurrence of the stored event: its name, resource
// version, first timestamp and count.
func (c *eventCorrelator) count(ev *v1.Event, key string) (repeat bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.seen.Get(key); ok {
		if before, ok := v.(seenEvent); ok && before.count > 0 {
			ev.Name = before.name
			ev.ResourceVersion = before.resourceVersion
			ev.FirstTimestamp = before.first
			ev.Count = before.count + 1
			repeat = true
		}
	}
	c.seen.Add(key, seenOf(ev))
	return repeat
}

// stored records the event as the API server returned it, so that the next
// occurrence patches it under its name and resource version.
func (c *eventCorrelator) stored(ev *v1.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen.Add(eventKey(ev), seenOf(ev))
}

func seenOf(ev *v1.Event) seenEvent {
	return seenEvent{count: ev.Count, first: ev.FirstTimestamp, name: ev.Name, resourceVersion: ev.ResourceVersion}
}

// repeatPatch is the strategic merge patch from the stored event (its count,
// message and last timestamp unknown) to ev: the same patch client-go sends.
func repeatPatch(ev *v1.Event) ([]byte, error) {
	base := *ev
	base.Count = 0
	base.Message = ""
	base.LastTimestamp = metav1.NewTime(time.Unix(0, 0))
	next, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	prev, err := json.Marshal(&base)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(prev, next, ev)
}

// eventKey names one event exactly: its source, object, type, reason and message.
// It must spell the key as the aggregator does for an event it does not merge (the
// fields run together), since stored records under it what count looked up under
// the aggregator's key.
func eventKey(ev *v1.Event) string {
	o := ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name,
		o.FieldPath, string(o.UID), o.APIVersion, ev.Type, ev.Reason, ev.Message}, "")
}

// eventSpamKey names what the spam filter rations: one source's events of one type
// about one object, whatever their reason (spelled as client-go spells it).
func eventSpamKey(ev *v1.Event) string {
	o := ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name,
		string(o.UID), o.APIVersion, ev.Type}, "")
}
