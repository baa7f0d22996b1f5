package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fakeAPI is an upstream that answers pods the way the API server does, closely
// enough for client-go, and counts what reaches it.
type fakeAPI struct {
	server  *httptest.Server
	reached atomic.Int64
	writes  atomic.Int64
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			// An event every few milliseconds until the client or the proxy ends it.
			for i := 0; ; i++ {
				pod := v1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns", ResourceVersion: fmt.Sprint(10 + i)}}
				raw, _ := json.Marshal(&pod)
				line, _ := json.Marshal(map[string]any{"type": "ADDED", "object": json.RawMessage(raw)})
				if _, err := w.Write(append(line, '\n')); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		case r.Method == http.MethodPost:
			f.writes.Add(1)
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}}`)
		case strings.HasPrefix(r.URL.Path, "/api/v1/"):
			io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[]}`)
		default:
			io.WriteString(w, `{"major":"1","minor":"37"}`)
		}
	}))
	t.Cleanup(f.server.Close)
	return f
}

// faultyProxy serves a Proxy in front of upstream with faults f.
func faultyProxy(t *testing.T, upstream *fakeAPI, f *Faults) (*Proxy, *httptest.Server) {
	t.Helper()
	u, _ := url.Parse(upstream.server.URL)
	p := NewProxy(u, http.DefaultTransport)
	if err := p.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return p, front
}

func clientOf(t *testing.T, front *httptest.Server) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: front.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newPod() *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"}} }

func TestFaultsServerErrorIsTheAPIServersInternalError(t *testing.T) {
	api := newFakeAPI(t)
	p, front := faultyProxy(t, api, &Faults{ServerErrors: 1})
	_, err := clientOf(t, front).CoreV1().Pods("ns").Create(context.Background(), newPod(), metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) {
		t.Fatalf("create through a proxy answering 500: %v, want an InternalError Status", err)
	}
	if n := api.reached.Load(); n != 0 {
		t.Errorf("the API server got %d requests, want none", n)
	}
	if got := p.FaultCounts(); got != (FaultCounts{ServerErrors: 1}) {
		t.Errorf("fault counts %+v", got)
	}
	if got := p.Snapshot().Get("create", "pods"); got.Requests != 1 || got.Errors != 1 {
		t.Errorf("the faulted create is counted %+v, want one request, one error", got)
	}
}

func TestFaultsThrottleSaysRetryAfterAndClientGoWaits(t *testing.T) {
	api := newFakeAPI(t)
	p, front := faultyProxy(t, api, &Faults{Throttles: 1})

	resp, err := http.Post(front.URL+"/api/v1/namespaces/ns/pods", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	var status metav1.Status
	err = json.NewDecoder(resp.Body).Decode(&status)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		status.Reason != metav1.StatusReasonTooManyRequests || status.Details == nil || status.Details.RetryAfterSeconds != 1 {
		t.Fatalf("throttled answer: %d, Retry-After %q, status %+v (%v)", resp.StatusCode, resp.Header.Get("Retry-After"), status, err)
	}

	// client-go waits the second it is told and sends the create again; by then the
	// proxy lets it through.
	done := make(chan error, 1)
	go func() {
		_, err := clientOf(t, front).CoreV1().Pods("ns").Create(context.Background(), newPod(), metav1.CreateOptions{})
		done <- err
	}()
	for p.FaultCounts().Throttles < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.SetFaults(nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("client-go's create after one 429: %v", err)
	}
	if n := api.writes.Load(); n != 1 {
		t.Errorf("the API server got %d creates, want the one retried", n)
	}
	if got := p.Snapshot().Get("create", "pods"); got.Requests != 3 || got.Errors != 2 {
		t.Errorf("creates counted %+v, want 3 requests of which 2 throttled", got)
	}
}

// A stalled request never reaches the API server; a request whose answer is lost
// does. The client gets an error either way.
func TestFaultsStallAndLostAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		faults  Faults
		creates int64
	}{
		{"stall", Faults{Stalls: 1, Hold: 20 * time.Millisecond}, 0},
		{"lost answer", Faults{LostAnswers: 1, Hold: 20 * time.Millisecond}, 1},
	} {
		api := newFakeAPI(t)
		p, front := faultyProxy(t, api, &tc.faults)
		if _, err := clientOf(t, front).CoreV1().Pods("ns").Create(context.Background(), newPod(), metav1.CreateOptions{}); err == nil {
			t.Errorf("%s: the create succeeded", tc.name)
		}
		if n := api.writes.Load(); n != tc.creates {
			t.Errorf("%s: the API server got %d creates, want %d", tc.name, n, tc.creates)
		}
		if got := p.FaultCounts(); got.Total() != 1 || got.Stalls+got.LostAnswers != 1 {
			t.Errorf("%s: fault counts %+v", tc.name, got)
		}
	}
}

