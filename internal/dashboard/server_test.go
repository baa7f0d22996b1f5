package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/everynode/everynode/internal/daemon"
)

func newTestServer(t *testing.T, f *fixture, o Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewServer(f.cache(t), f.client, o))
	t.Cleanup(srv.Close)
	return srv
}

// event is one server-sent event.
type event struct{ name, data string }

// readEvents reads the events of a stream into a channel until the body ends.
func readEvents(t *testing.T, body io.Reader) <-chan event {
	ch := make(chan event, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<24)
		var e event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			case line == "" && e.name != "":
				ch <- e
				e = event{}
			}
		}
	}()
	return ch
}

func nextUpdate(t *testing.T, events <-chan event) Update {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		if e.name != "update" {
			t.Fatalf("event %q (%s), want an update", e.name, e.data)
		}
		var u Update
		if err := json.Unmarshal([]byte(e.data), &u); err != nil {
			t.Fatal(err)
		}
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no further update within 10s")
		return Update{}
	}
}

func TestGridStreamSendsTheGridThenItsChanges(t *testing.T) {
	f := newFixture(t, 6)
	srv := newTestServer(t, f, Options{Refresh: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/daemonsets/ns/agent/grid", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := readEvents(t, res.Body)

	first := nextUpdate(t, events)
	if first.Grid == nil || first.Grid.GroupBy != ZoneLabel || len(first.Grid.Groups) != 3 || first.Counts[StateCurrent] != 6 {
		t.Fatalf("first update: %+v", first)
	}
	// seen is each node's cell as the page knows it: the whole grid, then the
	// changes applied one update after another.
	seen := map[string]Cell{}
	for _, g := range first.Grid.Groups {
		for _, c := range g.Cells {
			seen[c.Node] = c
		}
	}
	// The template changes and the first node's pod is replaced: the node is
	// current, the next sync replaces one more, and the others wait for their turn
	// (maxUnavailable 1). The updates in between depend on the order in which the
	// informers see the writes; each must hold only cells that changed (an update
	// may change only the counters).
	f.roll(t, "agent:2", 1)
	var u Update
	for u.Counts[StateCurrent] != 1 || u.Counts[StateUpdating] != 1 || u.Counts[StateWaiting] != 4 {
		u = nextUpdate(t, events)
		if u.Grid != nil {
			t.Fatalf("the grid was sent whole again, its nodes unchanged: %+v", u)
		}
		for _, c := range u.Cells {
			if seen[c.Node] == c {
				t.Errorf("cell %+v was sent, though it had not changed since the last update", c)
			}
			seen[c.Node] = c
		}
	}
	if c := seen[f.nodes[0]]; c.State != StateCurrent {
		t.Errorf("the first node's cell is %+v, want current", c)
	}
	budget := 0
	for _, c := range seen {
		if c.State == StateWaiting && c.Why == "budget" {
			budget++
		}
	}
	if budget != 4 || u.Reasons[StateWaiting]["budget"] != 4 {
		t.Errorf("after the template change %d cells wait for the budget (reasons %v), want 4", budget, u.Reasons)
	}
}

func TestGridStreamOfAMissingDaemonSet(t *testing.T) {
	f := newFixture(t, 1)
	srv := newTestServer(t, f, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/daemonsets/ns/nope/grid", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	e := <-readEvents(t, res.Body)
	if e.name != "gone" || !strings.Contains(e.data, "ns/nope does not exist") {
		t.Errorf("event %+v, want gone", e)
	}
}

func TestDaemonSetListStream(t *testing.T) {
	f := newFixture(t, 2)
	srv := newTestServer(t, f, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/daemonsets", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	e := <-readEvents(t, res.Body)
	var list []Summary
	if err := json.Unmarshal([]byte(e.data), &list); err != nil || e.name != "daemonsets" {
		t.Fatalf("event %+v: %v", e, err)
	}
	want := Summary{Namespace: "ns", Name: "agent", Strategy: "RollingUpdate", Desired: 2, Current: 2, Ready: 2, Updated: 2, Available: 2}
	if len(list) != 1 || list[0] != want {
		t.Errorf("list %+v, want [%+v]", list, want)
	}
}

func TestNodeExplanation(t *testing.T) {
	f := newFixture(t, 2)
	srv := newTestServer(t, f, Options{})
	res, err := http.Get(srv.URL + "/api/daemonsets/ns/agent/nodes/node-0001")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "Node:") || !strings.Contains(string(body), "node-0001") {
		t.Errorf("%d:\n%s", res.StatusCode, body)
	}
	res, err = http.Get(srv.URL + "/api/daemonsets/ns/agent/nodes/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown node: %d, want 404", res.StatusCode)
	}
}

func post(t *testing.T, url string, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

func TestActions(t *testing.T) {
	f := newFixture(t, 1)
	srv := newTestServer(t, f, Options{})
	paused := func() string {
		ds, err := f.client.AppsV1().DaemonSets("ns").Get(context.Background(), "agent", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds.Annotations[daemon.AnnotationPaused]
	}
	url := srv.URL + "/api/daemonsets/ns/agent/"
	for _, tc := range []struct {
		name   string
		action string
		header map[string]string
		code   int
	}{
		{"without the dashboard's header", "pause", nil, http.StatusForbidden},
		{"from another site's page", "pause", map[string]string{ActionHeader: "1", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"an unknown action", "delete", map[string]string{ActionHeader: "1"}, http.StatusNotFound},
	} {
		if code, body := post(t, url+tc.action, tc.header); code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.code)
		}
	}
	if p := paused(); p != "" {
		t.Fatalf("a refused action paused the DaemonSet (%q)", p)
	}
	code, body := post(t, url+"pause", map[string]string{ActionHeader: "1", "Origin": srv.URL})
	if code != http.StatusOK || !strings.Contains(body, "paused") || paused() != "true" {
		t.Errorf("pause: %d %s, annotation %q", code, body, paused())
	}
	code, body = post(t, url+"resume", map[string]string{ActionHeader: "1"})
	if code != http.StatusOK || paused() != "" {
		t.Errorf("resume: %d %s, annotation %q", code, body, paused())
	}
}

func TestLoopbackOnlyRefusesOtherHosts(t *testing.T) {
	f := newFixture(t, 1)
	srv := newTestServer(t, f, Options{LoopbackOnly: true})
	for host, want := range map[string]int{"evil.example:8765": http.StatusForbidden, "localhost:8765": http.StatusOK,
		"127.0.0.1:8765": http.StatusOK, "[::1]:8765": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, res.StatusCode, want)
		}
	}
}

func TestThePageIsEmbedded(t *testing.T) {
	f := newFixture(t, 1)
	srv := newTestServer(t, f, Options{})
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("%s: %d, %d bytes", path, res.StatusCode, len(body))
		}
		// Everything the page loads comes from the dashboard itself.
		if strings.Contains(string(body), "https://") || strings.Contains(string(body), "http://") {
			t.Errorf("%s names an external address", path)
		}
	}
}

func TestStartSaysWhatItCannotList(t *testing.T) {
	f := newFixture(t, 1)
	f.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC: no"))
	})
	err := NewCache(f.client, "").Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot list pods") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("Start: %v; want it to say it cannot list pods, forbidden", err)
	}
}
