package bench

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		want           Key
	}{
		{"GET", "/api/v1/nodes", Key{"list", "nodes"}},
		{"GET", "/api/v1/nodes/n1", Key{"get", "nodes"}},
		{"GET", "/api/v1/nodes?watch=true&resourceVersion=5", Key{"watch", "nodes"}},
		{"GET", "/api/v1/nodes?watch=1", Key{"watch", "nodes"}},
		{"GET", "/api/v1/nodes?watch=false", Key{"list", "nodes"}},
		{"GET", "/api/v1/watch/nodes", Key{"watch", "nodes"}},
		{"GET", "/api/v1/pods?limit=500", Key{"list", "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods?labelSelector=a%3Db", Key{"list", "pods"}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", Key{"watch", "pods"}},
		{"POST", "/api/v1/namespaces/ns/pods", Key{"create", "pods"}},
		{"POST", "/api/v1/namespaces/ns/pods/p/binding", Key{"create", "pods/binding"}},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", Key{"delete", "pods"}},
		{"DELETE", "/api/v1/namespaces/ns/pods", Key{"deletecollection", "pods"}},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", Key{"update", "pods/status"}},
		{"PATCH", "/api/v1/namespaces/ns/pods/p", Key{"patch", "pods"}},
		{"POST", "/api/v1/namespaces/ns/events", Key{"create", "events"}},
		{"PATCH", "/api/v1/namespaces/ns/events/e1", Key{"patch", "events"}},
		{"GET", "/apis/apps/v1/daemonsets?resourceVersion=0", Key{"list", "daemonsets"}},
		{"GET", "/apis/apps/v1/namespaces/ns/daemonsets/ds", Key{"get", "daemonsets"}},
		{"PUT", "/apis/apps/v1/namespaces/ns/daemonsets/ds/status", Key{"update", "daemonsets/status"}},
		{"PATCH", "/apis/apps/v1/namespaces/ns/daemonsets/ds/status", Key{"patch", "daemonsets/status"}},
		{"POST", "/apis/apps/v1/namespaces/ns/controllerrevisions", Key{"create", "controllerrevisions"}},
		{"GET", "/apis/apps/v1/controllerrevisions?allowWatchBookmarks=true&watch=true", Key{"watch", "controllerrevisions"}},
		{"GET", "/api/v1/namespaces", Key{"list", "namespaces"}},
		{"GET", "/api/v1/namespaces/ns", Key{"get", "namespaces"}},
		{"PUT", "/api/v1/namespaces/ns/status", Key{"update", "namespaces/status"}},
		{"PUT", "/api/v1/namespaces/ns/finalize", Key{"update", "namespaces/finalize"}},
		{"GET", "/version", Key{"get", "/version"}},
		{"GET", "/api", Key{"get", "/api"}},
		{"GET", "/api/v1", Key{"get", "/api/v1"}},
		{"GET", "/apis", Key{"get", "/apis"}},
		{"GET", "/apis/apps/v1", Key{"get", "/apis/apps/v1"}},
		{"GET", "/healthz", Key{"get", "/healthz"}},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if got := Classify(r); got != tc.want {
			t.Errorf("%s %s: got %+v, want %+v", tc.method, tc.target, got, tc.want)
		}
	}
}

func TestProxyCountsAndStreamsWatches(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("watch") == "true":
			io.WriteString(w, `{"type":"ADDED"}`+"\n")
			w.(http.Flusher).Flush()
			<-release // the client must see the first event before the stream goes on
			io.WriteString(w, `{"type":"MODIFIED"}`+"\n")
		case r.Method == http.MethodPut:
			http.Error(w, "conflict", http.StatusConflict)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	proxy := NewProxy(u, http.DefaultTransport)
	front := httptest.NewServer(proxy)
	defer front.Close()

	do := func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, front.URL+path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for range 3 {
		resp := do("POST", "/api/v1/namespaces/ns/pods")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp := do("PUT", "/apis/apps/v1/namespaces/ns/daemonsets/ds/status")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("PUT through the proxy: status %d, want the upstream's 409", resp.StatusCode)
	}
	before := proxy.Snapshot()

	watch := do("GET", "/api/v1/pods?watch=true")
	lines := bufio.NewReader(watch.Body)
	first, err := lines.ReadString('\n')
	if err != nil || !strings.Contains(first, "ADDED") {
		t.Fatalf("first watch event through the proxy: %q, %v", first, err)
	}
	mid := proxy.Snapshot()
	close(release)
	second, _ := lines.ReadString('\n')
	watch.Body.Close()
	if !strings.Contains(second, "MODIFIED") {
		t.Fatalf("second watch event through the proxy: %q", second)
	}

	if diff := cmp.Diff(Counts{
		{"create", "pods"}:              {Requests: 3, Bytes: 6},
		{"update", "daemonsets/status"}: {Requests: 1, Errors: 1, Bytes: int64(len("conflict\n"))},
	}, before); diff != "" {
		t.Errorf("counts before the watch (-want +got):\n%s", diff)
	}
	// An open watch is counted when it opens, its bytes as they flow.
	if got := mid.Sub(before); !cmp.Equal(got, Counts{{"watch", "pods"}: {Requests: 1, Bytes: int64(len(first))}}) {
		t.Errorf("counts while the watch is open, less those before: %v", got)
	}
	if got := proxy.Snapshot().Verb("create"); got.Requests != 3 {
		t.Errorf("creates: %+v", got)
	}
}

func TestCountsArithmetic(t *testing.T) {
	earlier := Counts{
		{"create", "pods"}:              {Requests: 10, Bytes: 100},
		{"update", "daemonsets/status"}: {Requests: 2, Errors: 1},
		{"watch", "nodes"}:              {Requests: 1, Bytes: 50},
	}
	later := Counts{
		{"create", "pods"}:              {Requests: 25, Bytes: 250},
		{"update", "daemonsets/status"}: {Requests: 2, Errors: 1},
		{"watch", "nodes"}:              {Requests: 1, Bytes: 80},
		{"delete", "pods"}:              {Requests: 4, Errors: 1},
		{"patch", "daemonsets/status"}:  {Requests: 3},
		{"get", "/version"}:             {Requests: 1},
	}
	d := later.Sub(earlier)
	want := Counts{
		{"create", "pods"}:             {Requests: 15, Bytes: 150},
		{"watch", "nodes"}:             {Bytes: 30},
		{"delete", "pods"}:             {Requests: 4, Errors: 1},
		{"patch", "daemonsets/status"}: {Requests: 3},
		{"get", "/version"}:            {Requests: 1},
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Sub (-want +got):\n%s", diff)
	}
	if got := d.Total(); got != (Tally{Requests: 23, Errors: 1, Bytes: 180}) {
		t.Errorf("Total: %+v", got)
	}
	if got := d.Verb("patch"); got.Requests != 3 {
		t.Errorf("Verb(patch): %+v", got)
	}
	if got := d.StatusWrites(); got != 3 {
		t.Errorf("StatusWrites: %d", got)
	}
	var order []Key
	order = append(order, d.Keys()...)
	wantOrder := []Key{{"get", "/version"}, {"watch", "nodes"}, {"create", "pods"}, {"patch", "daemonsets/status"}, {"delete", "pods"}}
	if diff := cmp.Diff(wantOrder, order); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
}
