package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExitErrorCarriesTheLogsLastLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kube-scheduler.log")
	var log strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&log, "line %d\n", i)
	}
	log.WriteString("E1201 unable to read certificate-authority /nowhere/apiserver.crt\n")
	if err := os.WriteFile(path, []byte(log.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	msg := exitError("kube-scheduler", errors.New("exit status 1"), path).Error()
	for _, want := range []string{"kube-scheduler exited (exit status 1)", path, "unable to read certificate-authority", "line 27"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 26\n") {
		t.Errorf("error carries more than %d lines:\n%s", logTailLines, msg)
	}
}

func TestExitErrorWithNoLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.log")
	msg := exitError("kube-apiserver", errors.New("signal: killed"), path).Error()
	if !strings.Contains(msg, "kube-apiserver exited (signal: killed)") || !strings.Contains(msg, path) {
		t.Errorf("unexpected error: %s", msg)
	}
}
