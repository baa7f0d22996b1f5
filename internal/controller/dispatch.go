package controller

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

// DefaultPodWriters is the default Options.PodWriters. Without a client rate limit
// the dispatchers bound the pod writes a second at their number over the API
// server's answer time: in node churn on a busy API server (50 pool moves a second,
// 200 writes a second, answers slowed to a tenth of a second or more) 16 fell
// behind and the queue grew; 64 kept up. Under a rate limit only as many wait as
// there are writes to claim.
const DefaultPodWriters = 64

// The dispatchers: a fixed set of goroutines that send the queued pod writes of every
// DaemonSet, highest rank first (writeQueue). A worker's sync only queues its pod
// writes; it does not wait for them.
//
// The order is decided as late as it can be: a dispatcher first takes a token from
// the client's rate limiter (Options.RateLimiter), and only then picks the write to
// send, which skips the limiter (its token is paid: see PrepaidRateLimiter). So a
// network agent's create queued after a thousand other creates goes out with the
// next token, not after them. A dispatcher takes a token only when there is a write
// for it that no other dispatcher holding one will take.

// A request outside the queue that unblocks nodes (the node gate's taint removal,
// nodegate.go) takes its token the same way, ahead of every queued write: it asks
// for one (takeToken), counted as demand like a ready write, and the next dispatcher
// that gets a token hands it over. Taken from the limiter directly it would wait
// behind the tokens every dispatcher has reserved.

// next blocks until a write may go out and returns it; false when the queue is
// closed or ctx ends.
func (q *writeQueue) next(ctx context.Context, limiter flowcontrol.RateLimiter) (*podWrite, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	paid := false
	for {
		for !q.closed && !paid && q.demandLocked() <= q.claimants {
			q.waiting++
			q.cond.Wait()
			q.waiting--
		}
		if q.closed {
			if paid {
				q.claimants--
			}
			return nil, false
		}
		if !paid {
			q.claimants++
			paid = true
			if limiter != nil {
				q.mu.Unlock()
				err := limiter.Wait(ctx)
				q.mu.Lock()
				if err != nil {
					q.claimants--
					q.wakeLocked() // the write it claimed is another's now
					return nil, false
				}
			}
		}
		if q.urgent > 0 {
			// The token goes to a request outside the queue; claim another.
			q.urgent--
			q.handed++
			q.claimants--
			paid = false
			q.handedCond.Signal()
			continue
		}
		if w := q.popLocked(); w != nil {
			q.claimants--
			return w, true
		}
		// Withdrawn while the token came: keep it for the next write.
		q.paidWaiting++
		q.cond.Wait()
		q.paidWaiting--
	}
}

// wakeLocked wakes as many waiting dispatchers as there are writes ready that no
// dispatcher has claimed, instead of every dispatcher at every change; every one
// when a dispatcher holding a paid token waits, as only it may take the next write
// without a new token.
func (q *writeQueue) wakeLocked() {
	if q.paidWaiting > 0 {
		q.cond.Broadcast()
		return
	}
	for range min(q.demandLocked()-q.claimants, q.waiting) {
		q.cond.Signal()
	}
}

// demandLocked is how many tokens are wanted: a write ready to go out, or a request
// outside the queue (takeToken), each.
func (q *writeQueue) demandLocked() int { return q.readyLocked() + q.urgent }

// takeToken waits for the next rate limiter token a dispatcher gets, for a request
// outside the queue that goes before every queued write, and reports whether it got
// one; false when the queue closed first (the request then waits for a token of its
// own). The request must then be sent with a context marked withPrepaid.
func (q *writeQueue) takeToken() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.urgent++
	q.wakeLocked()
	for q.handed == 0 && !q.closed {
		q.handedCond.Wait()
	}
	if q.handed == 0 {
		q.urgent--
		return false
	}
	q.handed--
	return true
}

// dispatch sends queued pod writes until ctx ends.
func (c *Controller) dispatch(ctx context.Context) {
	for {
		w, ok := c.writes.next(ctx, c.opts.RateLimiter)
		if !ok {
			return
		}
		c.send(klog.NewContext(withPrepaid(ctx), w.logger), w)
	}
}

// send sends one write and settles it.
func (c *Controller) send(ctx context.Context, w *podWrite) {
	var err error
	stop := false
	if w.create != nil {
		err, stop = c.sendCreate(ctx, w)
	} else {
		err = c.sendDelete(ctx, w)
	}
	dropped := c.writes.answered(w, err, stop)
	c.settleWithdrawn(dropped)
	if len(dropped) > 0 {
		klog.FromContext(ctx).V(2).Info("Create failed, dropping the DaemonSet's other queued creates", "dropped", len(dropped))
	}
	if err != nil {
		// The DaemonSet's next sync, with back-off, reports the error and decides
		// again what it still needs.
		c.queue.AddRateLimited(w.key)
	}
}

// prepaidKey marks a request context whose rate limiter token is already taken.
type prepaidKey struct{}

func withPrepaid(ctx context.Context) context.Context {
	return context.WithValue(ctx, prepaidKey{}, true)
}

// prepaidLimiter is a client rate limiter that lets the requests of a context
// marked withPrepaid pass at once: their sender took the token before.
type prepaidLimiter struct {
	flowcontrol.RateLimiter
}

func (l prepaidLimiter) Wait(ctx context.Context) error {
	if ctx.Value(prepaidKey{}) != nil {
		return nil
	}
	return l.RateLimiter.Wait(ctx)
}

// PrepaidRateLimiter gives cfg a client rate limiter of its QPS and burst that the
// pod write dispatchers take their tokens from before they choose a write, and
// returns the copy and the limiter, for Options.RateLimiter; a limiter cfg already
// has is the one used. Without a limit (QPS 0 or less) the limiter is nil. Every
// client built from the copy shares it.
func PrepaidRateLimiter(cfg *rest.Config) (*rest.Config, flowcontrol.RateLimiter) {
	limiter := cfg.RateLimiter
	if limiter == nil {
		if cfg.QPS <= 0 {
			return cfg, nil
		}
		limiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, max(cfg.Burst, 1))
	}
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter = prepaidLimiter{limiter}
	return cfg, limiter
}
