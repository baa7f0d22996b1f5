package controller

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// ErrNotLeading is the error of a write the fence held back: this replica is not
// sure it still holds the leader election Lease.
var ErrNotLeading = errors.New("not sure to hold the leader election Lease: write held back")

// Fence lets a replica write only while it is sure it leads: it has renewed the
// Lease within the renew deadline, by the monotonic clock. The leader election loop
// notices a lost Lease only when its own renewal fails, which for a replica frozen
// (SIGSTOP, a long GC pause, a stalled VM) and thawed is after it has already gone on
// writing; the fence is checked before each write goes out instead, so the moment the
// last renewal is older than the deadline, writes stop, whatever the loop believes.
//
// Leader election records renewals on it (see fencedLock); a replica that does not
// elect a leader keeps its fence open (OpenFence).
type Fence struct {
	clock    clock.PassiveClock
	deadline time.Duration

	mu      sync.Mutex
	open    bool      // no leader election: always held
	renewed time.Time // the last successful renewal (with its monotonic reading)
	leading bool
	held    int64 // writes held back, for the metric
}

// NewFence is a closed fence: nothing goes out until the first renewal.
func NewFence(c clock.PassiveClock, renewDeadline time.Duration) *Fence {
	return &Fence{clock: c, deadline: renewDeadline}
}

// OpenFence lets every write out: a replica that does not elect a leader.
func OpenFence() *Fence { return &Fence{open: true, clock: clock.RealClock{}} }

// Renewed records a successful acquisition or renewal of the Lease, now.
func (f *Fence) Renewed() { f.renewedAt(f.clock.Now()) }

// renewedAt records a successful acquisition or renewal of the Lease sent at sent.
func (f *Fence) renewedAt(sent time.Time) {
	f.mu.Lock()
	if sent.After(f.renewed) {
		f.renewed = sent
	}
	f.leading = true
	f.mu.Unlock()
}

// Lost closes the fence at once: the Lease is gone.
func (f *Fence) Lost() {
	f.mu.Lock()
	f.leading = false
	f.mu.Unlock()
}

// Held reports whether a write may go out now.
func (f *Fence) Held() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open || (f.leading && f.clock.Since(f.renewed) < f.deadline)
}

// HeldBack is how many writes the fence has refused.
func (f *Fence) HeldBack() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

func (f *Fence) refuse() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held++
	return f.clock.Since(f.renewed)
}

// Wrap puts the fence in front of cfg's transport: every request but a read (GET,
// HEAD) is checked just before it is sent, and refused with ErrNotLeading when the
// fence does not hold. The leader election's own client must not be fenced.
func (f *Fence) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &fencedTransport{next: rt, fence: f} })
	return cfg
}

type fencedTransport struct {
	next  http.RoundTripper
	fence *Fence
}

func (t *fencedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !t.fence.Held() {
		since := t.fence.refuse()
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("%s %s: %w (last renewal %s ago)", r.Method, strings.SplitN(r.URL.Path, "?", 2)[0], ErrNotLeading, since.Round(time.Millisecond))
	}
	return t.next.RoundTrip(r)
}
