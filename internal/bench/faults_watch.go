package bench

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Why a watch stream's context ends when the fault proxy cuts it: to end the
// stream, or to reset it.
var (
	errWatchEnd   = errors.New("watch stream ended by the fault proxy")
	errWatchReset = errors.New("watch stream reset by the fault proxy")
)

// openWatches are the watch streams a Proxy serves, so that faults set while they
// are open can cut them too.
type openWatches struct {
	mu   sync.Mutex
	open map[*openWatch]struct{}
}

// openWatch is one watch stream and the cut scheduled for it, if any.
type openWatch struct {
	cut   context.CancelCauseFunc
	timer *time.Timer
}

func (ws *openWatches) add(w *openWatch, in *injector) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.open == nil {
		ws.open = map[*openWatch]struct{}{}
	}
	ws.open[w] = struct{}{}
	w.schedule(in)
}

func (ws *openWatches) remove(w *openWatch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.open, w)
	w.schedule(nil)
}

// reschedule gives every open watch a cut on in's schedule, or none.
func (ws *openWatches) reschedule(in *injector) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.open {
		w.schedule(in)
	}
}

// schedule replaces the watch's cut with one after a lifetime drawn from in's
// faults; with no injector or no watch cuts, the watch is not cut.
func (w *openWatch) schedule(in *injector) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if in == nil || in.f.WatchMax <= 0 {
		return
	}
	life := in.f.WatchMin + time.Duration(in.draw()*float64(in.f.WatchMax-in.f.WatchMin))
	how := errWatchEnd
	if in.draw() < in.f.WatchResets {
		how = errWatchReset
	}
	w.timer = time.AfterFunc(life, func() { w.cut(how) })
}

// serveWatch forwards a watch, unless in answers it as expired, and ends or resets
// the client's stream when the watch is cut.
func (p *Proxy) serveWatch(rw http.ResponseWriter, r *http.Request, in *injector) {
	if in != nil && in.expire(rw, r) {
		return
	}
	ctx, cut := context.WithCancelCause(r.Context())
	w := &openWatch{cut: cut}
	p.watches.add(w, in)
	// Cancelling the upstream request makes the reverse proxy reset the client's
	// stream (it panics with http.ErrAbortHandler). A watch to be ended cleanly
	// swallows that panic, so the handler returns and the stream ends.
	defer func() {
		p.watches.remove(w)
		cause := context.Cause(ctx)
		cut(nil)
		switch cause {
		case errWatchEnd:
			p.faultCounts.watchEnds.Add(1)
			if rec := recover(); rec != nil && rec != http.ErrAbortHandler {
				panic(rec)
			}
		case errWatchReset:
			p.faultCounts.watchResets.Add(1)
			if rec := recover(); rec != nil && rec != http.ErrAbortHandler {
				panic(rec)
			}
			panic(http.ErrAbortHandler) // reset, whether or not the copy had broken off
		}
	}()
	p.handler.ServeHTTP(rw, r.WithContext(ctx))
}
