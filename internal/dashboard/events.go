package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// heartbeat is how often an idle event stream sends a comment, so that a closed
// page is noticed and proxies keep the connection open.
const heartbeat = 15 * time.Second

// eventStream writes server-sent events.
type eventStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newEventStream(w http.ResponseWriter) *eventStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &eventStream{w: w, rc: http.NewResponseController(w)}
}

// send writes one event whose data is v as JSON.
func (s *eventStream) send(event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *eventStream) comment() error {
	if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// follow calls push now and after each change of the cache, at most once per
// refresh (changes in between are taken together), until the request ends or push
// fails to write.
func follow(ctx context.Context, c *Cache, refresh time.Duration, s *eventStream, push func() error) {
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		changed := c.Changed()
		sent := time.Now()
		if err := push(); err != nil {
			return
		}
		if !waitChange(ctx, changed, beat.C, s) {
			return
		}
		if wait := refresh - time.Since(sent); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// waitChange waits for changed, sending a comment at each beat; false when the
// request ended or the connection broke first.
func waitChange(ctx context.Context, changed <-chan struct{}, beat <-chan time.Time, s *eventStream) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-beat:
			if s.comment() != nil {
				return false
			}
		case <-changed:
			return true
		}
	}
}
