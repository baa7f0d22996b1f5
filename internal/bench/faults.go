package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Faults say which requests a Proxy answers with a fault instead of the API server's
// answer. Each share is the fraction, from 0 to 1, of the requests it applies to that
// meet that fault, drawn from a random source seeded with Seed: the same seed gives
// the same sequence of draws (which request meets which draw follows the order in
// which requests arrive). Only requests for API resources are touched; discovery,
// /version and the health paths always pass.
type Faults struct {
	Seed int64

	// The faults of requests other than watches, drawn once per request, each
	// share of all such requests (together at most 1):

	// ServerErrors are answered 500 InternalError, as the API server answers
	// when its storage fails.
	ServerErrors float64
	// Throttles are answered 429 TooManyRequests with Retry-After: 1, as an
	// overloaded API server answers. client-go waits and sends them again itself.
	Throttles float64
	// Stalls are held for Hold without reaching the API server, then dropped: the
	// client's stream is reset. The request never happened.
	Stalls float64
	// LostAnswers reach the API server, which acts on them, but its answer is held
	// for Hold and dropped: the client cannot know that its write happened.
	LostAnswers float64
	// Hold is how long a stalled request or a lost answer is held before it is
	// dropped; longer than the client's timeout, the client gives up first.
	Hold time.Duration

	// WatchMin and WatchMax bound how long a watch stream lives: each is cut after
	// a time drawn uniformly between them. A zero WatchMax cuts none.
	WatchMin, WatchMax time.Duration
	// WatchResets is the share of cut watches whose stream is reset, as when a
	// connection drops; the others end as the API server ends a watch at its
	// timeout, and client-go resumes them from the last resourceVersion it saw.
	WatchResets float64
	// Expired is the share of watch resumes (a watch from a resourceVersion other
	// than "" and "0", without sendInitialEvents) answered as the API server
	// answers a resourceVersion its watch cache no longer holds: 200 and a single
	// ERROR event carrying a 410 Status, reason Expired, "too old resource
	// version". The client must list again.
	Expired float64
}

// Validate reports the first setting that cannot work.
func (f Faults) Validate() error {
	for _, s := range []struct {
		name  string
		share float64
	}{{"ServerErrors", f.ServerErrors}, {"Throttles", f.Throttles}, {"Stalls", f.Stalls}, {"LostAnswers", f.LostAnswers}, {"WatchResets", f.WatchResets}, {"Expired", f.Expired}} {
		if s.share < 0 || s.share > 1 {
			return fmt.Errorf("faults: %s is a share from 0 to 1, got %v", s.name, s.share)
		}
	}
	switch {
	case f.ServerErrors+f.Throttles+f.Stalls+f.LostAnswers > 1:
		return errors.New("faults: ServerErrors, Throttles, Stalls and LostAnswers share the requests other than watches and add up to more than 1")
	case (f.Stalls > 0 || f.LostAnswers > 0) && f.Hold <= 0:
		return errors.New("faults: Stalls and LostAnswers need a Hold")
	case f.WatchMin < 0 || f.WatchMax < f.WatchMin:
		return fmt.Errorf("faults: watch lifetimes need 0 <= WatchMin <= WatchMax, got %s and %s", f.WatchMin, f.WatchMax)
	}
	return nil
}

// SetFaults makes the proxy inject f into the requests it serves from now on, with a
// random source seeded afresh, and cut the watches already open on f's schedule;
// nil stops injecting, and cutting.
func (p *Proxy) SetFaults(f *Faults) error {
	var in *injector
	if f != nil {
		if err := f.Validate(); err != nil {
			return err
		}
		in = newInjector(*f, &p.faultCounts)
	}
	p.faults.Store(in)
	p.watches.reschedule(in)
	return nil
}

// FaultCounts are the faults injected so far.
func (p *Proxy) FaultCounts() FaultCounts { return p.faultCounts.snapshot() }

// FaultCounts are the faults a Proxy injected, by kind.
type FaultCounts struct {
	ServerErrors, Throttles, Stalls, LostAnswers int64
	// WatchEnds are the watches cut by ending their stream, WatchResets those cut
	// by resetting it.
	WatchEnds, WatchResets int64
	Expired                int64
}

// Total is the number of faults of every kind.
func (c FaultCounts) Total() int64 {
	return c.ServerErrors + c.Throttles + c.Stalls + c.LostAnswers + c.WatchEnds + c.WatchResets + c.Expired
}

