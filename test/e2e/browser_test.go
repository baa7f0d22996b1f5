package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/everynode/everynode/internal/browsertest"
)

// artifactsDir is where the browser tests write their screenshots (test/e2e/artifacts
// unless EVERYNODE_ARTIFACTS names another directory).
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("EVERYNODE_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating the artifacts directory: %v", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// startDashboard runs `everynode dashboard` on a free port with args and returns its
// URL; it is stopped after the test.
func startDashboard(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.binary, append([]string{"dashboard", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.kubeconfig)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting everynode dashboard: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`http://[0-9.:]+/`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u := re.FindString(sc.Text()); u != "" {
				urls <- u
			}
		}
	}()
	select {
	case u := <-urls:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("everynode dashboard printed no address within 30s")
		return ""
	}
}

// evalJS evaluates a JavaScript expression in the tab.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return browsertest.Eval[T](t, ctx, expr)
}

// waitJS waits until a JavaScript expression is true in the tab.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	waitFor(t, what, func(context.Context) (bool, error) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		return err == nil && ok, nil
	})
}

// logPage logs what a failed test's page shows, and writes its screenshot.
func logPage(t *testing.T, ctx context.Context, name string) {
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText + '\nstats: ' + JSON.stringify(window.everynodeStats)`))
	t.Logf("the page at %s reads (%v):\n%s", time.Now().Format(time.TimeOnly), err, text)
	if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		path := filepath.Join(artifactsDir(t), name)
		if os.WriteFile(path, shot, 0o644) == nil {
			t.Logf("screenshot: %s", path)
		}
	}
}
