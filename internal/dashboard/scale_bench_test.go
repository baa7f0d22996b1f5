package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/everynode/everynode/internal/browsertest"
)

var scales = []int{1000, 5000}

// BenchmarkGridRefresh is the server's cost of one refresh of a DaemonSet's page in
// the middle of a rollout: the explanation from the caches (the core's rules over
// every node), the grid, the diff from the last refresh and its JSON.
//
//	go test -run '^$' -bench GridRefresh ./internal/dashboard/
func BenchmarkGridRefresh(b *testing.B) {
	for _, n := range scales {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			f := newFixture(b, n)
			f.roll(b, "agent:2", n/10)
			c := f.cache(b)
			var s stream
			e, nodes, err := c.Explain("ns", "agent", time.Now())
			if err != nil {
				b.Fatal(err)
			}
			first, _ := s.next(e, GridOf(e, nodes))
			whole, _ := json.Marshal(first)
			for b.Loop() {
				e, nodes, err := c.Explain("ns", "agent", time.Now())
				if err != nil {
					b.Fatal(err)
				}
				u, _ := s.next(e, GridOf(e, nodes))
				if _, err := json.Marshal(u); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(whole))/1024, "KiB/grid")
		})
	}
}

// BenchmarkBrowserPage is the page's cost in headless Chromium (EVERYNODE_BROWSER=0
// skips it): each round opens the page, waits for the whole grid, then replaces the
// pods of a tenth of the nodes in the API and waits until the page shows them. It
// reports, per round, the page's own measures (script time to draw the grid and to
// apply the update, and from each message to the frame after it) and the time from
// the last of the API's changes to the page showing them all (which includes the
// 250 ms refresh). The template changes too, so nine tenths of the cells turn to
// waiting at once.
//
//	go test -run '^$' -bench BrowserPage -benchtime 3x ./internal/dashboard/
func BenchmarkBrowserPage(b *testing.B) {
	for _, n := range scales {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			f := newFixture(b, n)
			srv := httptest.NewServer(NewServer(f.cache(b), f.client, Options{}))
			b.Cleanup(srv.Close)
			ctx := browsertest.New(b, 1400, 900)
			var open, gridScript, gridFrame, toPage, updScript, updFrame float64
			round := 0
			for b.Loop() {
				round++
				t0 := time.Now()
				if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#ns%2Fagent")); err != nil {
					b.Fatal(err)
				}
				waitPage(b, ctx, fmt.Sprintf(`everynodeStats.cells === %d && everynodeStats.lastGridFrameMs > 0`, n))
				open += float64(time.Since(t0).Milliseconds())
				gridScript += browsertest.Eval[float64](b, ctx, `everynodeStats.lastGridMs`)
				gridFrame += browsertest.Eval[float64](b, ctx, `everynodeStats.lastGridFrameMs`)

				k := n / 10
				f.roll(b, fmt.Sprintf("agent:%d", round+1), k)
				t1 := time.Now()
				waitPage(b, ctx, fmt.Sprintf(`document.querySelectorAll('#grid .cell.s-current').length === %d && everynodeStats.lastUpdateFrameMs > 0`, k))
				toPage += float64(time.Since(t1).Milliseconds())
				updScript += browsertest.Eval[float64](b, ctx, `everynodeStats.maxUpdateMs`)
				updFrame += browsertest.Eval[float64](b, ctx, `everynodeStats.maxUpdateFrameMs`)
			}
			r := float64(round)
			b.ReportMetric(open/r, "ms-open")
			b.ReportMetric(gridScript/r, "ms-grid-script")
			b.ReportMetric(gridFrame/r, "ms-grid-frame")
			b.ReportMetric(updScript/r, "ms-update-script")
			b.ReportMetric(updFrame/r, "ms-update-frame")
			b.ReportMetric(toPage/r, "ms-api-to-page")
		})
	}
}

// waitPage polls a JavaScript condition in the tab for up to a minute.
func waitPage(b *testing.B, ctx context.Context, cond string) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond)); err == nil && ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("the page never showed %s", cond)
}
