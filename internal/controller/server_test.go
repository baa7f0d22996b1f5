package controller

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestServerServesMetricsHealthAndReadiness(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.podsCreated.WithLabelValues("MissingPod").Inc()
	m.syncDuration.WithLabelValues("success").Observe(0.002)
	var ready atomic.Bool
	srv, err := Listen("127.0.0.1:0", reg, ready.Load, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	base := "http://" + srv.Addr()

	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before sync = %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after sync = %d, want 200", code)
	}
	_, body := get(t, base+"/metrics")
	for _, want := range []string{`everynode_pods_created_total{reason="MissingPod"} 1`, "everynode_workqueue_depth", "everynode_sync_duration_seconds"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after shutdown = %v, want nil", err)
	}
	if _, err := Listen(srv.Addr(), reg, ready.Load, false, nil); err != nil {
		t.Errorf("port not released after shutdown: %v", err)
	}
}

func TestListenReportsAPortInUse(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", prometheus.NewRegistry(), func() bool { return true }, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.listener.Close()
	if _, err := Listen(srv.Addr(), prometheus.NewRegistry(), func() bool { return true }, false, nil); err == nil || !strings.Contains(err.Error(), "cannot serve metrics on") {
		t.Fatalf("Listen on a used port = %v, want a clear error", err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestServerProfilingOnlyWhenAsked(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		srv, err := Listen("127.0.0.1:0", prometheus.NewRegistry(), func() bool { return true }, profiling, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		code, body := get(t, "http://"+srv.Addr()+"/debug/pprof/")
		switch {
		case profiling && (code != http.StatusOK || !strings.Contains(body, "goroutine")):
			t.Errorf("profiling on: /debug/pprof/ = %d, want 200 listing the profiles", code)
		case !profiling && code != http.StatusNotFound:
			t.Errorf("profiling off: /debug/pprof/ = %d, want 404", code)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve after shutdown = %v", err)
		}
	}
}
