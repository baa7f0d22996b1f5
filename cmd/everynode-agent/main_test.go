package main

import (
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
