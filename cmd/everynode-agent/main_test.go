package main

import (
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParse_EnvironmentSetsDefaultsAndFlagsWin(t *testing.T) {
	t.Setenv("AGENT_EXIT_AFTER", "3s")
	t.Setenv("AGENT_EXIT_CODE", "7")
	o, err := parse([]string{"--exit-code=9", "--ready-file=/tmp/r"})
	if err != nil {
		t.Fatal(err)
	}
	if o.exitAfter != 3*time.Second || o.exitCode != 9 || o.readyFile != "/tmp/r" || o.allocEvery != 100*time.Millisecond {
		t.Fatalf("parsed %+v", o)
	}
}

func TestParse_BadEnvironmentNamesTheVariable(t *testing.T) {
	t.Setenv("AGENT_ALLOC_MB", "lots")
	_, err := parse(nil)
	if err == nil || err.Error() != `AGENT_ALLOC_MB="lots": parse error` {
		t.Fatalf("got %v", err)
	}
}

func TestRun_ExitsWithCodeAfterWritingReadyFile(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	code := run(options{exitAfter: 300 * time.Millisecond, exitCode: 3, readyFile: ready})
	if code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
	if b, err := os.ReadFile(ready); err != nil || string(b) != "ready\n" {
		t.Fatalf("ready file: %q, %v", b, err)
	}
}

func TestProbe_SucceedsOnlyOnceTheFileExists(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ready")
	if code := probe([]string{file}); code != 1 {
		t.Fatalf("probe of a missing file exited %d, want 1", code)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := probe([]string{file}); code != 0 {
		t.Fatalf("probe of an existing file exited %d, want 0", code)
	}
	if code := probe(nil); code != 2 {
		t.Fatalf("probe with no file exited %d, want 2", code)
	}
}

func TestProbeAPI_AsksTheServiceAsTheServiceAccount(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" || r.Header.Get("Authorization") != "Bearer secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"gitVersion":"v1.37.2"}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	for token, want := range map[string]int{"secret": 0, "wrong": 1} {
		if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := probeAPI(dir); got != want {
			t.Errorf("with token %q probe-api exited %d, want %d", token, got, want)
		}
	}
}