func TestFaultsClientTimeoutEndsAHold(t *testing.T) {
	api := newFakeAPI(t)
	_, front := faultyProxy(t, api, &Faults{Stalls: 1, Hold: time.Hour})
	c := &http.Client{Timeout: 50 * time.Millisecond}
	resp, err := c.Post(front.URL+"/api/v1/namespaces/ns/pods", "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a request held for an hour was answered %d", resp.StatusCode)
	}
	// The proxy lets go of the request when the client does: closing the front
	// server (at cleanup) does not wait for the hour.
}

func TestFaultsCutWatches(t *testing.T) {
	api := newFakeAPI(t)
	for _, tc := range []struct {
		resets float64
		want   FaultCounts
	}{{0, FaultCounts{WatchEnds: 1}}, {1, FaultCounts{WatchResets: 1}}} {
		p, front := faultyProxy(t, api, &Faults{WatchMin: 50 * time.Millisecond, WatchMax: 100 * time.Millisecond, WatchResets: tc.resets})
		resp, err := http.Get(front.URL + "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=9")
		if err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewReader(resp.Body)
		events := 0
		for {
			line, err := lines.ReadString('\n')
			if err != nil {
				if reset := err != io.EOF; reset != (tc.resets == 1) {
					t.Errorf("WatchResets %v: the watch broke off with %v after %d events", tc.resets, err, events)
				}
				break
			}
			if strings.Contains(line, `"ADDED"`) {
				events++
			}
		}
		resp.Body.Close()
		if events == 0 {
			t.Error("no event came through before the cut")
		}
		if got := p.FaultCounts(); got != tc.want {
			t.Errorf("WatchResets %v: fault counts %+v, want %+v", tc.resets, got, tc.want)
		}
	}
}

func TestFaultsExpireWatchResumes(t *testing.T) {
	api := newFakeAPI(t)
	p, front := faultyProxy(t, api, &Faults{Expired: 1})
	pods := clientOf(t, front).CoreV1().Pods("ns")

	w, err := pods.Watch(context.Background(), metav1.ListOptions{ResourceVersion: "41"})
	if err != nil {
		t.Fatal(err)
	}
	ev, ok := <-w.ResultChan()
	w.Stop()
	if !ok || ev.Type != watch.Error {
		t.Fatalf("first event of an expired resume: %v %v, want an ERROR event", ev.Type, ok)
	}
	err = apierrors.FromObject(ev.Object)
	if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "too old resource version: 41 (42)") {
		t.Errorf("the ERROR event says %v, want 410 Expired, too old resource version", err)
	}
	if n := api.reached.Load(); n != 0 {
		t.Errorf("the API server got %d requests, want none", n)
	}

	// A watch that starts afresh, or lists as it starts, has nothing to resume.
	for _, opts := range []metav1.ListOptions{{}, {ResourceVersion: "0"}, {ResourceVersion: "41", SendInitialEvents: new(bool(true)), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}} {
		w, err := pods.Watch(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		ev := <-w.ResultChan()
		w.Stop()
		if ev.Type != watch.Added {
			t.Errorf("watch %+v: first event %v %v, want the API server's ADDED", opts, ev.Type, ev.Object)
		}
	}
	if got := p.FaultCounts(); got != (FaultCounts{Expired: 1}) {
		t.Errorf("fault counts %+v", got)
	}
}

