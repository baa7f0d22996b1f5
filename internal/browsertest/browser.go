// Package browsertest starts a headless Chromium for the tests and benchmarks that
// drive everynode's dashboard in a real browser.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium finds the browser: $CHROMIUM, else chromium (Debian's package) or Google
// Chrome on PATH. Without one the test fails, saying how to get one;
// EVERYNODE_BROWSER=0 skips the browser tests instead.
func Chromium(tb testing.TB) string {
	tb.Helper()
	if os.Getenv("EVERYNODE_BROWSER") == "0" {
		tb.Skip("EVERYNODE_BROWSER=0: skipping the browser test")
	}
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	tb.Fatal("no Chromium found: install it (Debian: apt-get install chromium), name it with CHROMIUM=/path, or skip the browser tests with EVERYNODE_BROWSER=0")
	return ""
}

// New starts a headless Chromium with a window of width×height and returns the
// context of a tab; both end with the test.
func New(tb testing.TB, width, height int) context.Context {
	tb.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(Chromium(tb)),
		chromedp.WindowSize(width, height), chromedp.NoSandbox)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	tb.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// Eval evaluates a JavaScript expression in the tab.
func Eval[T any](tb testing.TB, ctx context.Context, expr string) T {
	tb.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}
