package controller

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultRequestTimeout is the default --kube-api-timeout: kube-apiserver's own
// default --request-timeout, so that a request the API server is still working on
// is not given up; it bounds only the requests nothing answers.
const DefaultRequestTimeout = time.Minute

// requestTimeout gives up on a request other than a watch once it has had no whole
// answer for timeout: a request held by something between the controller and the
// API server (a proxy, a load balancer, a half-dead connection that still answers
// pings) would otherwise hold the worker that sent it forever. Watches are long by
// design; their own timeout and the informers' retries look after them.
type requestTimeout struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t *requestTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	// The answer's body is read after RoundTrip returns: the deadline covers it
	// too, and is let go when the body is closed.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// isWatch reports whether req is a watch: ?watch=true (or 1), or a path under
// /watch/.
func isWatch(req *http.Request) bool {
	if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
		return true
	}
	return strings.Contains(req.URL.Path, "/watch/")
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