func TestFaultsLeaveDiscoveryAlone(t *testing.T) {
	api := newFakeAPI(t)
	p, front := faultyProxy(t, api, &Faults{ServerErrors: 1})
	for _, path := range []string{"/version", "/api", "/apis/apps/v1", "/healthz"} {
		resp, err := http.Get(front.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s through the faulty proxy: %d", path, resp.StatusCode)
		}
	}
	if got := p.FaultCounts().Total(); got != 0 {
		t.Errorf("%d faults injected into discovery", got)
	}
}

// outcomes sends n requests one after another and notes how each was answered.
func outcomes(t *testing.T, f Faults, n int) []string {
	t.Helper()
	api := newFakeAPI(t)
	_, front := faultyProxy(t, api, &f)
	var out []string
	for range n {
		resp, err := http.Get(front.URL + "/api/v1/namespaces/ns/pods")
		if err != nil {
			out = append(out, "dropped")
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out = append(out, resp.Status)
	}
	return out
}

func TestFaultsSameSeedSameDraws(t *testing.T) {
	f := Faults{Seed: 7, ServerErrors: 0.2, Throttles: 0.2, Stalls: 0.1, LostAnswers: 0.1, Hold: time.Millisecond}
	first, again := outcomes(t, f, 60), outcomes(t, f, 60)
	if strings.Join(first, ",") != strings.Join(again, ",") {
		t.Errorf("seed 7 drew\n%v\nthen\n%v", first, again)
	}
	f.Seed = 8
	if other := outcomes(t, f, 60); strings.Join(first, ",") == strings.Join(other, ",") {
		t.Errorf("seeds 7 and 8 drew the same %v", other)
	}
	kinds := map[string]int{}
	for _, o := range first {
		kinds[o]++
	}
	if len(kinds) != 4 {
		t.Errorf("60 requests met %v, want every kind of answer: 200, 500, 429 and dropped", kinds)
	}
}

func TestFaultsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Faults
		ok   bool
	}{
		{"none", Faults{}, true},
		{"everything", Faults{ServerErrors: 0.1, Throttles: 0.1, Stalls: 0.1, LostAnswers: 0.1, Hold: time.Second, WatchMin: time.Second, WatchMax: 2 * time.Second, WatchResets: 0.5, Expired: 0.5}, true},
		{"share above one", Faults{Expired: 1.5}, false},
		{"negative share", Faults{ServerErrors: -0.1}, false},
		{"shares add up past one", Faults{ServerErrors: 0.6, Throttles: 0.6}, false},
		{"stalls without a hold", Faults{Stalls: 0.1}, false},
		{"lost answers without a hold", Faults{LostAnswers: 0.1}, false},
		{"watch lifetimes reversed", Faults{WatchMin: 2 * time.Second, WatchMax: time.Second}, false},
	} {
		if err := tc.f.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %t", tc.name, err, tc.ok)
		}
	}
}

func TestFaultsSetLaterCutWatchesAlreadyOpen(t *testing.T) {
	api := newFakeAPI(t)
	p, front := faultyProxy(t, api, nil)
	open := func() *bufio.Reader {
		resp, err := http.Get(front.URL + "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=9")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		return r
	}
	drain := func(r *bufio.Reader) error {
		for {
			if _, err := r.ReadString('\n'); err != nil {
				return err
			}
		}
	}
	first := open()
	if err := p.SetFaults(&Faults{WatchMin: 20 * time.Millisecond, WatchMax: 40 * time.Millisecond, WatchResets: 1}); err != nil {
		t.Fatal(err)
	}
	if err := drain(first); err == io.EOF {
		t.Error("the watch open before the faults ended cleanly, want it cut")
	}
	if got := p.FaultCounts(); got != (FaultCounts{WatchResets: 1}) {
		t.Errorf("fault counts %+v, want the one cut", got)
	}

	// Once the faults are off, a watch opened under them is no longer cut: it
	// streams on past the lifetime it was given.
	if err := p.SetFaults(&Faults{WatchMin: 300 * time.Millisecond, WatchMax: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	second := open()
	if err := p.SetFaults(nil); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); {
		if _, err := second.ReadString('\n'); err != nil {
			t.Fatalf("a watch was cut after the faults were turned off: %v", err)
		}
	}
	if got := p.FaultCounts(); got != (FaultCounts{WatchResets: 1}) {
		t.Errorf("fault counts %+v, want still the one cut", got)
	}
}