// faultCounters are a Proxy's FaultCounts as they are counted.
type faultCounters struct {
	serverErrors, throttles, stalls, lostAnswers, watchEnds, watchResets, expired atomic.Int64
}

func (c *faultCounters) snapshot() FaultCounts {
	return FaultCounts{
		ServerErrors: c.serverErrors.Load(), Throttles: c.throttles.Load(), Stalls: c.stalls.Load(),
		LostAnswers: c.lostAnswers.Load(), WatchEnds: c.watchEnds.Load(), WatchResets: c.watchResets.Load(),
		Expired: c.expired.Load(),
	}
}

// injector decides, request by request, which fault to inject.
type injector struct {
	f      Faults
	counts *faultCounters

	mu  sync.Mutex
	rng *rand.Rand
}

func newInjector(f Faults, counts *faultCounters) *injector {
	seed := uint64(f.Seed)
	return &injector{f: f, counts: counts, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (in *injector) draw() float64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rng.Float64()
}

// serve answers r, a request other than a watch, with a fault or hands it to
// forward.
func (in *injector) serve(w http.ResponseWriter, r *http.Request, key Key, forward http.Handler) {
	if key.Resource == "" || key.Resource[0] == '/' {
		forward.ServeHTTP(w, r) // not an API resource
		return
	}
	f := in.f
	x := in.draw()
	switch {
	case x < f.ServerErrors:
		in.counts.serverErrors.Add(1)
		writeStatus(w, apierrors.NewInternalError(errors.New("injected by the fault proxy")))
	case x < f.ServerErrors+f.Throttles:
		in.counts.throttles.Add(1)
		w.Header().Set("Retry-After", "1")
		writeStatus(w, apierrors.NewTooManyRequests("the fault proxy throttles this request, please try again later", 1))
	case x < f.ServerErrors+f.Throttles+f.Stalls:
		in.counts.stalls.Add(1)
		// Read the body, as a network that takes a request whole: then an HTTP/1
		// server notices the client hang up, as an HTTP/2 one always does.
		_, _ = io.Copy(io.Discard, r.Body)
		holdThenDrop(r, f.Hold)
	case x < f.ServerErrors+f.Throttles+f.Stalls+f.LostAnswers:
		in.counts.lostAnswers.Add(1)
		start := time.Now()
		// The API server gets the request and acts on it; its answer goes nowhere.
		// The request keeps its own context: a client that gives up mid-way cancels
		// it, as it would at the API server.
		forward.ServeHTTP(discardWriter{header: http.Header{}}, r)
		holdThenDrop(r, f.Hold-time.Since(start))
	default:
		forward.ServeHTTP(w, r)
	}
}

// expire answers a watch resume as expired, if the draw says so, and reports
// whether it did.
func (in *injector) expire(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	rv := q.Get("resourceVersion")
	if rv == "" || rv == "0" || q.Get("sendInitialEvents") == "true" || in.draw() >= in.f.Expired {
		return false
	}
	in.counts.expired.Add(1)
	writeExpiredWatch(w, rv)
	return true
}

// holdThenDrop waits for d, or until the client gives up, then resets the client's
// stream without an answer.
func holdThenDrop(r *http.Request, d time.Duration) {
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	panic(http.ErrAbortHandler)
}

// writeStatus answers with err's Status, as the API server writes it.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	status := statusObject(err)
	body := mustJSON(&status)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(body)
}

func statusObject(err *apierrors.StatusError) metav1.Status {
	status := err.ErrStatus
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return status
}

// writeExpiredWatch answers a watch from resourceVersion rv as the API server's
// watch cache answers one from before the oldest version it holds.
func writeExpiredWatch(w http.ResponseWriter, rv string) {
	oldest := rv + "1" // any version after rv: the event names one
	if n, err := strconv.ParseUint(rv, 10, 64); err == nil {
		oldest = strconv.FormatUint(n+1, 10)
	}
	status := statusObject(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s (%s)", rv, oldest)))
	event, _ := json.Marshal(&metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: mustJSON(&status)}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(event, '\n'))
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// mustJSON encodes a Status, which always encodes.
func mustJSON(status *metav1.Status) []byte {
	b, err := json.Marshal(status)
	if err != nil {
		panic(err)
	}
	return b
}

// discardWriter takes an answer and keeps none of it.
type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header         { return d.header }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
func (d discardWriter) Flush()                      {}
