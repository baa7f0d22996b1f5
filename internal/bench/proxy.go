package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a reverse proxy in front of the API server that counts every request
// through it by verb and resource. Each controller under test talks to the API
// server only through a Proxy of its own, so its requests are attributed exactly,
// and the same way whichever controller it is. Responses are streamed and flushed as
// they come, so watches work through it. With SetFaults it also injects faults
// into the requests it serves, counted apart (FaultCounts); a faulted request is
// counted as any other.
type Proxy struct {
	handler *httputil.ReverseProxy

	faults      atomic.Pointer[injector]
	faultCounts faultCounters
	watches     openWatches

	mu       sync.RWMutex
	counters map[Key]*counter

	server   *http.Server
	listener net.Listener
	done     chan error
}

type counter struct{ requests, errors, bytes atomic.Int64 }

// NewProxy forwards to upstream through transport.
func NewProxy(upstream *url.URL, transport http.RoundTripper) *Proxy {
	p := &Proxy{counters: map[Key]*counter{}}
	p.handler = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		Transport:     transport,
		FlushInterval: -1, // flush every write: watch events must not wait in a buffer
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	return p
}

// NewTLSTransport is a transport to an API server whose serving certificate is
// signed by a CA of caPEM, speaking HTTP/2 as client-go does. It neither asks for nor
// undoes compression: the client's Accept-Encoding goes through as it is.
func NewTLSTransport(caPEM []byte) (*http.Transport, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate to trust the API server by")
	}
	return &http.Transport{
		Proxy:               nil,
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}, nil
}

// ServeHTTP counts the request, then forwards it, or answers it with a fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := Classify(r)
	c := p.counter(key)
	c.requests.Add(1)
	cw := &countingWriter{ResponseWriter: w, c: c}
	in := p.faults.Load()
	switch {
	case key.Verb == "watch":
		p.serveWatch(cw, r, in)
	case in != nil:
		in.serve(cw, r, key, p.handler)
	default:
		p.handler.ServeHTTP(cw, r)
	}
}

func (p *Proxy) counter(k Key) *counter {
	p.mu.RLock()
	c, ok := p.counters[k]
	p.mu.RUnlock()
	if ok {
		return c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok = p.counters[k]; !ok {
		c = &counter{}
		p.counters[k] = c
	}
	return c
}

// Snapshot is what has been counted so far; the bytes of open watches count as far
// as they have flowed.
func (p *Proxy) Snapshot() Counts {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make(Counts, len(p.counters))
	for k, c := range p.counters {
		out[k] = Tally{Requests: c.requests.Load(), Errors: c.errors.Load(), Bytes: c.bytes.Load()}
	}
	return out
}

// ListenTLS serves the proxy on a free loopback port with the given certificate (the
// API server's own, so clients trust the proxy as they trust it) and returns its URL.
func (p *Proxy) ListenTLS(certFile, keyFile string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p.listener = l
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	p.done = make(chan error, 1)
	go func() { p.done <- p.server.ServeTLS(l, certFile, keyFile) }()
	return "https://" + l.Addr().String(), nil
}

// Close stops serving, cutting open watches.
func (p *Proxy) Close() error {
	if p.server == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.server.Shutdown(ctx); err != nil {
		_ = p.server.Close()
	}
	if err := <-p.done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// countingWriter counts the status and body bytes of a response as it is written.
type countingWriter struct {
	http.ResponseWriter
	c           *counter
	wroteHeader bool
}

func (w *countingWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if code >= 400 {
			w.c.errors.Add(1)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	n, err := w.ResponseWriter.Write(b)
	w.c.bytes.Add(int64(n))
	return n, err
}

// Unwrap lets http.ResponseController (which the reverse proxy flushes through)
// reach the underlying writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on.
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
