package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/everynode/everynode/internal/browsertest"
)

// TestDashboardInABrowser opens `everynode dashboard` in headless Chromium: the grid
// shows every node of the DaemonSet, by wave; a rollout's progress reaches the page
// without a reload (cells go through waiting and updating and end current, the grid
// drawn once), its unavailable nodes counted by cause; a node's explanation opens on
// a click; the Pause button, once
// confirmed, sets the annotation on the DaemonSet, mid-release, and the page shows
// the nodes held by it. The screenshot is written to the artifacts directory.
func TestDashboardInABrowser(t *testing.T) {
	const eligible = `[...document.querySelectorAll('#grid .cell:not([data-state="ineligible"])')]`
	ns := newNamespace(t)
	pool := map[string]string{"e2e/pool": ns}
	var sets []map[string]string
	for i := range 12 {
		sets = append(sets, map[string]string{"e2e/pool": ns, "e2e/wave": []string{"a", "b", "c"}[i%3]})
	}
	nodes := newNodesLabelled(t, sets)
	ds := daemonSet(ns, "agent", pool)
	ds.Annotations = map[string]string{annWaves: "e2e/wave"}
	createDaemonSet(t, ds)
	waitRolledOut(t, ns, "agent", 12)

	ctx := browsertest.New(t, 1400, 900)
	page := startDashboard(t, "-n", ns) + "#" + url.QueryEscape(ns+"/agent")
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("opening %s: %v", page, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logPage(t, ctx, "dashboard-failed.png")
		}
	})
	// The sandbox's other nodes are there too, not eligible for the DaemonSet.
	waitJS(t, ctx, "the grid's 12 eligible cells", eligible+`.length === 12`)
	shown := evalJS[[]string](t, ctx, eligible+`.map(c => c.dataset.node)`)
	slices.Sort(shown)
	want := slices.Sorted(slices.Values(nodes))
	if !slices.Equal(shown, want) {
		t.Fatalf("the grid shows nodes %v, want %v", shown, want)
	}
	groups := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#grid .group h3')].map(h => h.textContent)`)
	if len(groups) != 4 || !strings.HasPrefix(groups[0], "e2e/wave=a") || !strings.HasPrefix(groups[2], "e2e/wave=c") ||
		!strings.HasPrefix(groups[3], "e2e/wave=(unlabelled)") {
		t.Errorf("the grid's groups are %q, want the waves a, b, c and then the nodes without the label", groups)
	}
	others := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#grid .cell[data-state="ineligible"]')].map(c => c.dataset.why)`)
	if len(others) == 0 || slices.ContainsFunc(others, func(why string) bool { return why != "NodeSelectorMismatch" }) {
		t.Errorf("the nodes outside the pool show %q, want each NodeSelectorMismatch", others)
	}
	waitJS(t, ctx, "every cell current", eligible+`.every(c => c.dataset.state === 'current')`)

	// Record every state a cell takes, and mark the page so that a reload shows.
	evalJS[bool](t, ctx, `window.e2eMark = true; window.e2eSeen = new Set(); window.e2eUnavailable = new Set();
		new MutationObserver(ms => ms.forEach(m => e2eSeen.add(m.target.dataset.state + '/' + m.target.dataset.why)))
			.observe(document.getElementById('grid'), {subtree: true, attributes: true, attributeFilter: ['data-state', 'data-why']});
		new MutationObserver(() => e2eUnavailable.add(document.getElementById('ds-unavailable').textContent))
			.observe(document.getElementById('ds-unavailable'), {childList: true, characterData: true, subtree: true});
		true`)
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = imageV2 })
	waitRolledOut(t, ns, "agent", 12)
	waitJS(t, ctx, "every cell current after the rollout", eligible+`.every(c => c.dataset.state === 'current')`)
	seen := evalJS[[]string](t, ctx, `[...e2eSeen]`)
	if !slices.Contains(seen, "waiting/wave") || !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, "updating/") }) {
		t.Errorf("during the rollout the cells showed %q; want a node waiting for its wave and one updating", seen)
	}
	// The nodes between their old pod and an available new one were counted, by cause.
	unavailable := evalJS[[]string](t, ctx, `[...e2eUnavailable]`)
	if !slices.ContainsFunc(unavailable, func(s string) bool {
		return strings.HasPrefix(s, "Unavailable: ") && (strings.Contains(s, "Updating") || strings.Contains(s, "Starting"))
	}) {
		t.Errorf("during the rollout the page's unavailable line read %q; want the updating or starting nodes counted", unavailable)
	}
	if !evalJS[bool](t, ctx, `window.e2eMark === true && everynodeStats.gridRenders === 1 && everynodeStats.updates > 0`) {
		t.Errorf("the page was reloaded or redrawn whole: stats %s", evalJS[string](t, ctx, `JSON.stringify(everynodeStats)`))
	}
	waitJS(t, ctx, "the list's updated count", `[...document.querySelectorAll('#daemonsets tbody td')].map(td => td.textContent).join('|').startsWith('`+ns+`|agent|12|12|12|12|12')`)

	// A node's explanation, as `everynode explain` prints it.
	node := want[0]
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`#grid .cell[data-node=%q]`, node))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the node's explanation", `document.getElementById('node-text').textContent.includes('Node:')`)
	text := evalJS[string](t, ctx, `document.getElementById('node-text').textContent`)
	if !strings.Contains(text, node) || !strings.Contains(text, "Should run:") {
		t.Errorf("the explanation of %s reads:\n%s", node, text)
	}

	// The next release bakes an hour after its first wave: wave a turns current,
	// the others wait for the pause between waves.
	updateDaemonSet(t, ns, "agent", func(ds *apps.DaemonSet) {
		ds.Annotations["rollout.everynode.dev/wave-pause"] = "1h"
		ds.Spec.Template.Spec.Containers[0].Image = imageV1
	})
	waitJS(t, ctx, "wave a current, the others waiting for the pause between waves",
		eligible+`.every(c => c.closest('.group').querySelector('h3').textContent.startsWith('e2e/wave=a') ?
			c.dataset.state === 'current' : c.dataset.state === 'waiting' && c.dataset.why === 'wave pause')`)

	// Pause, confirmed in the dialog: the annotation appears on the DaemonSet, and
	// the nodes still to update wait for it.
	if err := chromedp.Do(ctx, chromedp.Click(`.actions button[data-action="pause"]`), chromedp.WaitVisible(`#confirm-ok`),
		chromedp.Click(`#confirm-ok`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the paused annotation", func(ctx context.Context) (bool, error) {
		got, err := env.client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && got.Annotations[annPaused] == "true", nil
	})
	waitJS(t, ctx, "the waiting cells held by the pause", eligible+`.filter(c => c.dataset.state === 'waiting').length === 8 &&
		`+eligible+`.every(c => c.dataset.state !== 'waiting' || c.dataset.why === 'paused')`)
	if err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`#grid .cell[data-node=%q]`, want[1]))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the explanation of a node held by the pause", `document.getElementById('node-text').textContent.includes('the rollout is paused')`)

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("taking the screenshot: %v", err)
	}
	path := filepath.Join(artifactsDir(t), "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
